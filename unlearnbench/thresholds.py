"""Gates as data: one YAML file per suite, validated, judged into verdicts.

Suite file (`thresholds/<suite>.yaml`)::

    suite: smoke
    checks:
      <check name>:
        metric: <metric the suite computes>
        direction: at_least | at_most        # pass iff value >= / <= bound
        bound: <number>                      # an absolute bound, or:
        relative_to: full | retain           # bound = reference value -/+ margin
        margin: <number >= 0>                # tolerance towards the bad side
        or_bound: <number>                   # optional, with relative_to: an absolute bound that passes too
                                             # (the looser of the two is the bound); the only bound where the
                                             # run has no such reference model (else the check is skipped)
        rationale: <one line: why this bound>
        axis: forget | utility               # optional: what the check is evidence of (the ranking's axes)
        requires:                            # optional: when the yardstick can tell at all
          reference_answers_at_least: <share in [0, 1]>   # of items the reference scores above 0 on
          separated_from: full | retain      # that model must differ from the reference (paired interval excludes 0)
          full_at_least: <number>            # the full model's value: below it there is nothing to forget
        enabled: false                       # optional: reported, not gated, until an override enables it

A verdict is decided by the interval of its decision quantity
(evidence.py, docs/verdicts.md): pass or fail only when the interval lies
wholly on one side of the bound, else `inconclusive` (underpowered) with its
lean and the items a decision would need. A check whose bound cannot separate
checkpoints is `inconclusive` too, never passed: a bound at or past the end
of the metric's scale (the suite registry declares the scale; e.g. a retain
model that answers none of the "kept" questions puts `>= retain - margin`
below 0), or a `requires` that the reference models do not meet. pytest shows
an inconclusive check as skipped; `--strict-ci` fails it.

Override file (`--thresholds FILE`), per check, any subset of those fields::

    smoke:
      <check name>: {bound: -2.5}

Giving `bound` in an override replaces a relative bound and vice versa.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import Any

import yaml

from unlearnbench.errors import ThresholdsError
from unlearnbench.evidence import difference_estimate, powered_alpha, value_estimate
from unlearnbench.metrics.core import MetricResult, Unavailable
from unlearnbench.outcome import Code, Outcome
from unlearnbench.rule import DEFAULT_ALPHA, DEFAULT_POWER, DecisionRule

DIRECTIONS = ("at_least", "at_most")
REFERENCES = ("full", "retain")
CHECK_KEYS = {
    "metric",
    "direction",
    "bound",
    "relative_to",
    "margin",
    "rationale",
    "requires",
    "axis",
    "or_bound",
    "enabled",
}
# What a check is evidence of, for the ranking (report/verdicts.py): forgetting, or utility kept.
AXES = ("forget", "utility")
REQUIREMENTS = ("reference_answers_at_least", "separated_from", "full_at_least")
SUITE_FILE_KEYS = {"suite", "checks"}


class BoundForm(str, Enum):
    """Where a judged check's bound came from."""

    ABSOLUTE = "absolute"
    RELATIVE = "relative"  # reference value -/+ margin
    RELATIVE_LOOSER = "relative-looser"  # that, looser than the check's or_bound
    OR_BOUND_LOOSER = "or-bound-looser"  # the or_bound, looser than reference -/+ margin: judged as absolute
    NO_REFERENCE = "no-reference"  # the or_bound, without the reference model


@dataclass(frozen=True)
class Decision:
    """`Check.decide`'s result: the outcome, its code, the verdict's numbers
    (`fields`) and the few more the explanation states (`facts`)."""

    outcome: Outcome
    code: Code
    fields: dict[str, Any]
    facts: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Verdict:
    suite: str
    check: str
    metric: str
    outcome: Outcome
    reason: str
    rationale: str
    direction: str
    axis: str | None = None
    value: float | None = None
    ci: tuple[float, float] | None = None  # the metric's own 95% CI
    bound: float | None = None
    relative_to: str | None = None
    reference_value: float | None = None
    reference_ci: tuple[float, float] | None = None
    margin: float | None = None
    # The decision (docs/verdicts.md): the quantity decided on (the value, or
    # for a relative check the difference from the reference), its interval
    # at the rule's level and how it was made, the p-value of "it equals the
    # bound" (Holm-adjusted too under --correction holm), and what decided.
    difference: float | None = None
    decision_ci: tuple[float, float] | None = None
    interval: str | None = None
    p_value: float | None = None
    p_below: bool = False  # p_value is the smallest its interval can tell (1/B for B resamples): p < p_value
    p_adjusted: float | None = None
    decided_by: str | None = None  # "interval" | "point-estimate"; None: undecided
    lean: str | None = None  # an underpowered check's point estimate: "pass" | "fail"
    mde: float | None = None  # the smallest distance from the bound this n decides with probability `power`
    n_needed: int | None = None  # about how many items would decide an underpowered check with that power
    n: int | None = None
    clusters: int | None = None  # G: how many clusters (persons, documents, concepts) the n items come in
    n_effective: float | None = None  # n over the design effect: the independent items they are worth
    kind: str | None = None  # the metric's declared kind, which picked the interval (rule.METRIC_KINDS)
    code: Code | None = None  # why the outcome is what it is (`reason` words it)
    rule: str = "interval"
    alpha: float = DEFAULT_ALPHA
    power: float = DEFAULT_POWER
    correction: str = "none"
    strict_ci: bool = False

    @property
    def passed(self) -> bool:
        return self.outcome is Outcome.PASS

    @property
    def underpowered(self) -> bool:
        return self.lean is not None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON values (records travel between xdist workers as such)."""
        out = asdict(self)
        out["outcome"] = Outcome(self.outcome).value
        out["code"] = self.code.value if self.code is not None else None
        for key in ("ci", "reference_ci", "decision_ci"):
            out[key] = list(out[key]) if out[key] else None
        relative = self.difference is not None
        dci = self.decision_ci if relative and self.decision_ci else (None, None)
        rci = self.reference_ci or (None, None)
        out.update(
            difference_ci_low=dci[0], difference_ci_high=dci[1], reference_ci_low=rci[0], reference_ci_high=rci[1]
        )
        return out


@dataclass(frozen=True)
class Check:
    suite: str
    name: str
    metric: str
    direction: str
    rationale: str
    source: str
    bound: float | None = None
    relative_to: str | None = None
    margin: float = 0.0
    scale: tuple[float, float] | None = None  # the metric's range, from the suite registry
    kind: str = "unbounded"  # what its items are (rule.METRIC_KINDS), from the suite registry
    requires: Mapping[str, Any] = field(default_factory=dict)
    axis: str | None = None
    or_bound: float | None = None
    enabled: bool = True

    @property
    def reference_roles(self) -> tuple[str, ...]:
        """The reference models judging this check reads: its yardstick and those its requirements name."""
        roles = [
            self.relative_to,
            self.requires.get("separated_from"),
            "full" if "full_at_least" in self.requires else None,
        ]
        return tuple(dict.fromkeys(str(r) for r in roles if r))

    def judge(
        self,
        metrics: Mapping[str, MetricResult | Unavailable],
        reference: Mapping[str, MetricResult | Unavailable] | None = None,
        *,
        rule: DecisionRule = DecisionRule(),
        others: Mapping[str, Mapping[str, MetricResult | Unavailable] | None] | None = None,
        p_adjusted: float | None = None,
    ) -> Verdict:
        """The verdict under `rule` (docs/verdicts.md): `decide`, then
        `explain` in words."""
        decision = self.decide(metrics, reference, rule=rule, others=others, p_adjusted=p_adjusted)
        return Verdict(outcome=decision.outcome, code=decision.code, reason=explain(self, decision), **decision.fields)

    def decide(
        self,
        metrics: Mapping[str, MetricResult | Unavailable],
        reference: Mapping[str, MetricResult | Unavailable] | None = None,
        *,
        rule: DecisionRule = DecisionRule(),
        others: Mapping[str, Mapping[str, MetricResult | Unavailable] | None] | None = None,
        p_adjusted: float | None = None,
    ) -> Decision:
        """Pass or fail where the interval of the decision quantity lies
        wholly on one side of the bound (with `p_adjusted`, Holm's adjusted
        p-value, at most alpha), else inconclusive with its lean and the items
        it would need; on the value alone with `rule.point_estimate`. A
        relative check without its reference model is skipped, never passed;
        one whose bound cannot separate checkpoints is inconclusive (see the
        module doc; `others` holds the other reference models' metrics for
        `requires.separated_from`); a non-finite value or reference value
        fails. Numbers and a code only: `explain` words them."""
        base = self._verdict_fields(rule)
        absolute = self.relative_to is not None and reference is None  # no reference model: the or_bound alone
        if absolute and self.or_bound is None:
            return Decision(Outcome.SKIP, Code.NEEDS_REFERENCE, base)
        result = metrics[self.metric]
        if isinstance(result, Unavailable):
            return Decision(Outcome.SKIP, Code.METRIC_UNAVAILABLE, base, {"why": result.reason})
        if not self.enabled:
            return Decision(Outcome.SKIP, Code.NOT_GATED, base | {"value": result.value, "ci": tuple(result.ci)})
        if not _finite(result):
            return Decision(Outcome.FAIL, Code.NOT_FINITE, base, {"value": result.value, "ci": list(result.ci)})
        yardstick: MetricResult | None = None
        bound: float
        if absolute:  # judged as an absolute check: the verdict names no reference model
            assert self.or_bound is not None  # returned above without one
            bound, form = self.or_bound, BoundForm.NO_REFERENCE
            base.update(relative_to=None, margin=None)
            relative_bound = None
        elif self.relative_to:
            assert reference is not None  # not `absolute`: the reference model's metrics are given
            found = reference[self.metric]
            if isinstance(found, Unavailable):
                return Decision(Outcome.SKIP, Code.REFERENCE_UNAVAILABLE, base, {"why": found.reason})
            if not _finite(found):
                return Decision(Outcome.FAIL, Code.REFERENCE_NOT_FINITE, base, {"value": found.value})
            yardstick = found
            relative_bound = (
                yardstick.value - self.margin if self.direction == "at_least" else yardstick.value + self.margin
            )
            bound, form = relative_bound, BoundForm.RELATIVE
            if self.or_bound is not None:
                looser = min if self.direction == "at_least" else max
                if looser(relative_bound, self.or_bound) != relative_bound:
                    bound, form = self.or_bound, BoundForm.OR_BOUND_LOOSER
                    base.update(relative_to=None, margin=None)  # judged as an absolute check, as the verdict says
                else:
                    form = BoundForm.RELATIVE_LOOSER
        else:
            assert self.bound is not None  # an absolute check has its bound (validated at load)
            bound, form, relative_bound = self.bound, BoundForm.ABSOLUTE, None
        against = yardstick if base["relative_to"] is not None else None
        relative = against is not None
        if against is not None:  # decide on the difference from the reference, over the same items
            estimate = difference_estimate(result, against, self.kind, self.scale)
            threshold = relative_threshold(self)
        else:
            estimate = value_estimate(result, self.kind, self.scale)
            threshold = bound
        interval = estimate.interval(rule.alpha)
        judged = dict(
            base,
            value=result.value,
            ci=tuple(result.ci),
            bound=bound,
            n=result.n,
            reference_value=against.value if against else None,
            reference_ci=tuple(against.ci) if against else None,
            difference=estimate.value if relative else None,
            decision_ci=interval,
            interval=estimate.method,
            mde=estimate.mde(rule.alpha, rule.power),
            clusters=estimate.clusters,
            n_effective=estimate.n_effective,
            p_adjusted=p_adjusted,
        )
        p_value = estimate.p_value(threshold)
        judged.update(p_value=p_value, p_below=p_value is not None and p_value <= estimate.p_floor)

        def good(x: float) -> bool:
            return x >= threshold if self.direction == "at_least" else x <= threshold

        point_ok = good(estimate.value)
        facts = {
            "form": form,
            "relative_bound": relative_bound,
            "yardstick": yardstick.value if yardstick is not None else None,
            "threshold": threshold,
            "point_ok": point_ok,
            "strict": rule.strict,
            "level": 1 - rule.alpha,
        }
        inconclusive = Outcome.FAIL if rule.strict else Outcome.INCONCLUSIVE  # --strict-ci fails an undecided check
        separation = self._why_inconclusive(bound, reference, others or {}, rule)
        if separation:
            code, why = separation
            return Decision(inconclusive, code, judged, facts | why)
        if rule.point_estimate:
            return Decision(
                Outcome.PASS if point_ok else Outcome.FAIL,
                Code.POINT_ESTIMATE,
                judged | {"decided_by": "point-estimate"},
                facts,
            )
        lean = "pass" if point_ok else "fail"
        if interval is None or not interval[1] > interval[0]:
            code = Code.NO_INTERVAL if interval is None else Code.ZERO_WIDTH_INTERVAL
            # An undecided verdict leans; a failed one (--strict-ci) does not, though its reason says the lean.
            return Decision(
                inconclusive, code, judged if rule.strict else judged | {"lean": lean}, facts | {"lean": lean}
            )
        passes = good(interval[0]) and good(interval[1])
        fails = not good(interval[0]) and not good(interval[1])
        code = Code.UNDERPOWERED
        if fails and p_adjusted is not None and p_adjusted > rule.alpha:
            # Holm across the checkpoint's checks: a FAIL must survive the family's correction. A PASS needs
            # none: the checkpoint passes only if every check does (an intersection-union test at alpha).
            fails, code = False, Code.HOLM_NOT_SIGNIFICANT
        if passes or fails:
            return Decision(
                Outcome.PASS if passes else Outcome.FAIL, Code.DECIDED, judged | {"decided_by": "interval"}, facts
            )
        needed = estimate.needed(threshold, rule.alpha, rule.power)
        return Decision(inconclusive, code, judged | {"lean": lean, "n_needed": needed}, facts)

    def _verdict_fields(self, rule: DecisionRule) -> dict[str, Any]:
        return dict(
            suite=self.suite,
            check=self.name,
            metric=self.metric,
            rationale=self.rationale,
            direction=self.direction,
            axis=self.axis,
            relative_to=self.relative_to,
            kind=self.kind,
            **rule.to_dict(),
            # A skipped relative check still shows its bound's form (`>= full - 0.05`) in the report.
            margin=self.margin if self.relative_to else None,
        )

    def on_its_reference(self, role: str, rule: DecisionRule = DecisionRule(), why: str = "") -> Verdict:
        """The verdict on the reference model `role` itself where this check
        would compare it with itself: not applicable (shown as skipped), never
        a pass on a difference of 0 by construction."""
        decision = Decision(
            Outcome.SKIP,
            Code.REFERENCE_ITSELF,
            self._verdict_fields(rule),
            {"role": role, "why": why or "the yardstick of this check"},
        )
        return Verdict(outcome=decision.outcome, code=decision.code, reason=explain(self, decision), **decision.fields)

    def power(
        self,
        references: Mapping[str, Mapping[str, MetricResult | Unavailable] | None],
        rule: DecisionRule = DecisionRule(),
    ) -> dict[str, Any] | None:
        """The preflight of this check from the reference models' results alone
        (docs/verdicts.md), for a candidate that scores what its reference does
        (the relative check's reference; for an absolute check, the retain
        model, else the full model): its margin (the distance from that score
        to the bound: a relative check's `margin`, or the or_bound where that is
        looser), the smallest difference from the bound its n tells with the
        rule's power (the distance from the score to the end, on the bound's
        side, of its interval at the powered level: `evidence.powered_alpha`)
        and about how many items would tell the margin with that power (as an
        underpowered verdict's `n_needed` is found). None where there is nothing to say: no
        reference result, no interval (or one of zero width), or a reference on
        the wrong side of the bound."""
        role = self.relative_to or next((r for r in ("retain", "full") if references.get(r)), None)
        result = (references.get(role) or {}).get(self.metric) if role else None
        if not self.enabled or not isinstance(result, MetricResult) or not _finite(result):
            return None
        estimate = value_estimate(result, self.kind, self.scale)
        interval = estimate.interval(powered_alpha(rule.alpha, rule.power))
        if interval is None:
            return None
        if self.relative_to:
            bound = result.value - self.margin if self.direction == "at_least" else result.value + self.margin
            if self.or_bound is not None:  # the looser of the two is the bound
                bound = min(bound, self.or_bound) if self.direction == "at_least" else max(bound, self.or_bound)
        else:
            assert self.bound is not None  # an absolute check has its bound (validated at load)
            bound = self.bound
        margin = result.value - bound if self.direction == "at_least" else bound - result.value
        mde = result.value - interval[0] if self.direction == "at_least" else interval[1] - result.value
        if margin < 0 or mde <= 0:  # the reference fails it itself, or holds its value by construction (PL 0)
            return None
        underpowered = mde > margin
        return {
            "suite": self.suite,
            "check": self.name,
            "metric": self.metric,
            "reference": role,
            "n": result.n,
            "mde": mde,
            "margin": margin,
            "underpowered": underpowered,
            "n_needed": estimate.needed(bound, rule.alpha, rule.power) if underpowered else None,
            "power": rule.power,
            "clusters": estimate.clusters,
        }

    def _why_inconclusive(
        self,
        bound: float,
        reference: Mapping[str, MetricResult | Unavailable] | None,
        others: Mapping[str, Mapping[str, MetricResult | Unavailable] | None],
        rule: DecisionRule,
    ) -> tuple[Code, dict[str, Any]] | None:
        """(why this bound cannot separate good from bad checkpoints, its numbers), or None."""
        if self.scale is not None:
            low, high = self.scale
            could_not_fail = bound <= low if self.direction == "at_least" else bound >= high
            could_not_pass = bound > high if self.direction == "at_least" else bound < low
            if could_not_fail or could_not_pass:
                return Code.BOUND_AT_SCALE_END, {
                    "end": "floor" if bound <= low else "ceiling",
                    "could_not": "fail" if could_not_fail else "pass",
                }
        share = self.requires.get("reference_answers_at_least")
        yardstick = reference[self.metric] if reference else None
        if share is not None and isinstance(yardstick, MetricResult) and yardstick.per_item:
            answered = sum(v > 0 for v in yardstick.per_item.values()) / len(yardstick.per_item)
            if answered < share:
                return Code.REFERENCE_ANSWERS_TOO_FEW, {"answered": answered, "required": share}
        floor = self.requires.get("full_at_least")
        full = (others.get("full") or {}).get(self.metric) if floor is not None else None
        if floor is not None and isinstance(full, MetricResult) and _finite(full) and full.value < floor:
            return Code.NOTHING_TO_FORGET, {"full": full.value, "required": floor}
        role = self.requires.get("separated_from")
        other = (others.get(role) or {}).get(self.metric) if role else None
        if isinstance(other, MetricResult) and isinstance(yardstick, MetricResult) and _finite(other):
            gap = difference_estimate(other, yardstick)
            interval = gap.interval(rule.alpha) or (gap.value, gap.value)
            if interval[0] <= 0 <= interval[1]:
                return Code.REFERENCES_INDISTINGUISHABLE, {
                    "other": role,
                    "gap": gap.value,
                    "gap_ci": interval,
                    "gap_method": gap.method,
                }
        return None


def explain(check: Check, decision: Decision) -> str:
    """A verdict's reason in words: what was measured, against which bound,
    and why that decided it or did not."""
    f, facts, code, metric = decision.fields, decision.facts, decision.code, check.metric
    simple = {
        Code.NEEDS_REFERENCE: lambda: (
            f"needs --{check.relative_to}-model: the bound is relative to the {check.relative_to} model"
        ),
        Code.METRIC_UNAVAILABLE: lambda: f"{metric} unavailable: {facts['why']}",
        Code.NOT_GATED: lambda: (
            f"{metric} = {f['value']:.4g}, reported, not gated: this check is off by default; "
            f"a --thresholds file with `{check.suite}: {{{check.name}: {{enabled: true}}}}` "
            "gates it"
        ),
        Code.NOT_FINITE: lambda: (
            f"{metric} is not a finite number ({facts['value']}, CI {facts['ci']}): the checkpoint's scores are broken"
        ),
        Code.REFERENCE_UNAVAILABLE: lambda: f"{metric} unavailable on the {check.relative_to} model: {facts['why']}",
        Code.REFERENCE_NOT_FINITE: lambda: (
            f"{metric} on the {check.relative_to} model is not a finite number "
            f"({facts['value']}): the yardstick is broken"
        ),
        Code.REFERENCE_ITSELF: lambda: (
            f"n/a (reference): this checkpoint is the run's {facts['role']} model, {facts['why']}"
        ),
    }
    if code in simple:
        return simple[code]()
    op = ">=" if check.direction == "at_least" else "<="
    level = f"{100 * facts['level']:.4g}%"
    strict = "; --strict-ci fails an inconclusive check" if facts["strict"] else ""
    measured = f"{metric} = {f['value']:.4g} [95% CI {f['ci'][0]:.4g}, {f['ci'][1]:.4g}; n={f['n']}]"
    bound_text = _bound_text(check, f["bound"], facts)
    if code.cannot_separate:
        why_not, advice = _why_not_separated(check, code, facts, level)
        return f"inconclusive: {measured} against {op} {bound_text}: {why_not}. {advice}{strict}"
    verdict_text = f"{measured} {'' if facts['point_ok'] else 'not '}{op} {bound_text}"
    relative = f["relative_to"] is not None
    if relative:
        interval = f["decision_ci"]
        spread = f" [{level} CI {interval[0]:.4g}, {interval[1]:.4g}, {f['interval']}]" if interval else ""
        verdict_text += (
            f"; difference from {check.relative_to} {f['difference']:+.4g}{spread}, held to "
            f"{op} {facts['threshold']:+.4g}"
        )
    if code in (Code.POINT_ESTIMATE, Code.DECIDED):
        return verdict_text
    if code in (Code.NO_INTERVAL, Code.ZERO_WIDTH_INTERVAL):
        why = (
            f"{metric} has no interval here ({f['interval']})"
            if code is Code.NO_INTERVAL
            else f"its {level} interval has zero width ({f['interval']}): no spread to tell chance from effect"
        )
        return f"inconclusive (no interval, leans {facts['lean']}): {verdict_text}, but {why}{strict}"
    why = (
        f"its Holm-adjusted p = {f['p_adjusted']:.3g} > alpha {f['alpha']:g} across the checkpoint's checks "
        "(a fail is corrected for the checkpoint's other checks)"
        if code is Code.HOLM_NOT_SIGNIFICANT
        else f"the {level} interval of the {'difference' if relative else 'value'} reaches past the bound"
    )
    more = f"~{f['n_needed']} items would decide it" if f["n_needed"] else "its value sits on the bound"
    return f"inconclusive (underpowered, leans {f['lean']}): {verdict_text}, but {why}; {more}{strict}"


def _bound_text(check: Check, bound: float, facts: dict[str, Any]) -> str:
    form = facts["form"]
    if form is BoundForm.ABSOLUTE:
        return f"{bound:.4g}"
    if form is BoundForm.NO_REFERENCE:
        return f"{bound:.4g} (no --{check.relative_to}-model: the check's absolute bound)"
    sign = "-" if check.direction == "at_least" else "+"
    relative = f"{facts['relative_bound']:.4g} ({check.relative_to} {facts['yardstick']:.4g} {sign} {check.margin:g})"
    if form is BoundForm.OR_BOUND_LOOSER:
        return f"{check.or_bound:.4g} (the check's absolute bound, looser than {relative})"
    if form is BoundForm.RELATIVE_LOOSER:
        return f"{relative}, looser than the check's absolute bound {check.or_bound:.4g}"
    return relative


def _why_not_separated(check: Check, code: Code, facts: dict[str, Any], level: str) -> tuple[str, str]:
    """(why the bound cannot separate checkpoints, what would let it)."""
    more_data = (
        f"Use data the {check.relative_to or 'checkpoint'} model can answer, more in-context examples "
        f"(dusk: --suite-option dusk.icl_shots=N) or more items"
    )
    forgettable = "An evaluation of forgetting needs data the full model answers"
    if code is Code.BOUND_AT_SCALE_END:
        assert check.scale is not None  # a scale end is found only on a declared scale
        low, high = check.scale
        return (
            f"the bound is at or past the {facts['end']} of {check.metric}'s scale [{low:g}, {high:g}], so no "
            f"checkpoint could {facts['could_not']}"
        ), more_data
    if code is Code.REFERENCE_ANSWERS_TOO_FEW:
        return (
            f"the {check.relative_to} model answers {facts['answered']:.0%} of the items (scores above 0), "
            f"under the {facts['required']:.0%} this check requires to tell kept from lost"
        ), more_data
    if code is Code.NOTHING_TO_FORGET:
        return (
            f"the full model scores {facts['full']:.4g} on {check.metric}, under the {facts['required']:g} "
            f"this check requires: it holds nothing to forget"
        ), f"{forgettable} (or a stronger full model)"
    low, high = facts["gap_ci"]
    return (
        f"the {facts['other']} and {check.relative_to} models are indistinguishable on {check.metric}: the "
        f"{level} interval of their difference, {facts['gap']:+.4g} [{low:.4g}, {high:.4g}, "
        f"{facts['gap_method']}], contains 0, so the data cannot show forgetting"
    ), f"{forgettable} better than the {check.relative_to} model, or more items"


def power_line(power: dict[str, Any]) -> str:
    """'underpowered: dusk.verbatim_forgotten can tell differences >= 0.11 at 80% power with n=128 items in 16
    clusters; its margin is 0.05; ~600 items would', or 'ok: ...' for a check its n can decide."""
    clusters = f" in {power['clusters']} clusters" if power.get("clusters") and power["clusters"] < power["n"] else ""
    at_power = f" at {100 * power['power']:.0f}% power" if power.get("power") else ""
    line = (
        f"{power['suite']}.{power['check']} can tell differences >= {power['mde']:.2g}{at_power} with "
        f"n={power['n']} items{clusters}; its margin is {power['margin']:.2g}"
    )
    if not power["underpowered"]:
        return f"ok: {line}"
    needed = f"~{power['n_needed']} items would" if power["n_needed"] else "no number of items would (margin 0)"
    return f"underpowered: {line}; {needed}"


def _finite(result: MetricResult) -> bool:
    """A finite value with an interval that is a number at both ends (an end may be infinite: privacy
    leakage's resamples where the retain model's AUC is 0)."""
    return math.isfinite(result.value) and not any(math.isnan(c) for c in result.ci)


def relative_threshold(check: Check) -> float:
    """What a relative check holds the difference candidate - reference to:
    -margin (at_least) or +margin (at_most), exactly, not the rounded
    (reference - margin) - reference."""
    return -check.margin if check.direction == "at_least" else check.margin


def _number(value: object, path: str | Path, check: str | None, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ThresholdsError(path, f"'{field}' must be a finite number, not {value!r}", check)
    return float(value)


def _validate_check(
    name: str,
    fields: Mapping[str, Any],
    suite: str,
    metrics: tuple[str, ...] | Callable[[str], str | None],
    path: str,
    scales: Mapping[str, tuple[float, float]] | None = None,
    kinds: Mapping[str, str] | Callable[[str], str] | None = None,
) -> Check:
    if not isinstance(fields, Mapping):
        raise ThresholdsError(path, f"expected a mapping of fields, not {type(fields).__name__}", name)
    unknown = set(fields) - CHECK_KEYS
    if unknown:
        raise ThresholdsError(
            path, f"unknown key(s) {', '.join(sorted(unknown))} (allowed: {', '.join(sorted(CHECK_KEYS))})", name
        )
    for required in ("metric", "direction", "rationale"):
        if required not in fields:
            raise ThresholdsError(path, f"missing '{required}'", name)
    for text in ("metric", "direction", "rationale"):
        if not isinstance(fields[text], str) or not fields[text].strip():
            raise ThresholdsError(path, f"'{text}' must be a non-empty string, not {fields[text]!r}", name)
    if callable(metrics):  # an open suite (SuiteSpec.open_metrics) checks the name itself
        problem = metrics(fields["metric"])
        if problem:
            raise ThresholdsError(path, f"metric '{fields['metric']}': {problem}", name)
    elif fields["metric"] not in metrics:
        raise ThresholdsError(
            path, f"suite '{suite}' has no metric '{fields['metric']}' (it has: {', '.join(metrics)})", name
        )
    if fields["direction"] not in DIRECTIONS:
        raise ThresholdsError(
            path, f"'direction' must be one of {', '.join(DIRECTIONS)}, not {fields['direction']!r}", name
        )
    has_bound, has_ref = "bound" in fields, "relative_to" in fields
    if has_bound == has_ref:
        raise ThresholdsError(path, "give exactly one of 'bound' (absolute) or 'relative_to' (full|retain)", name)
    if has_ref and fields["relative_to"] not in REFERENCES:
        raise ThresholdsError(
            path, f"'relative_to' must be one of {', '.join(REFERENCES)}, not {fields['relative_to']!r}", name
        )
    if "margin" in fields and not has_ref:
        raise ThresholdsError(path, "'margin' only applies with 'relative_to'", name)
    if "axis" in fields and fields["axis"] not in AXES:
        raise ThresholdsError(path, f"'axis' must be one of {', '.join(AXES)}, not {fields['axis']!r}", name)
    margin = _number(fields.get("margin", 0.0), path, name, "margin")
    if margin < 0:
        raise ThresholdsError(path, f"'margin' must be >= 0 (it is a tolerance), not {margin}", name)
    if "or_bound" in fields and not has_ref:
        raise ThresholdsError(
            path, "'or_bound' only applies with 'relative_to' (an absolute bound that passes too)", name
        )
    if not isinstance(fields.get("enabled", True), bool):
        raise ThresholdsError(path, f"'enabled' must be true or false, not {fields['enabled']!r}", name)
    return Check(
        suite=suite,
        name=name,
        metric=fields["metric"],
        direction=fields["direction"],
        rationale=fields["rationale"].strip(),
        source=path,
        bound=_number(fields["bound"], path, name, "bound") if has_bound else None,
        relative_to=fields.get("relative_to"),
        margin=margin,
        scale=(scales or {}).get(fields["metric"]),
        kind=_kind(fields["metric"], scales or {}, kinds or {}),
        requires=_requirements(fields.get("requires", {}), fields.get("relative_to"), path, name),
        axis=fields.get("axis"),
        or_bound=_number(fields["or_bound"], path, name, "or_bound") if "or_bound" in fields else None,
        enabled=fields.get("enabled", True),
    )


def _kind(
    metric: str, scales: Mapping[str, tuple[float, float]], kinds: Mapping[str, str] | Callable[[str], str]
) -> str:
    """The metric's declared kind (a mapping, or an open suite's function of the name); else by its scale."""
    declared = kinds(metric) if callable(kinds) else kinds.get(metric)
    return declared or ("bounded" if metric in scales else "unbounded")


def _requirements(raw: object, relative_to: str | None, path: str, check: str) -> dict[str, Any]:
    if not isinstance(raw, Mapping):
        raise ThresholdsError(path, f"'requires' must be a mapping, not {type(raw).__name__}", check)
    unknown = set(raw) - set(REQUIREMENTS)
    if unknown:
        raise ThresholdsError(
            path,
            f"unknown requirement(s) {', '.join(sorted(unknown))} in 'requires' (allowed: {', '.join(REQUIREMENTS)})",
            check,
        )
    if raw and not relative_to:
        raise ThresholdsError(
            path, "'requires' only applies with 'relative_to' (it is about the reference models)", check
        )
    out = dict(raw)
    if "reference_answers_at_least" in raw:
        share = _number(raw["reference_answers_at_least"], path, check, "requires.reference_answers_at_least")
        if not 0 <= share <= 1:
            raise ThresholdsError(
                path, f"'requires.reference_answers_at_least' is a share between 0 and 1, not {share}", check
            )
        out["reference_answers_at_least"] = share
    if "full_at_least" in raw:
        out["full_at_least"] = _number(raw["full_at_least"], path, check, "requires.full_at_least")
    if "separated_from" in raw and (raw["separated_from"] not in REFERENCES or raw["separated_from"] == relative_to):
        raise ThresholdsError(
            path,
            f"'requires.separated_from' must name the other reference model than "
            f"'{relative_to}' (one of {', '.join(REFERENCES)}), not {raw['separated_from']!r}",
            check,
        )
    return out


def _read_yaml(path: Path) -> Any:
    if not path.is_file():
        raise ThresholdsError(path, "file not found")
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ThresholdsError(path, f"not valid YAML ({str(exc).splitlines()[0]})") from None


def load_suite_thresholds(
    path: Path,
    suite: str,
    metrics: tuple[str, ...] | Callable[[str], str | None],
    scales: Mapping[str, tuple[float, float]] | None = None,
    kinds: Mapping[str, str] | Callable[[str], str] | None = None,
) -> dict[str, Check]:
    """A suite's default gate, validated; raises ThresholdsError naming the problem."""
    raw = _read_yaml(path)
    if not isinstance(raw, Mapping):
        raise ThresholdsError(path, "expected a mapping with 'suite' and 'checks'")
    unknown = set(raw) - SUITE_FILE_KEYS
    if unknown:
        raise ThresholdsError(path, f"unknown top-level key(s) {', '.join(sorted(unknown))} (allowed: suite, checks)")
    if raw.get("suite") != suite:
        raise ThresholdsError(path, f"'suite' must be '{suite}', not {raw.get('suite')!r}")
    checks = raw.get("checks")
    if not isinstance(checks, Mapping) or not checks:
        raise ThresholdsError(path, "'checks' must be a non-empty mapping of check name -> fields")
    return {
        name: _validate_check(str(name), fields, suite, metrics, str(path), scales, kinds)
        for name, fields in checks.items()
    }


def apply_overrides(path: Path, gates: dict[str, dict[str, Check]], metrics: Mapping[str, tuple[str, ...]]) -> None:
    """Apply a user's `--thresholds` file to the loaded gates, in place."""
    raw = _read_yaml(path)
    if not isinstance(raw, Mapping):
        raise ThresholdsError(path, "expected a mapping of suite -> check -> fields")
    for suite, overrides in raw.items():
        if suite not in metrics:
            raise ThresholdsError(path, f"unknown suite '{suite}' (known: {', '.join(metrics)})")
        if suite not in gates:
            continue  # a suite this run does not collect
        if not isinstance(overrides, Mapping):
            raise ThresholdsError(path, f"suite '{suite}': expected a mapping of check -> fields")
        for name, fields in overrides.items():
            if name not in gates[suite]:
                raise ThresholdsError(
                    path, f"suite '{suite}' has no check of this name (it has: {', '.join(gates[suite])})", name
                )
            if not isinstance(fields, Mapping):
                raise ThresholdsError(path, f"expected a mapping of fields, not {type(fields).__name__}", name)
            current = gates[suite][name]
            merged: dict[str, Any] = {
                "metric": current.metric,
                "direction": current.direction,
                "rationale": current.rationale,
            }
            if current.axis:
                merged["axis"] = current.axis
            if not current.enabled:
                merged["enabled"] = False
            if current.relative_to:
                merged.update(relative_to=current.relative_to, margin=current.margin)
                if current.requires:
                    merged["requires"] = dict(current.requires)
                if current.or_bound is not None:
                    merged["or_bound"] = current.or_bound
            else:
                merged["bound"] = current.bound
            if "bound" in fields:
                for relative in ("relative_to", "margin", "requires", "or_bound"):
                    merged.pop(relative, None)
            if "relative_to" in fields or "margin" in fields:
                merged.pop("bound", None)
            merged.update(fields)
            checked = _validate_check(str(name), merged, suite, metrics[suite], str(path))
            gates[suite][name] = replace(checked, scale=current.scale, kind=current.kind)
