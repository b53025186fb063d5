"""Many reports, one leaderboard (docs/leaderboard.md): what `unlearnbench
site` reads and what its pages, leaderboard.csv and leaderboard.json show.

**Reading.** Folders are searched for report.json files; each is loaded
as `unlearnbench report` loads it (schema versions it knows, the
assessment recomputed). A file that cannot be read is skipped with one line
naming it; a run whose id appears in a merged report's `merged_from` is read
from the merged report only; two files claiming one run id with different
content are both kept, the second under `<id>~2`, and said.

**Rows.** A checkpoint is its weights' fingerprint: seen in several runs it
is one row listing its runs (each suite's values from the latest run that
evaluated it); one name on different fingerprints gives several rows, each
marked. The reference models (full, retain) are anchor rows, never ranked.

**Comparable settings.** A suite's results are comparable when evaluated on
the same data (fingerprint), by the same suite version, under the same gate
(each check's metric, direction, reference, margin or bound and decision
rule) and against the same reference models. Where one suite was run under
several settings, every setting of it opens its own group, the page says what
differs, and rows are ranked within their group only, by the report's own rule
(report/verdicts.py: the group is assessed as one report).

**Axes.** Per suite, one forget value and one utility value: the suite's
`headline` metrics (SuiteSpec), else the metric of its first check on that
axis. The Pareto front of a suite is the set of candidates that no other
candidate matches or beats on both axes, each oriented so that more is better.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from dataclasses import dataclass
from pathlib import Path

from unlearnbench.report.merge import gate_signature
from unlearnbench.report.model import CheckResult
from unlearnbench.report.schema import load_report
from unlearnbench.report.verdicts import anchors, assess

SCHEMA = "unlearnbench.leaderboard"
SCHEMA_VERSION = 1
AXES = ("forget", "utility")
RANKING_FIELDS = (
    "passed",
    "failed",
    "inconclusive",
    "utility_failed",
    "utility_checks",
    "utility",
    "forget_passed",
    "forget_failed",
    "forget_checks",
    "collapsed",
    "margin",
)


@dataclass
class Run:
    """One report read for the site: its file, its (unique) run id, the report without its per-item
    values and item details (`slim`: what the leaderboard reads; the pages read the file again, one run at a
    time, so that a site of many large reports never holds them all), and the digest of the file."""

    file: Path
    id: str
    report: dict
    digest: str

    @property
    def started(self) -> str:
        return str(self.report["run"].get("started_at") or "")


# ------------------------------------------------------------------ reading
def find_reports(paths: list[Path]) -> list[Path]:
    """Every report.json under `paths` (folders searched recursively, files
    taken as given), each file once however it is reached (the `latest` link)."""
    found: dict[Path, Path] = {}
    for path in map(Path, paths):
        if not path.exists():
            raise ValueError(f"{path}: no such file or folder")
        files = sorted(path.rglob("report.json")) if path.is_dir() else [path]
        for file in files:
            found.setdefault(file.resolve(), file)
    if not found:
        raise ValueError(
            f"no report.json under {', '.join(map(str, paths))}: run pytest suites first "
            "(its reports are written under reports/)"
        )
    return sorted(found.values(), key=str)


def digest(data: bytes) -> str:
    """The digest of a report file's bytes: two files of one run id are one run only when they are copies."""
    return hashlib.sha256(data).hexdigest()


# What the leaderboard reads of a metric (its value, interval and n; which way is better) and of a verdict (its
# outcome and value against its gate for the ranking, the gate's fields for comparable settings, interval and n).
METRIC_FIELDS = ("name", "value", "n", "ci", "higher_is_better", "unavailable")
VERDICT_FIELDS = (
    "check",
    "metric",
    "outcome",
    "value",
    "ci",
    "n",
    "bound",
    "direction",
    "axis",
    "relative_to",
    "margin",
    "strict_ci",
    "rule",
    "alpha",
    "correction",
)


def slim(report: dict) -> dict:
    """`report` (in place) with only what the leaderboard reads: metrics without their per-item values, item
    details and parameters, and verdicts without their reasons and decision details (the pages read those
    from the file)."""
    for checkpoint in report["checkpoints"].values():
        for result in checkpoint.get("suites", {}).values():
            result["metrics"] = {
                name: {k: m[k] for k in METRIC_FIELDS if k in m}
                for name, m in (result.get("metrics") or {}).items()
                if isinstance(m, dict)
            }
            result["checks"] = {
                name: {k: v[k] for k in VERDICT_FIELDS if k in v} for name, v in (result.get("checks") or {}).items()
            }
    return report


@dataclass
class Note:
    """A file not read as given: `problem` (unreadable, or a run id claimed twice) or not (a shard read
    through its merged report, a copy)."""

    file: Path
    text: str
    problem: bool

    def __str__(self) -> str:
        return self.text


def read_runs(files: list[Path]) -> tuple[list[Run], list[Note]]:
    """(runs, notes): the readable reports as runs, and one note per file
    skipped or renamed (see the module's docstring)."""
    notes, loaded = [], []
    for file in files:
        try:
            report = load_report(file)
            run_id = str(report["run"].get("id") or file.parent.name)
            report["checkpoints"].items()
        except ValueError as exc:
            notes.append(Note(file, f"skipped {exc}", problem=True))
            continue
        except (KeyError, TypeError, AttributeError) as exc:
            notes.append(
                Note(file, f"skipped {file}: not a complete report ({type(exc).__name__}: {exc})", problem=True)
            )
            continue
        loaded.append((file, run_id, digest(file.read_bytes()), slim(report)))
    merged_into = {
        entry.get("run_id"): (run_id, file)
        for file, run_id, _, report in loaded
        for entry in report.get("merged_from") or []
        if isinstance(entry, dict)
    }
    runs: list[Run] = []
    by_id: dict[str, list[Run]] = {}
    for file, run_id, file_digest, report in loaded:
        if run_id in merged_into:
            merged_id, merged_file = merged_into[run_id]
            notes.append(
                Note(file, f"read {file} (run {run_id}) through merged run {merged_id} ({merged_file})", problem=False)
            )
            continue
        same = by_id.setdefault(run_id, [])
        copy = next((r for r in same if r.digest == file_digest), None)
        if copy is not None:
            notes.append(Note(file, f"skipped {file}: a copy of run {run_id} ({copy.file})", problem=False))
            continue
        unique = run_id if not same else f"{run_id}~{len(same) + 1}"
        if same:
            notes.append(
                Note(
                    file,
                    f"{file} claims run id {run_id} of {same[0].file} with different content: "
                    f"both are shown, this one as {unique}",
                    problem=True,
                )
            )
        run = Run(file=file, id=unique, report=report, digest=file_digest)
        same.append(run)
        runs.append(run)
    runs.sort(key=lambda r: (r.started, r.id))
    return runs, notes


# ------------------------------------------------------------------ settings
def _settings(run: Run) -> dict[str, dict]:
    """{suite: setting} of a run: what its results on that suite depend on besides the checkpoint."""
    report = run.report
    references = {role: (info or {}).get("fingerprint") for role, info in (report.get("references") or {}).items()}
    out: dict[str, dict] = {}
    for checkpoint in report["checkpoints"].values():
        for suite, result in checkpoint.get("suites", {}).items():
            setting = out.setdefault(
                suite, {"data": None, "data_source": None, "suite_version": None, "gate": {}, "references": {}}
            )
            data = result.get("data") or {}
            setting["data"] = setting["data"] or data.get("fingerprint")
            setting["data_source"] = setting["data_source"] or data.get("source")
            setting["suite_version"] = setting["suite_version"] or data.get("suite_version")
            for check, verdict in result.get("checks", {}).items():
                if verdict.get("outcome") in ("error", None) or "direction" not in verdict:
                    continue
                setting["gate"].setdefault(check, list(gate_signature(CheckResult.model_validate(verdict))))
                role = verdict.get("relative_to")
                if role:
                    setting["references"][role] = references.get(role)
    return out


def _agree(a: dict, b: dict) -> bool:
    """Whether two mappings agree wherever both have a value."""
    return all(a[k] == b[k] for k in set(a) & set(b) if a[k] is not None and b[k] is not None)


def _comparable(a: dict, b: dict) -> bool:
    """Two settings of one suite are comparable when their data is the same, their suite versions are (or
    one is not recorded), and their gates and reference models agree on every check and role both have: a
    run that left a check out (or ran without the retain model) is not another setting."""
    return (
        a["data"] == b["data"]
        and _agree({"v": a["suite_version"]}, {"v": b["suite_version"]})
        and _agree(a["gate"], b["gate"])
        and _agree(a["references"], b["references"])
    )


def setting_ids(runs: list[Run]) -> tuple[dict[tuple[str, str], str], dict[str, dict[str, dict]]]:
    """({(run id, suite): setting id}, {suite: {setting id: setting}}): each run's setting of a suite joins
    the first comparable one (the most complete first), which takes on what it adds (checks, roles, a
    version); a schema 1 or 2 report records no suite version and joins the one it matches otherwise."""
    raw = [(run.id, suite, s) for run in runs for suite, s in _settings(run).items()]
    raw.sort(key=lambda r: (r[2]["suite_version"] is None, -len(r[2]["gate"]), -len(r[2]["references"])))
    ids: dict[tuple[str, str], str] = {}
    table: dict[str, dict[str, dict]] = {}
    for run_id, suite, s in raw:
        found = table.setdefault(suite, {})
        sid = next((k for k, other in found.items() if _comparable(s, other)), None)
        if sid is None:
            sid = f"{suite}-{len(found) + 1}"
            found[sid] = s | {"gate": dict(s["gate"]), "references": dict(s["references"]), "runs": []}
        setting = found[sid]
        setting["gate"].update({c: g for c, g in s["gate"].items() if c not in setting["gate"]})
        setting["references"].update({r: f for r, f in s["references"].items() if setting["references"].get(r) is None})
        setting["suite_version"] = setting["suite_version"] or s["suite_version"]
        setting["runs"].append(run_id)
        ids[(run_id, suite)] = sid
    return ids, table


def differences(settings: dict[str, dict]) -> list[str]:
    """What differs between the settings of one suite, in words."""
    values = list(settings.values())
    out = []
    if len({s["data"] for s in values}) > 1:
        out.append("data: " + " vs ".join(f"{s['data']} ({s['data_source']})" for s in values))
    if len({s["suite_version"] for s in values}) > 1:
        out.append("suite version: " + " vs ".join(str(s["suite_version"] or "not recorded") for s in values))
    if len({json.dumps(s["references"], sort_keys=True) for s in values}) > 1:
        out.append(
            "reference models: "
            + " vs ".join(
                ", ".join(f"{role} {fp}" for role, fp in sorted(s["references"].items())) or "none" for s in values
            )
        )
    fields = ("metric", "direction", "relative to", "margin", "strict CI", "rule", "alpha", "correction", "bound")
    for check in sorted(set.intersection(*(set(s["gate"]) for s in values))):  # a check left out is no difference
        signatures = [s["gate"][check] for s in values]
        changed = [i for i in range(len(fields)) if len({json.dumps(sig[i]) for sig in signatures}) > 1]
        if changed:
            out.append(
                f"check {check}: {', '.join(fields[i] for i in changed)} "
                + " vs ".join(
                    "/".join("not recorded" if sig[i] is None else str(sig[i]) for i in changed) for sig in signatures
                )
            )
    return out


# ------------------------------------------------------------------ rows and groups
@dataclass
class Evaluation:
    """One checkpoint in one run."""

    run: Run
    name: str
    checkpoint: dict
    role: str | None
    key: str  # the checkpoint's identity across runs: its fingerprint


def checkpoint_key(run_id: str, name: str, checkpoint: dict) -> str:
    """A checkpoint's identity across runs: its weights' fingerprint (a report without one: the run and name)."""
    return (checkpoint.get("info") or {}).get("fingerprint") or f"{run_id}/{name}"


def _evaluations(runs: list[Run]) -> list[Evaluation]:
    out = []
    for run in runs:
        roles = anchors(run.report)
        for name, checkpoint in run.report["checkpoints"].items():
            out.append(Evaluation(run, name, checkpoint, roles.get(name), checkpoint_key(run.id, name, checkpoint)))
    return out


def _primary(evaluations: list[Evaluation], ids: dict, split: set) -> dict[str, str]:
    """{suite: setting id} of the main comparison: of each suite run under
    several settings, the one most checkpoints were evaluated under; on a tie,
    the one evaluated beside the most other results (suites of the same runs),
    then the latest run's."""
    score: dict[tuple[str, str], list] = {}
    for e in evaluations:
        for suite in e.checkpoint.get("suites", {}):
            if suite in split:
                entry = score.setdefault((suite, ids[(e.run.id, suite)]), [0, 0, ""])
                entry[0] += 1
                entry[1] += len(e.checkpoint["suites"])
                entry[2] = max(entry[2], e.run.started)
    return {suite: max((k for k in score if k[0] == suite), key=lambda k: score[k])[1] for suite in sorted(split)}


def headline_axes(suite: str, results: list[dict]) -> dict[str, dict]:
    """{axis: {metric, higher_is_better, log}} of a suite: its SuiteSpec
    `headline`, else, per axis, the metric of its first check on that axis
    (by name) in `results`."""
    from unlearnbench.suites import SUITES

    declared = dict(SUITES[suite].headline) if suite in SUITES else {}
    logs = {m.name for m in SUITES[suite].declared if m.log_scale} if suite in SUITES else set()
    checks = sorted(
        ((c, v) for r in results for c, v in r.get("checks", {}).items() if v.get("axis")), key=lambda cv: cv[0]
    )
    out = {}
    for axis in AXES:
        metric = declared.get(axis) or next((v.get("metric") for _, v in checks if v["axis"] == axis), None)
        higher = next(
            (
                r["metrics"][metric].get("higher_is_better")
                for r in results
                if isinstance(r.get("metrics", {}).get(metric), dict) and "higher_is_better" in r["metrics"][metric]
            ),
            None,
        )
        if higher is None:
            higher = next((v.get("direction") == "at_least" for _, v in checks if v.get("metric") == metric), True)
        if metric and any(metric in r.get("metrics", {}) for r in results):
            out[axis] = {"metric": metric, "higher_is_better": bool(higher), "log": metric in logs}
    return out


def pareto(points: dict[str, tuple[float, float]]) -> list[str]:
    """The ids whose (a, b), both more-is-better, no other point matches or beats on both with one strictly."""
    return [
        i
        for i, (a, b) in points.items()
        if not any(a2 >= a and b2 >= b and (a2 > a or b2 > b) for j, (a2, b2) in points.items() if j != i)
    ]


def _value(metric: dict | None) -> dict | None:
    if not isinstance(metric, dict) or metric.get("value") is None:
        return None
    ci = metric.get("ci") or [None, None]
    return {"value": metric["value"], "ci_low": ci[0], "ci_high": ci[1], "n": metric.get("n")}


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)[:80] or "_"


def method_of(name: str, series: str | None) -> str:
    """A checkpoint's method, for colours: its training run's name, else its
    name up to the first '-', '_', '@' or '.' (npo-lr1e-5 -> npo)."""
    if series:
        return series
    for i, c in enumerate(name):
        if c in "-_@." and i > 0:
            return name[:i]
    return name


def build(runs: list[Run]) -> dict:
    """The leaderboard: {schema, schema_version, runs, groups: [{id, title,
    settings, differs, suites, axes, rule, shared_checks, rows, pareto}]}."""
    ids, settings = setting_ids(runs)
    split = {suite for suite, found in settings.items() if len(found) > 1}
    evaluations = _evaluations(runs)
    primary = _primary(evaluations, ids, split)
    names_of: dict[str, set] = {}
    first_name: dict[str, str] = {}
    for e in evaluations:  # in run order
        names_of.setdefault(e.name, set()).add(e.key)
        first_name.setdefault(e.key, e.name)
    # checkpoint key -> (its label on every page: its first name, with its fingerprint where another
    # checkpoint has that name; the file name of its page)
    labels: dict[str, tuple[str, str]] = {}
    taken: set[str] = set()  # labels and slugs given
    for key, name in first_name.items():
        label = name if len(names_of[name]) == 1 else f"{name} · {key[:8]}"
        while label in taken:  # two unfingerprinted checkpoints of one name
            label += "'"
        slug, n = _slug(label), 2
        while "/" + slug in taken:
            slug, n = f"{_slug(label)}-{n}", n + 1
        taken |= {label, "/" + slug}
        labels[key] = (label, slug)
    # The main comparison holds every result evaluated under the main setting of its suite; each other
    # setting of a suite is a group of its own, of that suite's results only. Every result is in one group.
    main = [
        (e, {s for s in e.checkpoint.get("suites", {}) if s not in split or ids[(e.run.id, s)] == primary[s]})
        for e in evaluations
    ]
    plan: list[tuple[dict[str, str], str | None, list]] = [
        (primary, None, [(e, only) for e, only in main if only or not e.checkpoint.get("suites")])
    ]
    for suite in sorted(split):
        for sid in settings[suite]:
            if sid != primary[suite]:
                plan.append(
                    ({suite: sid}, suite, [(e, {suite}) for e in evaluations if ids.get((e.run.id, suite)) == sid])
                )
    out_groups = []
    for number, (setting, other, members) in enumerate(plan, start=1):
        group = _group(number, members, ids, settings, labels, names_of)
        group |= {
            "key": setting,
            "title": _title(setting, settings, other),
            "differs": (
                {other: differences({sid: settings[other][sid] for sid in (primary[other], setting[other])})}
                if other
                else {}
            ),
        }
        out_groups.append(group)
    return {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "runs": [
            {
                "id": r.id,
                "file": str(r.file),
                "started_at": r.report["run"].get("started_at"),
                "schema_version": r.report.get("upgraded_from") or r.report.get("schema_version"),  # the file's
                "checkpoints": list(r.report["checkpoints"]),
            }
            for r in runs
        ],
        "groups": out_groups,
    }


def _group(
    number: int,
    members: list[tuple[Evaluation, set]],
    ids: dict,
    settings: dict,
    labels: dict[str, tuple[str, str]],
    names_of: dict[str, set],
) -> dict:
    """One group's rows, ranked by the report's rule; `members` are (evaluation, the suites of it the
    group holds)."""
    by_checkpoint: dict[str, list[Evaluation]] = {}
    held = {id(e): only for e, only in members}
    for e, _ in members:
        by_checkpoint.setdefault(e.key, []).append(e)
    key_of_label, combined, anchor_roles = {}, {}, {}
    for key, evals in by_checkpoint.items():
        evals.sort(key=lambda e: (e.run.started, e.run.id))
        label = labels[key][0]
        key_of_label[label] = key
        held_results: dict[str, dict] = {}
        for e in evals:  # the latest run's results of each suite win
            held_results.update({s: r for s, r in e.checkpoint.get("suites", {}).items() if s in held[id(e)]})
        info = dict(evals[-1].checkpoint.get("info") or {}) | {"name": label}
        combined[label] = {"info": info, "suites": held_results}
        if any(e.checkpoint.get("lost") for e in evals):
            combined[label]["lost"] = next(e.checkpoint["lost"] for e in evals if e.checkpoint.get("lost"))
        role = next((e.role for e in evals if e.role), None)
        if role:
            anchor_roles[label] = role
    # The group assessed as one report, by the report's own rule.
    synthetic = {"run": {"anchors": anchor_roles}, "references": {}, "checkpoints": combined}
    assessment = assess(synthetic)
    board = assessment["ranking"]
    ranked = {r["checkpoint"]: r for r in board["rows"]}
    step_rank = {
        s["checkpoint"]: r["rank"] for r in board["rows"] if r.get("series") for s in board["series"][r["series"]]
    }
    unranked = {r["checkpoint"]: r["reason"] for r in board["unranked"]}
    suites = list(dict.fromkeys(s for label in assessment["order"] for s in combined[label]["suites"]))
    axes = {s: headline_axes(s, [c["suites"][s] for c in combined.values() if s in c["suites"]]) for s in suites}
    rows = []
    for label in assessment["order"]:
        evals = by_checkpoint[key_of_label[label]]
        checkpoint, verdict = combined[label], assessment["verdicts"][label]
        info = checkpoint["info"]
        row = {
            "id": labels[key_of_label[label]][1],
            "key": key_of_label[label],
            "checkpoint": label,
            "names": sorted({e.name for e in evals}),
            "fingerprint": info.get("fingerprint"),
            "source": info.get("source"),
            "role": verdict["role"],
            "method": method_of(evals[0].name, info.get("series")),
            "series": info.get("series"),
            "step": info.get("step"),
            "name_clash": len(names_of[evals[0].name]) > 1,
            "runs": list(dict.fromkeys(e.run.id for e in evals)),
            "rank": ranked[label]["rank"] if label in ranked else step_rank.get(label),
            "best_step": label in ranked if label in step_rank else None,
            "verdict": verdict["verdict"],
            "summary": verdict["summary"],
            "not_ranked": (f"{verdict['role']} model: anchor, not ranked" if verdict["role"] else unranked.get(label)),
            "ranking": ({k: ranked[label][k] for k in RANKING_FIELDS} if label in ranked else None),
            "suites": {},
        }
        for suite, result in checkpoint["suites"].items():
            counts = verdict["suites"][suite]
            run_id = next(e.run.id for e in reversed(evals) if suite in held[id(e)])
            row["suites"][suite] = {
                "verdict": counts["verdict"],
                "passed": counts["passed"],
                "judged": counts["judged"],
                "run": run_id,
                **{
                    axis: (_value(result.get("metrics", {}).get(spec["metric"])) or None)
                    for axis, spec in axes[suite].items()
                },
            }
        rows.append(row)
    fronts = {}
    for suite, spec in axes.items():
        if set(spec) != set(AXES):
            continue
        sign = {axis: 1 if spec[axis]["higher_is_better"] else -1 for axis in AXES}
        points = {
            r["id"]: (
                sign["forget"] * r["suites"][suite]["forget"]["value"],
                sign["utility"] * r["suites"][suite]["utility"]["value"],
            )
            for r in rows
            if not r["role"]
            and suite in r["suites"]
            and r["suites"][suite].get("forget")
            and r["suites"][suite].get("utility")
        }
        front = set(pareto(points))
        fronts[suite] = [r["id"] for r in rows if r["id"] in front]
    group_settings = {
        suite: settings[suite][next(ids[(e.run.id, suite)] for e, only in members if suite in only)] for suite in suites
    }
    return {
        "id": f"g{number}",
        "settings": group_settings,
        "suites": suites,
        "axes": axes,
        "rule": board["rule"],
        "shared_checks": board["shared_checks"],
        "rows": rows,
        "pareto": fronts,
    }


def _title(key: dict, settings: dict, other: str | None) -> str:
    """'Main comparison' (naming the settings chosen where a suite has several), or '<suite> under another
    setting: data ...'."""

    def describe(suite: str, sid: str) -> str:
        s = settings[suite][sid]
        version = f", suite v{s['suite_version']}" if s["suite_version"] is not None else ""
        return f"{suite} on data {s['data']}{version}"

    if other:
        return f"{other} under another setting: {describe(other, key[other])}"
    if not key:
        return "Leaderboard"
    return "Main comparison: " + "; ".join(describe(suite, sid) for suite, sid in sorted(key.items()))


# ------------------------------------------------------------------ export
def to_csv(board: dict) -> str:
    """leaderboard.csv: one line per (group, row); per suite its verdict, the
    forget and utility values with their 95% interval and n, and whether the
    row is on the suite's Pareto front."""
    columns = ["group", "rank", "checkpoint", "fingerprint", "role", "method", "series", "step", "verdict", "runs"]
    per_suite: list[str] = []
    for group in board["groups"]:
        for suite in group["suites"]:
            cols = [f"{suite}.verdict", f"{suite}.passed", f"{suite}.judged"]
            for axis, spec in group["axes"][suite].items():
                base = f"{suite}.{axis}.{spec['metric']}"
                cols += [base, f"{base}.ci_low", f"{base}.ci_high", f"{base}.n"]
            if suite in group["pareto"]:
                cols.append(f"{suite}.pareto")
            per_suite += [c for c in cols if c not in per_suite]
    out = io.StringIO()
    writer = csv.DictWriter(out, columns + per_suite, lineterminator="\n")
    writer.writeheader()
    for group in board["groups"]:
        for row in group["rows"]:
            line = {c: row.get(c) for c in columns[2:]} | {
                "group": group["id"],
                "rank": row["rank"],
                "runs": ";".join(row["runs"]),
            }
            for suite, cell in row["suites"].items():
                line |= {
                    f"{suite}.verdict": cell["verdict"],
                    f"{suite}.passed": cell["passed"],
                    f"{suite}.judged": cell["judged"],
                }
                for axis, spec in group["axes"][suite].items():
                    value = cell.get(axis)
                    if value:
                        base = f"{suite}.{axis}.{spec['metric']}"
                        line |= {
                            base: value["value"],
                            f"{base}.ci_low": value["ci_low"],
                            f"{base}.ci_high": value["ci_high"],
                            f"{base}.n": value["n"],
                        }
                if suite in group["pareto"] and not row["role"]:
                    line[f"{suite}.pareto"] = row["id"] in group["pareto"][suite]
            writer.writerow(line)
    return out.getvalue()


def to_json(board: dict) -> str:
    return json.dumps(board, indent=2, allow_nan=False, default=str)
