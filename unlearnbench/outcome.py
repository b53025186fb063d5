"""A check's outcome and the code of why: what reports hold and code
branches on (thresholds.py decides them; the reason in words comes after).
A module of its own so that the pytest layer reads them without the
statistics behind a decision (importing the plugin loads no numpy)."""

from __future__ import annotations

from enum import Enum


class Outcome(str, Enum):
    """A check's outcome on a checkpoint (a str: reports hold it as its value)."""

    PASS = "pass"
    FAIL = "fail"
    SKIP = "skip"  # not judged here: shown as skipped, with why
    INCONCLUSIVE = "inconclusive"  # judged, undecided by its interval (--strict-ci makes it a fail)
    ERROR = "error"  # the checkpoint or its input broke: the record holds the error

    def __str__(self) -> str:
        return self.value


class Code(str, Enum):
    """Why a verdict is what it is: what code reads; `explain` words it."""

    NEEDS_REFERENCE = "needs-reference"  # a relative check without its reference model (and no or_bound)
    METRIC_UNAVAILABLE = "metric-unavailable"
    NOT_GATED = "not-gated"  # a check off by default: its value is reported
    NOT_FINITE = "not-finite"  # the checkpoint's value: broken scores fail
    REFERENCE_UNAVAILABLE = "reference-unavailable"
    REFERENCE_NOT_FINITE = "reference-not-finite"
    REFERENCE_ITSELF = "reference-itself"  # the checkpoint is the check's yardstick: n/a
    # The bound cannot separate good from bad checkpoints (module doc):
    BOUND_AT_SCALE_END = "bound-at-scale-end"
    REFERENCE_ANSWERS_TOO_FEW = "reference-answers-too-few"  # requires.reference_answers_at_least
    NOTHING_TO_FORGET = "nothing-to-forget"  # requires.full_at_least
    REFERENCES_INDISTINGUISHABLE = "references-indistinguishable"  # requires.separated_from
    POINT_ESTIMATE = "point-estimate"  # decided on the value alone (rule.point_estimate)
    NO_INTERVAL = "no-interval"
    ZERO_WIDTH_INTERVAL = "zero-width-interval"
    DECIDED = "decided"  # the interval lies wholly on one side of the bound
    UNDERPOWERED = "underpowered"  # the interval reaches past the bound
    HOLM_NOT_SIGNIFICANT = "holm-not-significant"  # a fail its Holm-adjusted p-value does not carry

    def __str__(self) -> str:
        return self.value

    @property
    def cannot_separate(self) -> bool:
        return self in (
            Code.BOUND_AT_SCALE_END,
            Code.REFERENCE_ANSWERS_TOO_FEW,
            Code.NOTHING_TO_FORGET,
            Code.REFERENCES_INDISTINGUISHABLE,
        )
