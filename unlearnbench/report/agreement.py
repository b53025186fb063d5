"""Do two runs of the same suites say the same thing? Check by check, on the
checkpoints they share: the verdict and the checked value. `unlearnbench zoo
build --from-scratch` reads a zoo trained here against the shipped one this
way (docs/zoo.md). Training is deterministic on one CPU, not across
instruction sets, so a zoo trained elsewhere is another sample of the same
recipes: the runs agree when no check passes in one and fails in the other
(a check may move between a decision and "inconclusive": its value lies near
its bound) and every value on a bounded scale lies within the tolerance of
its counterpart. Unbounded values (a leakage in percent, a p-value) span
decades between two trainings and are compared by their verdicts only.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

DECIDED = ("pass", "fail")


@dataclass(frozen=True)
class CheckPair:
    checkpoint: str
    check: str  # SUITE.CHECK
    outcome: str
    other_outcome: str
    value: float | None
    other_value: float | None
    bounded: bool  # the metric's scale is bounded ([0, 1]): its values are compared

    @property
    def contradicts(self) -> bool:
        return {self.outcome, self.other_outcome} == set(DECIDED)

    @property
    def moved(self) -> bool:
        return self.outcome != self.other_outcome and not self.contradicts

    @property
    def difference(self) -> float | None:
        if self.value is None or self.other_value is None or not self.bounded:
            return None
        if not (math.isfinite(self.value) and math.isfinite(self.other_value)):
            return 0.0 if self.value == self.other_value else math.inf
        return abs(self.value - self.other_value)


@dataclass(frozen=True)
class Agreement:
    pairs: list[CheckPair]
    tolerance: float

    @property
    def contradictions(self) -> list[CheckPair]:
        return [p for p in self.pairs if p.contradicts]

    @property
    def moved(self) -> list[CheckPair]:
        return [p for p in self.pairs if p.moved]

    @property
    def beyond_tolerance(self) -> list[CheckPair]:
        return [p for p in self.pairs if p.difference is not None and p.difference > self.tolerance]

    @property
    def differences(self) -> list[float]:
        return sorted(p.difference for p in self.pairs if p.difference is not None)

    @property
    def agrees(self) -> bool:
        return bool(self.pairs) and not self.contradictions and not self.beyond_tolerance

    def lines(self, names: tuple[str, str] = ("run", "other run")) -> list[str]:
        checkpoints = sorted({p.checkpoint for p in self.pairs})
        same = len(self.pairs) - len(self.moved) - len(self.contradictions)
        out = [
            f"{len(self.pairs)} checks compared on {len(checkpoints)} checkpoints ({', '.join(checkpoints)}): "
            f"{same} verdicts the same, {len(self.moved)} between a decision and inconclusive, "
            f"{len(self.contradictions)} pass in one and fail in the other"
        ]
        differences = self.differences
        if differences:
            largest = max((p for p in self.pairs if p.difference is not None), key=lambda p: p.difference or 0.0)
            out.append(
                f"values on a bounded scale ({len(differences)}): median difference "
                f"{differences[len(differences) // 2]:.3g}, largest {largest.difference:.3g} "
                f"({largest.checkpoint} {largest.check}); tolerance {self.tolerance:g}"
            )
        out += [
            f"contradiction: {p.checkpoint} {p.check}: {p.outcome} in the {names[0]}, {p.other_outcome} in the "
            f"{names[1]}"
            for p in self.contradictions
        ]
        out += [
            f"moved: {p.checkpoint} {p.check}: {p.outcome} in the {names[0]}, {p.other_outcome} in the {names[1]}"
            for p in self.moved
        ]
        out += [
            f"value differs by {p.difference:.3g} > {self.tolerance:g}: {p.checkpoint} {p.check}: {p.value:.4g} vs "
            f"{p.other_value:.4g}"
            for p in self.beyond_tolerance
        ]
        return out


def _value(check: dict) -> float | None:
    value = check.get("value")
    return float(value) if isinstance(value, (int, float)) else None


def compare_runs(
    report: dict, other: dict, checkpoints, tolerance: float, bounded: Callable[[str, str], bool]
) -> Agreement:
    """Every check both reports judged on each of `checkpoints` (those in both),
    paired; `bounded(suite, metric)` says whether a metric's values are compared."""
    pairs = []
    for name in checkpoints:
        mine, theirs = report["checkpoints"].get(name), other["checkpoints"].get(name)
        if mine is None or theirs is None:
            continue
        for suite, results in sorted(mine.get("suites", {}).items()):
            their_checks = theirs.get("suites", {}).get(suite, {}).get("checks", {})
            for check, verdict in sorted(results.get("checks", {}).items()):
                if check in their_checks:
                    other_verdict = their_checks[check]
                    pairs.append(
                        CheckPair(
                            name,
                            f"{suite}.{check}",
                            verdict["outcome"],
                            other_verdict["outcome"],
                            _value(verdict),
                            _value(other_verdict),
                            bounded(suite, verdict.get("metric", "")),
                        )
                    )
    return Agreement(pairs, tolerance)
