"""Do two runs of the same suites say the same thing? Check by check, on the
checkpoints they share: the verdict (pass / fail / inconclusive / skip) and the
checked value. `unlearnbench zoo build --from-scratch` reads a zoo trained
here against the shipped one this way (docs/zoo.md): training is deterministic
on one CPU, not across instruction sets, so two builds are compared by what
they measure, within a tolerance, not by their bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class CheckPair:
    checkpoint: str
    check: str  # SUITE.CHECK
    outcome: str
    other_outcome: str
    value: float | None
    other_value: float | None

    @property
    def same_outcome(self) -> bool:
        return self.outcome == self.other_outcome

    @property
    def difference(self) -> float | None:
        if self.value is None or self.other_value is None:
            return None
        if not (math.isfinite(self.value) and math.isfinite(self.other_value)):
            return 0.0 if self.value == self.other_value else math.inf
        return abs(self.value - self.other_value)


@dataclass(frozen=True)
class Agreement:
    pairs: list[CheckPair]
    tolerance: float

    @property
    def flipped(self) -> list[CheckPair]:
        return [p for p in self.pairs if not p.same_outcome]

    @property
    def beyond_tolerance(self) -> list[CheckPair]:
        return [p for p in self.pairs if p.difference is not None and p.difference > self.tolerance]

    @property
    def largest(self) -> CheckPair | None:
        measured = [p for p in self.pairs if p.difference is not None]
        return max(measured, key=lambda p: p.difference) if measured else None

    @property
    def agrees(self) -> bool:
        return bool(self.pairs) and not self.flipped and not self.beyond_tolerance

    def lines(self, names: tuple[str, str] = ("run", "other run")) -> list[str]:
        checkpoints = sorted({p.checkpoint for p in self.pairs})
        out = [f"{len(self.pairs)} checks compared on {len(checkpoints)} checkpoints ({', '.join(checkpoints)}): "
               f"{len(self.pairs) - len(self.flipped)} verdicts the same, {len(self.flipped)} differ"]
        largest = self.largest
        if largest is not None:
            out.append(f"largest difference of a checked value: {largest.difference:.3g} ({largest.checkpoint} "
                       f"{largest.check}: {largest.value:.4g} vs {largest.other_value:.4g}); tolerance {self.tolerance:g}")
        out += [f"verdict differs: {p.checkpoint} {p.check}: {p.outcome} in the {names[0]}, {p.other_outcome} in the "
                f"{names[1]}" for p in self.flipped]
        out += [f"value differs by {p.difference:.3g} > {self.tolerance:g}: {p.checkpoint} {p.check}: {p.value:.4g} vs "
                f"{p.other_value:.4g}" for p in self.beyond_tolerance]
        return out


def _value(check: dict) -> float | None:
    value = check.get("value")
    return float(value) if isinstance(value, (int, float)) else None


def compare_runs(report: dict, other: dict, checkpoints, tolerance: float) -> Agreement:
    """Every check both reports judged on each of `checkpoints` (those in both), paired."""
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
                    pairs.append(CheckPair(name, f"{suite}.{check}", verdict["outcome"], other_verdict["outcome"],
                                           _value(verdict), _value(other_verdict)))
    return Agreement(pairs, tolerance)
