"""How many of a run's verdicts the data decided: from a report.json, the
candidates' (not the anchors') judged checks, counted by outcome (decided
pass/fail, underpowered, inconclusive for a structural reason), and how many
decided verdicts rest on an interval that contains their bound (the
decision interval under the interval rule; the value's 95% CI for reports
decided on point estimates). Per suite, and the underpowered checks with the
items each would need.

    python benchmarks/verdict_evidence.py reports/latest/report.json
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path


def _contains_bound(verdict: dict) -> bool:
    if verdict.get("decision_ci") and verdict.get("bound") is not None:
        low, high = verdict["decision_ci"]
        threshold = verdict["bound"] - (verdict.get("reference_value") or 0.0) \
            if verdict.get("difference") is not None else verdict["bound"]
        return low <= threshold <= high and verdict.get("decided_by") != "point-estimate"
    ci = verdict.get("ci")
    return bool(ci) and None not in ci and verdict.get("bound") is not None and ci[0] <= verdict["bound"] <= ci[1]


def counts(report: dict) -> dict:
    anchors = set(report["run"].get("anchors") or {})
    out = {"decided": 0, "pass": 0, "fail": 0, "underpowered": 0, "inconclusive_other": 0,
           "decided_interval_contains_bound": 0, "on_point_estimate": 0, "by_suite": Counter(),
           "decided_by_suite": Counter(), "underpowered_checks": []}
    for name, checkpoint in report["checkpoints"].items():
        if name in anchors:
            continue
        for suite, result in checkpoint["suites"].items():
            for check, verdict in result["checks"].items():
                outcome = verdict.get("outcome")
                if outcome not in ("pass", "fail", "inconclusive") or verdict.get("bound") is None:
                    continue
                out["by_suite"][suite] += 1
                if verdict.get("lean"):
                    out["underpowered"] += 1
                    out["underpowered_checks"].append((name, f"{suite}.{check}", verdict.get("n"),
                                                       verdict.get("n_needed")))
                elif outcome == "inconclusive":
                    out["inconclusive_other"] += 1
                else:
                    out["decided"] += 1
                    out[outcome] += 1
                    out["decided_by_suite"][suite] += 1
                    out["on_point_estimate"] += verdict.get("decided_by") == "point-estimate"
                    out["decided_interval_contains_bound"] += _contains_bound(verdict)
    return out


if __name__ == "__main__":
    found = counts(json.loads(Path(sys.argv[1]).read_text()))
    judged = found["decided"] + found["underpowered"] + found["inconclusive_other"]
    print(f"verdicts on candidates: {judged}; decided {found['decided']} ({found['pass']} pass, {found['fail']} "
          f"fail; {found['on_point_estimate']} on a value with no interval); underpowered {found['underpowered']}; "
          f"inconclusive for another reason {found['inconclusive_other']}")
    print(f"decided verdicts whose decision interval contains the bound: {found['decided_interval_contains_bound']}")
    print("decided per suite: " + ", ".join(f"{s} {found['decided_by_suite'][s]}/{n}"
                                            for s, n in sorted(found["by_suite"].items())))
    for name, check, n, needed in sorted(found["underpowered_checks"], key=lambda r: r[1]):
        print(f"  underpowered: {name} {check} n={n}, ~{needed} items would decide it")
