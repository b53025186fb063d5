"""The report as text: the console's tables, report.md (a PR comment, the
GitHub step summary) and the flat results.csv / results.jsonl.

Every table lists checkpoints in the report's one display order (ranked
candidates, unranked ones, then the reference anchors: report/verdicts.py).
"""

from __future__ import annotations

import csv
import io
import json

from unlearnbench.report.verdicts import suite_counts

OPS = {"at_least": ">=", "at_most": "<="}
SYMBOLS = {"at_least": "≥", "at_most": "≤"}  # the same, for the HTML page
NOT_PASSING = ("fail", "error", "inconclusive")
# The decision fields of a judged row (docs/verdicts.md), as the verdict holds them.
DECISION_FIELDS = (
    "difference",
    "difference_ci_low",
    "difference_ci_high",
    "reference_value",
    "reference_ci_low",
    "reference_ci_high",
    "kind",
    "interval",
    "clusters",
    "n_effective",
    "p_value",
    "p_below",
    "p_adjusted",
    "decided_by",
    "code",
    "lean",
    "mde",
    "n_needed",
    "rule",
    "alpha",
    "power",
    "correction",
)
FLAT_FIELDS = (
    "checkpoint",
    "series",
    "step",
    "role",
    "checkpoint_verdict",
    "suite",
    "metric",
    "value",
    "ci_low",
    "ci_high",
    "ci_half_width",
    "n",
    "check",
    "axis",
    "direction",
    "bound",
    "outcome",
    "retain_fails_too",
    *DECISION_FIELDS,
    "reason",
)


def significant(value, digits: int = 4) -> str:
    """A number to `digits` significant digits ('' for None; not a float: as it is)."""
    return "" if value is None else f"{value:.{digits}g}" if isinstance(value, float) else str(value)


def half_width(ci) -> float | None:
    return None if not ci or None in ci else (ci[1] - ci[0]) / 2


def value_text(verdict: dict, n=None) -> str:
    """'0.4375 ± 0.12 (n=24)': the value, its 95% CI half-width and n; an
    interval with the value at one end (a share of 0 or of n items: Wilson's)
    as its ends, '1 [0.61, 1] (n=6)', which a ± would misstate."""
    if verdict.get("value") is None:
        return ""
    ci, value = verdict.get("ci"), verdict["value"]
    hw = half_width(ci)
    spread = ""
    if hw and ci:
        spread = (
            f" [{significant(ci[0], 2)}, {significant(ci[1], 2)}]"
            if value in (ci[0], ci[1])
            else f" ± {significant(hw, 2)}"
        )
    return f"{significant(value)}{spread}" + (f" (n={n})" if n is not None else "")


def bound_text(verdict: dict, ops: dict = OPS) -> str:
    if verdict.get("bound") is None:
        return ""
    ref = verdict.get("relative_to")
    return f"{ops.get(verdict.get('direction'), '')} {significant(verdict['bound'])}" + (f" ({ref})" if ref else "")


def _n(checkpoint: dict, suite: str, verdict: dict):
    return checkpoint["suites"][suite]["metrics"].get(verdict.get("metric") or "", {}).get("n")


def _table(rows: list[tuple], indent: str = "") -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [indent + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


def check_lines(report: dict, *, everything: bool = False, checkpoints=None, suites=None) -> list[str]:
    """Per checkpoint, its verdict line, then its checks that did not pass
    (all of them with `everything`): value ± CI half-width, n, bound."""
    a = report["assessment"]
    lines = []
    for name in a["order"]:
        if checkpoints and name not in checkpoints:
            continue
        cp, verdict = report["checkpoints"][name], a["verdicts"][name]
        rows = [("", "check", "value ± 95% CI half-width (n)", "bound", "")]
        why = []  # an inconclusive or errored check's reason: no table cell can say it
        shown = 0
        for suite, result in cp["suites"].items():
            if suites and suite not in suites:
                continue
            for check, v in result["checks"].items():
                if not everything and v["outcome"] not in NOT_PASSING:
                    continue
                shown += 1
                flag = "retain fails this too" if f"{suite}.{check}" in verdict["retain_fails_too"] else ""
                rows.append(
                    (v["outcome"].upper(), f"{suite}.{check}", value_text(v, _n(cp, suite, v)), bound_text(v), flag)
                )
                if v["outcome"] in ("inconclusive", "error"):
                    reason = v.get("reason", "")
                    said = f"{v['outcome']}: "  # an inconclusive verdict's reason already starts so
                    why.append(
                        f"      {suite}.{check} {said}{reason[len(said) :] if reason.startswith(said) else reason}"
                    )
        role = f" [{verdict['role']} model: reference, not ranked]" if verdict["role"] else ""
        lines.append(f"{name}{role}: {verdict['summary']}")
        if shown:
            lines += _table(rows, "    ") + why
    return lines


def utility_text(row: dict) -> str:
    """'6/10 (collapsed)', '1/10 (cost)', '0/10': utility checks decided failed."""
    tag = {"collapsed": " (collapsed)", "cost": " (cost)"}.get(row["utility"], "")
    return f"{row['utility_failed']}/{row['utility_checks']}{tag}"


def forget_text(row: dict) -> str:
    """'6 passed, 5 failed': forget checks decided passed and decided failed."""
    return f"{row['forget_passed']} passed, {row['forget_failed']} failed"


def ranking_lines(report: dict) -> list[str]:
    board = report["assessment"]["ranking"]
    verdicts = report["assessment"]["verdicts"]
    rows = [("rank", "checkpoint", "verdict", "utility failed", "forget (decided)", "passed", "margin")]
    for r in board["rows"]:
        name = f"{r['series']} (series, best: step {r['step']})" if r.get("series") else r["checkpoint"]
        rows.append(
            (
                str(r["rank"]),
                name,
                r["verdict"].upper(),
                utility_text(r),
                forget_text(r),
                f"{r['passed']}/{len(board['shared_checks'])}",
                "" if r["margin"] is None else f"{r['margin']:+.3f}",
            )
        )
    for r in board["unranked"]:
        rows.append(
            (
                "-",
                r["checkpoint"],
                verdicts[r["checkpoint"]]["verdict"].upper(),
                "",
                "",
                "",
                f"not ranked: {r['reason']}",
            )
        )
    for r in board["anchors"]:
        rows.append(
            (
                "ref",
                r["checkpoint"],
                verdicts[r["checkpoint"]]["verdict"].upper(),
                "",
                "",
                "",
                f"{r['role']} model (anchor)",
            )
        )
    return _table(rows) + series_lines(report)


def series_lines(report: dict) -> list[str]:
    """Each training run's steps, in step order: its unlearning curve as a table."""
    board = report["assessment"]["ranking"]
    lines = []
    for series, steps in (board.get("series") or {}).items():
        best = next(r for r in board["rows"] if r.get("series") == series)
        first = best.get("first_pass_step")
        lines += [
            "",
            f"series {series}: {len(steps)} steps, best step {best['step']} (rank {best['rank']}); "
            + (f"the gate first passes at step {first}" if first is not None else "no step passes the gate"),
        ]
        rows = [("step", "checkpoint", "verdict", "forget passed", "utility failed")]
        rows += [
            (
                str(r["step"]),
                r["checkpoint"],
                r["verdict"].upper(),
                f"{r['forget_passed']}/{r['forget_checks']}",
                utility_text(r),
            )
            for r in steps
        ]
        lines += _table(rows, "  ")
    return lines


def attention_lines(report: dict) -> list[str]:
    """What a table cell cannot say: lost checkpoints, non-finite numbers."""
    lines = []
    for name, checkpoint in report["checkpoints"].items():
        if checkpoint.get("lost"):
            lines.append(
                f"checkpoint {name} lost: {checkpoint['lost']['reason']} "
                f"({len(checkpoint['lost']['tests'])} tests not judged)"
            )
    for dropped in report.get("non_finite", []):
        lines.append(f"non-finite value written as null: {dropped['path']} was {dropped['was']}")
    return lines


def evidence_line(report: dict) -> str:
    """'Decided by ...: 139 of 187 verdicts decided (54 pass, 85 fail); 48 underpowered ...'."""
    counts = {"pass": 0, "fail": 0, "underpowered": 0, "no interval": 0, "inconclusive": 0}
    for checkpoint in report["checkpoints"].values():
        for result in checkpoint.get("suites", {}).values():
            for verdict in result.get("checks", {}).values():
                interval = verdict.get("decision_ci")
                if verdict.get("lean") and (not interval or not interval[1] > interval[0]):
                    counts["no interval"] += 1
                elif verdict.get("lean"):
                    counts["underpowered"] += 1
                elif verdict.get("outcome") in counts:
                    counts[verdict["outcome"]] += 1
    judged = sum(counts.values())
    decision = report["run"].get("decision") or {}
    rule = f"Rule: {decision['text']}. " if decision.get("text") else ""
    weak = sorted(k for k, p in (report["run"].get("preflight") or {}).items() if p.get("underpowered"))
    preflight = (
        f" Preflight: {len(weak)} checks cannot tell their margin at their n ({', '.join(weak[:4])}"
        f"{', ...' if len(weak) > 4 else ''}; run.preflight in report.json)."
        if weak
        else ""
    )
    return (
        f"{rule}{counts['pass'] + counts['fail']} of {judged} verdicts decided ({counts['pass']} pass, "
        f"{counts['fail']} fail); {counts['underpowered']} underpowered (each names the items that would decide "
        f"it), {counts['no interval']} with no interval to decide by (zero width or none), "
        f"{counts['inconclusive']} inconclusive for another reason.{preflight}"
    )


def suite_notes(report: dict) -> list[str]:
    """What each suite's `notes` hook says of the run (a suite this installation does not know says nothing)."""
    from unlearnbench.report.view import suite_views
    from unlearnbench.suites import SUITES

    return [
        line
        for suite, view in suite_views(report).items()
        if suite in SUITES and (notes := SUITES[suite].hook("notes")) is not None
        for line in notes(view)
    ]


def verdict_lines(report: dict) -> list[str]:
    """The answer: one line per checkpoint, in display order."""
    a = report["assessment"]
    width = max((len(n) for n in a["order"]), default=0)
    return [
        f"{name.ljust(width)}  {('[' + a['verdicts'][name]['role'] + '] ') if a['verdicts'][name]['role'] else ''}"
        f"{a['verdicts'][name]['summary']}"
        for name in a["order"]
    ]


# ------------------------------------------------------------------ report.md
def _md_cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown(report: dict, *, failing_per_checkpoint: int = 10) -> str:
    """Verdicts, ranking and failing checks, short enough for a PR comment."""
    a, run = report["assessment"], report["run"]
    s = report["summary"]
    board = a["ranking"]
    out = [
        f"## unlearnbench: {len(report['checkpoints'])} checkpoints",
        "",
        f"{s['passed']} checks passed, {s['failed']} failed, {s.get('inconclusive', 0)} inconclusive, "
        f"{s['skipped']} skipped, {s['errors']} errors (run `{run.get('id', '')}`).",
        "",
        _md_cell(evidence_line(report)),
        "",
        "| checkpoint | verdict | per suite (passed/judged) |",
        "|---|---|---|",
    ]
    for name in a["order"]:
        v = a["verdicts"][name]
        badge = f" *({v['role']}, reference)*" if v["role"] else ""
        out.append(f"| {_md_cell(name)}{badge} | **{v['verdict'].upper()}** | {_md_cell(suite_counts(v))} |")
    out += ["", "### Ranking", "", _md_cell(board["rule"]), ""]
    if board["rows"]:
        out += [
            "| rank | checkpoint | verdict | utility failed | forget (decided) | passed |",
            "|---|---|---|---|---|---|",
        ]
        out += [
            f"| {r['rank']} | {_md_cell(r['checkpoint'])} | {r['verdict'].upper()} | {utility_text(r)} | "
            f"{forget_text(r)} | {r['passed']}/{len(board['shared_checks'])} |"
            for r in board["rows"]
        ]
    for r in board["unranked"]:
        out.append(f"- {_md_cell(r['checkpoint'])}: not ranked ({r['reason']})")
    if a["retain_fails"]:
        out += [
            "",
            f"The retain model itself fails: {', '.join(f'`{k}`' for k in a['retain_fails'])} (flagged on every row).",
        ]
    failing = [(name, key) for name in a["order"] for key in a["verdicts"][name]["failing"]]
    if failing:
        out += [
            "",
            "<details><summary>Failing checks</summary>",
            "",
            "| checkpoint | check | value ± CI (n) | bound | |",
            "|---|---|---|---|---|",
        ]
        for name in a["order"]:
            cp, v = report["checkpoints"][name], a["verdicts"][name]
            for key in v["failing"][:failing_per_checkpoint]:
                suite, check = key.split(".", 1)
                c = cp["suites"][suite]["checks"][check]
                note = "retain fails this too" if key in v["retain_fails_too"] else ""
                out.append(
                    f"| {_md_cell(name)} | `{key}` | {_md_cell(value_text(c, _n(cp, suite, c)))} | "
                    f"{_md_cell(bound_text(c))} | {note or _md_cell(c.get('reason', '') if c['outcome'] == 'error' else '')} |"
                )
            if len(v["failing"]) > failing_per_checkpoint:
                out.append(f"| {_md_cell(name)} | ... {len(v['failing']) - failing_per_checkpoint} more | | | |")
        out += ["", "</details>"]
    for line in attention_lines(report) + suite_notes(report):
        out.append(f"- {_md_cell(line)}")
    return "\n".join(out) + "\n"


# ------------------------------------------------------------ flat results
def flat_rows(report: dict) -> list[dict]:
    """One row per checkpoint x metric (a metric judged by several checks: one
    row per check; a metric no check judges: one row without a check)."""
    a = report["assessment"]
    rows = []
    for name in a["order"]:
        cp, verdict = report["checkpoints"][name], a["verdicts"][name]
        info = cp.get("info") or {}  # a training run's step: its series and step
        for suite, result in cp["suites"].items():
            by_metric: dict[str, list] = {}
            for check, v in result["checks"].items():
                by_metric.setdefault(v.get("metric") or "", []).append((check, v))
            for metric in list(result["metrics"]) + [m for m in by_metric if m not in result["metrics"]]:
                m = result["metrics"].get(metric, {})
                ci = m.get("ci") or [None, None]
                base = {
                    "checkpoint": name,
                    "series": info.get("series"),
                    "step": info.get("step"),
                    "role": verdict["role"] or "",
                    "checkpoint_verdict": verdict["verdict"],
                    "suite": suite,
                    "metric": metric,
                    "value": m.get("value"),
                    "ci_low": ci[0],
                    "ci_high": ci[1],
                    "ci_half_width": half_width(ci),
                    "n": m.get("n"),
                }
                for check, v in by_metric.get(metric) or [(None, {})]:
                    rows.append(
                        base
                        | {
                            "check": check or "",
                            "axis": v.get("axis") or "",
                            "direction": v.get("direction") or "",
                            "bound": v.get("bound"),
                            "outcome": v.get("outcome") or "",
                            "retain_fails_too": f"{suite}.{check}" in verdict["retain_fails_too"],
                            **{k: v.get(k) for k in DECISION_FIELDS},
                            "reason": v.get("reason") or "",
                        }
                    )
    return rows


def results_csv(report: dict) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=FLAT_FIELDS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(flat_rows(report))
    return buffer.getvalue()


def results_jsonl(report: dict) -> str:
    return "".join(json.dumps(row, allow_nan=False) + "\n" for row in flat_rows(report))


def path_lines(files) -> list[str]:
    """The written files, for the last lines of a run's output."""
    folder = files.json.parent
    return [
        f"report: {files.json}",
        f"HTML report: {files.html}  (also {folder.parent / 'latest' / files.html.name})",
        f"also in {folder}: {files.markdown.name} (verdicts and ranking for a PR comment), "
        f"{files.csv.name} and {files.jsonl.name} (one row per checkpoint x metric)",
    ]
