"""How a run turns evidence into verdicts: the plugin's --alpha, --correction,
--point-estimate and --strict-ci as one value (docs/verdicts.md). Kept apart
from the statistics (evidence.py) so that the plugin's options import nothing
heavy."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_ALPHA = 0.05
# The power `mde` and `n_needed` aim at: the chance that a true value that far from the bound is decided.
DEFAULT_POWER = 0.8
CORRECTIONS = ("none", "holm")
# What a metric's items are, which picks its decision interval (evidence.py, docs/verdicts.md).
METRIC_KINDS = ("binary", "bounded", "unbounded", "set")


@dataclass(frozen=True)
class DecisionRule:
    """The rule of a run."""

    alpha: float = DEFAULT_ALPHA
    power: float = DEFAULT_POWER  # what the minimum detectable effect and the items needed aim at
    # "holm": a FAIL is Holm-Bonferroni-corrected across all of a checkpoint's checks in the run (a PASS
    # needs no correction: the checkpoint passes only if every check does); "none": alpha per check.
    correction: str = "holm"
    point_estimate: bool = False  # decide on the value alone, as papers' tables do (no correction then)
    strict: bool = False  # a check the evidence does not decide fails

    def __post_init__(self) -> None:
        if self.point_estimate:  # nothing to correct: no check is decided by an interval
            object.__setattr__(self, "correction", "none")

    @property
    def name(self) -> str:
        return "point-estimate" if self.point_estimate else "interval"

    def describe(self) -> str:
        if self.point_estimate:
            return "point estimate: a check passes when its value is on the good side of its bound"
        family = (
            "; a fail also needs its Holm-adjusted p-value <= alpha across all of the checkpoint's checks "
            "(--correction holm; a checkpoint passes only if every check passes)"
            if self.correction == "holm"
            else "; no correction for the checkpoint's other checks (--correction none: alpha per check)"
        )
        return (
            f"interval (alpha {self.alpha:g}): pass or fail only when the whole {100 * (1 - self.alpha):.4g}% "
            f"interval of the value, or of its difference from the reference, is on one side of the "
            f"bound{family}; otherwise inconclusive"
            + (" (--strict-ci fails it)" if self.strict else "")
            + f". mde and n_needed aim at {100 * self.power:.0f}% power"
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "rule": self.name,
            "alpha": self.alpha,
            "power": self.power,
            "correction": self.correction,
            "strict_ci": self.strict,
        }
