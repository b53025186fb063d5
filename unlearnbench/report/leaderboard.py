"""Ranking checkpoints from a report: per suite and overall.

Order: more checks passed first; ties broken by the **aggregate margin**, the
mean over a checkpoint's judged checks of its clipped relative margin

    m = clip(signed_margin / max(|bound|, 0.1), -1, 1)

where signed_margin = value - bound for `at_least` checks and bound - value
for `at_most` checks (> 0: on the good side). Skipped and inconclusive checks and
errors count neither as passed nor in the margin; errors are listed.
"""

from __future__ import annotations

MARGIN_FLOOR = 0.1


def check_margin(verdict: dict) -> float | None:
    value, bound, direction = verdict.get("value"), verdict.get("bound"), verdict.get("direction")
    if value is None or bound is None or verdict.get("outcome") not in ("pass", "fail"):
        return None
    signed = value - bound if direction == "at_least" else bound - value
    return max(-1.0, min(1.0, signed / max(abs(bound), MARGIN_FLOOR)))


def _row(name: str, checks: list[dict]) -> dict:
    margins = [m for m in (check_margin(v) for v in checks) if m is not None]
    return {
        "checkpoint": name,
        "passed": sum(v["outcome"] == "pass" for v in checks),
        "failed": sum(v["outcome"] == "fail" for v in checks),
        "skipped": sum(v["outcome"] == "skip" for v in checks),
        "inconclusive": sum(v["outcome"] == "inconclusive" for v in checks),
        "errors": sum(v["outcome"] == "error" for v in checks),
        "aggregate_margin": round(sum(margins) / len(margins), 4) if margins else None,
    }


def _ranked(rows: list[dict]) -> list[dict]:
    rows.sort(key=lambda r: (-r["passed"], -(r["aggregate_margin"] if r["aggregate_margin"] is not None else -2),
                             r["checkpoint"]))
    for rank, row in enumerate(rows, start=1):
        row["rank"] = rank
    return rows


def leaderboard(report: dict) -> dict:
    """{"overall": [row...], "suites": {SUITE: [row...]}}, rows ranked."""
    suites: dict[str, list[dict]] = {}
    overall = []
    for name, checkpoint in report["checkpoints"].items():
        every = []
        for suite, result in checkpoint["suites"].items():
            checks = list(result["checks"].values())
            every += checks
            suites.setdefault(suite, []).append(_row(name, checks))
        overall.append(_row(name, every))
    return {"rule": "most checks passed, then the mean clipped relative margin (unlearnbench/report/leaderboard.py)",
            "overall": _ranked(overall), "suites": {s: _ranked(rows) for s, rows in sorted(suites.items())}}


def leaderboard_lines(board: dict) -> list[str]:
    rows = [("rank", "checkpoint", "passed", "failed", "skipped", "margin")]
    for r in board["overall"]:
        margin = "" if r["aggregate_margin"] is None else f"{r['aggregate_margin']:+.3f}"
        rows.append((str(r["rank"]), r["checkpoint"], str(r["passed"]), str(r["failed"]), str(r["skipped"]), margin))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
