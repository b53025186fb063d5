"""Regression checks against a baseline report (pytest-benchmark style):
`--baseline last_release.json --fail-on-regression ufk_rougeL_recall:0.02`.

A rule METRIC:DELTA (METRIC may be SUITE.METRIC) fails a checkpoint when its
metric is worse than the baseline's by more than DELTA, in the direction the
metric declares (higher_is_better), or, for a metric with an ideal value
(signed PL: 0; the membership AUC: the retain model's), by its distance to
that ideal. The baseline checkpoint is the one with
the same name, else the baseline's only checkpoint (a released model compared
with each candidate); with several and none of that name, it is an error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from unlearnbench.errors import UnlearnbenchError


@dataclass(frozen=True)
class RegressionRule:
    suite: str | None
    metric: str
    delta: float

    @classmethod
    def parse(cls, text: str) -> RegressionRule:
        name, sep, delta = text.rpartition(":")
        try:
            value = float(delta)
        except ValueError:
            value = -1.0
        if not sep or not name or not math.isfinite(value) or value < 0:
            raise UnlearnbenchError(
                f"--fail-on-regression {text!r}: expected [SUITE.]METRIC:DELTA with a finite DELTA >= 0"
            )
        suite, dot, metric = name.rpartition(".")
        return cls(suite or None, metric, value)


def baseline_checkpoint(baseline: dict, name: str, source: str) -> dict:
    checkpoints = baseline["checkpoints"]
    if name in checkpoints:
        return checkpoints[name]
    if len(checkpoints) == 1:
        return next(iter(checkpoints.values()))
    raise UnlearnbenchError(
        f"baseline {source}: no checkpoint named {name!r} and more than one to choose from ({', '.join(checkpoints)})"
    )


def regressions(
    metrics: dict, baseline_metrics: dict, suite: str, rules: list[RegressionRule], references: dict | None = None
) -> list[dict]:
    """One row per rule that applies to this suite: the comparison and whether it regressed.

    A metric with an `ideal` (a value, or a reference role whose value in
    `references[role][metric]` is the ideal) is worse by how much further
    from the ideal it moved: PL from -40 to +2 is 38 better, not 42 worse.
    """
    rows = []
    for rule in rules:
        if rule.suite not in (None, suite) or rule.metric not in metrics:
            continue
        current, base = metrics[rule.metric], baseline_metrics.get(rule.metric)
        if "value" not in current or base is None or "value" not in base:
            rows.append({"metric": rule.metric, "regressed": False, "reason": "not available in both runs"})
            continue
        row = {"metric": rule.metric, "value": current["value"], "baseline": base["value"], "allowed": rule.delta}
        ideal = current.get("ideal")
        if isinstance(ideal, str):
            reference = (references or {}).get(ideal, {}).get(rule.metric) or {}
            if "value" not in reference:
                rows.append(
                    row
                    | {
                        "regressed": False,
                        "reason": f"its ideal is the {ideal} model's value, which this run does not have",
                    }
                )
                continue
            ideal = reference["value"]
        if ideal is not None:
            worse_by = abs(current["value"] - ideal) - abs(base["value"] - ideal)
            row["ideal"] = ideal
        elif current["higher_is_better"]:
            worse_by = base["value"] - current["value"]
        else:
            worse_by = current["value"] - base["value"]
        rows.append(row | {"worse_by": worse_by, "regressed": worse_by > rule.delta})
    return rows
