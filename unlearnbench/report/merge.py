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

import copy
import secrets
from datetime import datetime, timezone

from unlearnbench.report.schema import new_report

GATE_FIELDS = ("metric", "direction", "relative_to", "margin", "strict_ci", "rule", "alpha", "correction")


def gate_signature(verdict: dict) -> tuple:
    bound = None if verdict.get("relative_to") else verdict.get("bound")
    return tuple(verdict.get(f) for f in GATE_FIELDS) + (bound,)


def _signatures(report: dict) -> tuple[dict, dict]:
    gates, data = {}, {}
    for checkpoint in report["checkpoints"].values():
        for suite, result in checkpoint["suites"].items():
            if result.get("data", {}).get("fingerprint"):
                data[suite] = result["data"]["fingerprint"]
            for check, verdict in result["checks"].items():
                if verdict.get("outcome") != "error":
                    gates[(suite, check)] = gate_signature(verdict)
    return gates, data


def merge_reports(reports: list[tuple[str, dict]], *, force: bool = False) -> dict:
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
        for name in report["checkpoints"]:
            if name in owner:
                problems.append(f"checkpoint {name} is in both {owner[name]} and {label}")
            owner[name] = label
    duplicate = [p for p in problems if p.startswith("checkpoint ")]
    if duplicate or (problems and not force):
        hint = "" if duplicate else " (pass --force to merge anyway)"
        raise ValueError("cannot merge: " + "; ".join(problems) + hint)

    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    merged = new_report(
        {
            "id": datetime.now().strftime("%Y%m%d-%H%M%S") + "-merged-" + secrets.token_hex(3),
            "started_at": min(r["run"].get("started_at", now) for _, r in reports),
            "finished_at": max(r["run"].get("finished_at") or now for _, r in reports),
            "command": ["unlearnbench", "merge", *(label for label, _ in reports)],
            "cache": {
                k: sum(r["run"].get("cache", {}).get(k, 0) for _, r in reports) for k in ("hits", "misses", "corrupt")
            },
            "exit_status": max(int(r["run"].get("exit_status") or 0) for _, r in reports),
            "anchors": {name: role for _, r in reports for name, role in (r["run"].get("anchors") or {}).items()},
        }
    )
    reference_code = {suite: code for _, r in reports for suite, code in (r["run"].get("reference_code") or {}).items()}
    if reference_code:
        merged["run"]["reference_code"] = reference_code
    merged["merged_from"] = [
        {"file": label, "run_id": r["run"].get("id"), "environment": r.get("environment")} for label, r in reports
    ]
    if problems:
        merged["merge_warnings"] = problems
    for _, report in reports:
        merged["checkpoints"].update(copy.deepcopy(report["checkpoints"]))
        for role, info in report.get("references", {}).items():
            merged["references"][role] = merged["references"].get(role) or info
        for key in merged["summary"]:
            merged["summary"][key] += report["summary"].get(key, 0)
        for key in ("regressions", "non_finite"):
            if report.get(key):
                merged.setdefault(key, []).extend(copy.deepcopy(report[key]))
        for role, suites in (report.get("reference_values") or {}).items():  # what shards' series curves read
            merged.setdefault("reference_values", {}).setdefault(role, {}).update(copy.deepcopy(suites))
    return merged
