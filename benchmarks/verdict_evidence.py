"""How many of a run's pass/fail verdicts the data decided: from a
report.json, the candidates' (not the anchors') judged checks, how many rest
on a 95% CI that contains the bound, how many on a Wilson interval, and how
many on a zero-width interval of 0/1 item scores (what a bootstrap gives 0/n
and n/n).

    python benchmarks/verdict_evidence.py reports/latest/report.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def counts(report: dict) -> dict[str, int]:
    anchors = set(report["run"].get("anchors") or {})
    out = {"verdicts": 0, "ci_contains_bound": 0, "wilson": 0, "zero_width_shares": 0}
    for name, checkpoint in report["checkpoints"].items():
        if name in anchors:
            continue
        for result in checkpoint["suites"].values():
            for verdict in result["checks"].values():
                ci = verdict.get("ci")
                if verdict.get("outcome") not in ("pass", "fail") or verdict.get("bound") is None or not ci \
                        or None in ci:
                    continue
                metric = result["metrics"].get(verdict.get("metric"), {})
                items = list((metric.get("per_item") or {}).values())
                out["verdicts"] += 1
                out["ci_contains_bound"] += ci[0] <= verdict["bound"] <= ci[1]
                out["wilson"] += metric.get("interval") == "wilson"
                out["zero_width_shares"] += ci[0] == ci[1] and bool(items) and all(v in (0.0, 1.0) for v in items)
    return out


if __name__ == "__main__":
    found = counts(json.loads(Path(sys.argv[1]).read_text()))
    print(f"pass/fail verdicts on candidates: {found['verdicts']}; 95% CI contains the bound: "
          f"{found['ci_contains_bound']}; on a Wilson interval: {found['wilson']}; on a zero-width interval of "
          f"0/1 scores: {found['zero_width_shares']}")
