"""Merging reports of separate runs (a sweep sharded across machines) into one.

Runs are comparable only when they judged with the same gate and the same
data: for every (suite, check) seen in two runs, metric, direction, reference
role, margin, absolute bound and decision rule (interval or point estimate,
alpha, correction, strict-CI mode) must agree, and every suite's
data fingerprint must be the same. Otherwise merging is refused, naming the
difference, unless `force` (then the differences are recorded in the report).
A checkpoint name may appear in one run only.
"""

from __future__ import annotations

import secrets
from datetime import datetime, timezone
from typing import Any

from unlearnbench.outcome import Outcome
from unlearnbench.report.model import CheckResult, Report
from unlearnbench.report.schema import new_report

GATE_FIELDS = ("metric", "direction", "relative_to", "margin", "strict_ci", "rule", "alpha", "correction")


def gate_signature(check: CheckResult) -> tuple[object, ...]:
    """What two runs must agree on for a check's verdicts to be comparable: its gate and decision rule."""
    bound = None if check.relative_to else check.bound
    return tuple(getattr(check, name) for name in GATE_FIELDS) + (bound,)


def _signatures(report: Report) -> tuple[dict[tuple[str, str], tuple[object, ...]], dict[str, str]]:
    gates: dict[tuple[str, str], tuple[object, ...]] = {}
    data: dict[str, str] = {}
    for checkpoint in report.checkpoints.values():
        for suite, result in checkpoint.suites.items():
            if result.data.get("fingerprint"):
                data[suite] = result.data["fingerprint"]
            for name, check in result.checks.items():
                if check.outcome is not Outcome.ERROR:
                    gates[(suite, name)] = gate_signature(check)
    return gates, data


def merge_reports(reports: list[tuple[str, Report]], *, force: bool = False) -> dict[str, Any]:
    """One report from (label, report) pairs; ValueError on incompatible runs."""
    if not reports:
        raise ValueError("merge needs at least one report")
    problems: list[str] = []
    owner: dict[str, str] = {}
    first_label, first = reports[0]
    gates, data = _signatures(first)
    for label, report in reports[1:]:
        other_gates, other_data = _signatures(report)
        for key in sorted(set(gates) & set(other_gates)):
            if gates[key] != other_gates[key]:
                problems.append(
                    f"check {key[0]}.{key[1]} differs between {first_label} and {label}: "
                    f"{gates[key]} vs {other_gates[key]}"
                )
        for suite in sorted(set(data) & set(other_data)):
            if data[suite] != other_data[suite]:
                problems.append(
                    f"{suite} data fingerprint differs between {first_label} and {label}: "
                    f"{data[suite]} vs {other_data[suite]}"
                )
        gates.update(other_gates)
        data.update(other_data)
    for label, report in reports:
        for name in report.checkpoints:
            if name in owner:
                problems.append(f"checkpoint {name} is in both {owner[name]} and {label}")
            owner[name] = label
    duplicate = [p for p in problems if p.startswith("checkpoint ")]
    if duplicate or (problems and not force):
        hint = "" if duplicate else " (pass --force to merge anyway)"
        raise ValueError("cannot merge: " + "; ".join(problems) + hint)

    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    runs = [report.run for _, report in reports]
    merged = new_report(
        {
            "id": datetime.now().strftime("%Y%m%d-%H%M%S") + "-merged-" + secrets.token_hex(3),
            "started_at": min(run.started_at or now for run in runs),
            "finished_at": max(run.finished_at or now for run in runs),
            "command": ["unlearnbench", "merge", *(label for label, _ in reports)],
            "cache": {k: sum(run.cache.get(k, 0) for run in runs) for k in ("hits", "misses", "corrupt")},
            "exit_status": max(run.exit_status or 0 for run in runs),
            "anchors": {name: role for run in runs for name, role in run.anchors.items()},
        }
    )
    reference_code = {suite: code for run in runs for suite, code in run.reference_code.items()}
    if reference_code:
        merged["run"]["reference_code"] = reference_code
    plains = [report.to_dict() for _, report in reports]  # each report's document, dumped once
    merged["merged_from"] = [
        {"file": label, "run_id": r.run.id or None, "environment": plain.get("environment")}
        for (label, r), plain in zip(reports, plains)
    ]
    if problems:
        merged["merge_warnings"] = problems
    for (_, report), plain in zip(reports, plains):
        merged["checkpoints"].update(plain["checkpoints"])
        for role, info in report.references.items():
            merged["references"][role] = merged["references"].get(role) or info
        for outcome in merged["summary"]:
            merged["summary"][outcome] += getattr(report.summary, outcome)
        for notes in ("regressions", "non_finite"):
            if plain.get(notes):
                merged.setdefault(notes, []).extend(plain[notes])
        for role, suites in (plain.get("reference_values") or {}).items():  # what shards' series curves read
            merged.setdefault("reference_values", {}).setdefault(role, {}).update(suites)
    return merged
