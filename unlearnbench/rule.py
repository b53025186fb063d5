"""How a run turns evidence into verdicts: the plugin's --alpha, --correction,
--point-estimate and --strict-ci as one value (docs/verdicts.md). Kept apart
from the statistics (evidence.py) so that the plugin's options import nothing
heavy."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_ALPHA = 0.05
CORRECTIONS = ("none", "holm")


@dataclass(frozen=True)
class DecisionRule:
    """The rule of a run."""

    alpha: float = DEFAULT_ALPHA
    correction: str = "none"  # "holm": Holm-Bonferroni across one checkpoint's checks in a suite
    point_estimate: bool = False  # decide on the value alone, as papers' tables do
    strict: bool = False  # a check the evidence does not decide fails

    @property
    def name(self) -> str:
        return "point-estimate" if self.point_estimate else "interval"

    def describe(self) -> str:
        if self.point_estimate:
            return "point estimate: a check passes when its value is on the good side of its bound"
        family = ", Holm-Bonferroni across each checkpoint's checks in a suite" if self.correction == "holm" else ""
        return (f"interval (alpha {self.alpha:g}): pass or fail only when the whole {100 * (1 - self.alpha):.4g}% "
                f"interval of the value, or of its difference from the reference, is on one side of the "
                f"bound{family}; otherwise inconclusive"
                + (" (--strict-ci fails it)" if self.strict else ""))

    def to_dict(self) -> dict:
        return {"rule": self.name, "alpha": self.alpha, "correction": self.correction, "strict_ci": self.strict}
