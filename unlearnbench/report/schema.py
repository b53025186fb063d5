"""The run report: a versioned JSON document, built from per-test records.

Every suite test sends one record (check verdict, and the first time per
checkpoint and suite, its metrics) through pytest's `user_properties`; the
controller merges the records of all xdist workers into one report here.

Schema `unlearnbench.report` version 3 (version 2 had `run.strict_ci` instead of
`run.decision` and verdicts without their decision fields; version 1 also had
`leaderboard` instead of `assessment` and no `run.anchors`; both still load)::

    {schema, schema_version,
     run: {id, directory, started_at, finished_at, duration_s, command, cwd, options, seed,
          decision: {rule, alpha, power, correction, strict_ci, text}   (how verdicts were decided: docs/verdicts.md),
          anchors: {NAME: full | retain}   (the checkpoints that are the run's reference models),
          thresholds_files: {SUITE: path}, cache: {hits, misses, corrupt}, exit_status,
          reference_code: {SUITE: owner/repo@commit}   (suites run under convention=reference),
          preflight: {SUITE.CHECK: {n, mde, margin, n_needed, underpowered, reference, power, clusters}}
                     (Check.power)},
     environment: {unlearnbench, torch, transformers, python, platform, machine, cpu_count, memory_gb},
     references: {full: checkpoint-info | null, retain: ...},
     checkpoints: {NAME: {info: checkpoint-info,
                          suites: {SUITE: {data: {fingerprint, source, suite_version, reference_code?},
                                           metrics: {METRIC: MetricResult},
                                           checks: {CHECK: Verdict + worker}   (thresholds.Verdict: value,
                                                  ci, bound, difference, difference_ci_low/high, reference_value,
                                                  reference_ci_low/high, kind, interval, clusters, n_effective,
                                                  p_value, p_below, p_adjusted, decided_by, lean, mde, n_needed,
                                                  power, ...),
                                           timings: {evaluate_s, ...}}},
                          lost: {reason, tests}   (its xdist worker died: see `add_lost`)}},
     summary: {passed, failed, skipped, inconclusive, errors},
     non_finite: [{path, was}]   (NaN/inf that reached the writer, written as null),
     assessment: {verdicts: {NAME: verdict}, ranking: {rule, shared_checks, rows, unranked, anchors},
                  order: [NAME], retain_fails: [SUITE.CHECK]}   (see report/verdicts.py),
     reference_values: {full | retain: {SUITE: {METRIC: value}}}   (in a run with training-run series: what
                                                                      their unlearning curves are read against),
     regressions: [{checkpoint, suite, metric, value, baseline, delta, allowed}]  (with --baseline),
     merged_from: [run ids]   (reports made by `unlearnbench merge`)}

Next to report.json, `write_outputs` writes report.html (report/html.py),
report.md and results.csv / results.jsonl (report/text.py), and points
`<report dir>/latest` at the run's folder.
"""

from __future__ import annotations

import json
import math
import os
import platform
import sys
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import NamedTuple

from unlearnbench.atomic import atomic_write_text
from unlearnbench.report.model import SCHEMA, SCHEMA_VERSION, Report
from unlearnbench.report.verdicts import assess

SUMMARY_KEYS = {
    "pass": "passed",
    "fail": "failed",
    "skip": "skipped",
    "inconclusive": "inconclusive",
    "error": "errors",
}


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def environment() -> dict:
    """Versions and hardware, read without importing torch on the controller."""
    try:
        memory_gb = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        memory_gb = None
    return {
        "unlearnbench": _version("unlearnbench"),
        "torch": _version("torch"),
        "transformers": _version("transformers"),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "memory_gb": memory_gb,
    }


def new_report(run: dict) -> dict:
    return {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "run": run,
        "environment": environment(),
        "references": {"full": None, "retain": None},
        "checkpoints": {},
        "summary": {"passed": 0, "failed": 0, "skipped": 0, "inconclusive": 0, "errors": 0},
    }


def add_record(report: dict, record: dict) -> None:
    """Merge one test's record (see `Gate.check`, `Gate.no_regression`) into the report."""
    if "regressions" in record:
        report.setdefault("regressions", []).extend(record["regressions"])
        return
    checkpoint = report["checkpoints"].setdefault(record["checkpoint"]["name"], {"info": {}, "suites": {}})
    checkpoint["info"].update(record["checkpoint"])
    suite = checkpoint["suites"].setdefault(record["suite"], {"data": {}, "metrics": {}, "checks": {}, "timings": {}})
    suite["data"].update(record.get("data", {}))
    if record.get("thresholds_file"):
        report["run"].setdefault("thresholds_files", {})[record["suite"]] = record["thresholds_file"]
    if record.get("data", {}).get("reference_code"):
        report["run"].setdefault("reference_code", {})[record["suite"]] = record["data"]["reference_code"]
    for power in record.get("preflight") or []:
        report["run"].setdefault("preflight", {})[f"{power['suite']}.{power['check']}"] = power
    suite["metrics"].update(record.get("metrics", {}))
    suite["timings"].update(record.get("timings", {}))
    if "verdict" in record:
        verdict = record["verdict"]
        suite["checks"][verdict["check"]] = verdict | {"worker": record.get("worker")}
        report["summary"][SUMMARY_KEYS[verdict["outcome"]]] += 1
    else:
        suite["checks"][record["check"]] = {"check": record["check"], "outcome": "error", "reason": record["error"]}
        report["summary"]["errors"] += 1
    for role, info in record.get("references", {}).items():
        report["references"][role] = info
    for role, values in record.get("reference_values", {}).items():
        report.setdefault("reference_values", {}).setdefault(role, {})[record["suite"]] = values


def add_lost(report: dict, checkpoint: str, reason: str, tests: list[str]) -> None:
    """A checkpoint whose tests never reported (its xdist worker died): named
    in the report with the reason, its tests counted as errors."""
    entry = report["checkpoints"].setdefault(checkpoint, {"info": {"name": checkpoint}, "suites": {}})
    lost = entry.setdefault("lost", {"reason": reason, "tests": []})
    lost["tests"] += [t for t in tests if t not in lost["tests"]]
    report["summary"]["errors"] += len(tests)


def json_safe(value, path: str = "", found: list | None = None):
    """`value` with every NaN/inf float replaced by None; each replacement is
    appended to `found` as {path, was} so the report says what it dropped."""
    if isinstance(value, float) and not math.isfinite(value):
        if found is not None:
            found.append({"path": path, "was": str(value)})
        return None
    if isinstance(value, dict):
        return {k: json_safe(v, f"{path}.{k}" if path else str(k), found) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v, f"{path}.{i}", found) for i, v in enumerate(value)]
    return value


def cap_items(metric: dict, limit: int) -> dict:
    """A metric's dict with its per-item values and per-item details (mappings
    keyed by item id) cut to the first `limit` items (`--report-items`): the
    value and CI stay those of every item."""
    items = metric.get("per_item") or {}
    if len(items) <= limit:
        return metric
    kept = list(items)[:limit]
    keep = set(kept)
    details = {
        k: ({i: v for i, v in d.items() if i in keep} if isinstance(d, dict) and set(d) & set(items) else d)
        for k, d in (metric.get("details") or {}).items()
    }
    return {
        **metric,
        "per_item": {i: items[i] for i in kept},
        "details": details,
        "items_capped": {"kept": limit, "of": len(items)},
    }


def write_report(report: dict, directory: Path) -> Path:
    path = Path(directory) / "report.json"
    atomic_write_text(path, json.dumps(report, indent=2, sort_keys=False, allow_nan=False))
    return path


class ReportFiles(NamedTuple):
    json: Path
    html: Path
    markdown: Path
    csv: Path
    jsonl: Path


def write_outputs(
    report: dict, directory: Path, extra_figures: Callable[[dict], dict[str, list[str]]] | None = None
) -> ReportFiles:
    """report.json, report.html (with `extra_figures(report)`, suite ->
    figures a conftest.py adds: hookspec.py; asked once the assessment is
    in the report), report.md, results.csv and results.jsonl
    (each atomically), then the `latest` link; report.md is also appended to
    $GITHUB_STEP_SUMMARY when that is set (a GitHub Actions job's summary).
    Non-finite numbers become null with a note (`non_finite`): the writer never
    fails on what a broken checkpoint computed."""
    from unlearnbench.report.html import render
    from unlearnbench.report.text import markdown, results_csv, results_jsonl

    directory = Path(directory)
    found: list = []
    report.update(json_safe(report, found=found))
    if found:
        report["non_finite"] = report.get("non_finite", []) + found
    report.pop("leaderboard", None)
    assessment = assess(report)
    # The answer first, for a reader who opens the JSON: schema, then the assessment, then the rest (in place:
    # callers hold this dict).
    report.pop("assessment", None)
    rest = {key: report.pop(key) for key in list(report) if key not in ("schema", "schema_version")}
    report.update({"assessment": assessment, **rest})
    files = ReportFiles(
        json=write_report(report, directory),
        html=directory / "report.html",
        markdown=directory / "report.md",
        csv=directory / "results.csv",
        jsonl=directory / "results.jsonl",
    )
    summary = markdown(report)
    atomic_write_text(files.html, render(report, extra_figures(report) if extra_figures else None))
    atomic_write_text(files.markdown, summary)
    atomic_write_text(files.csv, results_csv(report))
    atomic_write_text(files.jsonl, results_jsonl(report))
    _point_latest(directory)
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if step_summary:
        try:
            with open(step_summary, "a", encoding="utf-8") as out:
                out.write(summary)
        except OSError as exc:  # the run's own files are written; the CI summary is a copy
            print(f"unlearnbench: GITHUB_STEP_SUMMARY {step_summary}: {exc.strerror}", file=sys.stderr)
    return files


def _point_latest(directory: Path) -> None:
    """`latest` -> this run's folder, replaced atomically (a symlink where the
    file system has them, else a text file holding the folder name). A real
    `latest` folder (the user's) is never touched: the name goes to latest.txt."""
    latest = directory.parent / "latest"
    temporary = directory.parent / f".latest-{os.getpid()}"
    if latest.is_dir() and not latest.is_symlink():
        atomic_write_text(latest.with_suffix(".txt"), directory.name + "\n")
        return
    try:
        temporary.unlink(missing_ok=True)
        os.symlink(directory.name, temporary, target_is_directory=True)
        os.replace(temporary, latest)
    except OSError:
        temporary.unlink(missing_ok=True)
        atomic_write_text(latest.with_suffix(".txt"), directory.name + "\n")


def load_report(path: Path) -> dict:
    """The report at `path` as this schema version writes it (report/model.py upgrades and checks it), with
    its assessment computed again; a ValueError naming the file and the problem otherwise."""
    report = Report.read(path).to_dict()
    report["assessment"] = assess(report)
    return report
