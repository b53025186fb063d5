"""The decision quantity and its intervals (unlearnbench/evidence.py) against
scipy, statsmodels and hand-worked values, never against our own functions."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import confint_proportions_2indep, proportion_confint, proportions_ztest

from unlearnbench.evidence import (
    Estimate,
    difference_estimate,
    holm_adjusted,
    newcombe_paired,
    value_estimate,
)
from unlearnbench.rule import DecisionRule
from unlearnbench.metrics.core import BOOTSTRAP_RESAMPLES, MetricResult, mean_result, replicated, seeded
from unlearnbench.thresholds import Check


def scores(values, name="m"):
    return mean_result(name, {f"q{i}": float(v) for i, v in enumerate(values)}, higher_is_better=True)


def kept(margin=0.05):
    return Check(suite="demo", name="kept", metric="m", direction="at_least", rationale="r", source="t.yaml",
                 relative_to="retain", margin=margin)


def test_paired_bootstrap_is_scipys_paired_percentile_bootstrap_with_the_same_resamples():
    rng = np.random.default_rng(5)
    reference = rng.uniform(0, 1, 40)
    candidate = np.clip(reference - 0.03 + rng.normal(0, 0.05, 40), 0, 1)
    for seed in (0, 1):
        with seeded(seed):
            ours = difference_estimate(scores(candidate), scores(reference))
            interval = ours.interval(0.05)
        theirs = stats.bootstrap((candidate, reference), lambda a, b, axis=-1: a.mean(axis) - b.mean(axis),
                                 paired=True, vectorized=True, n_resamples=BOOTSTRAP_RESAMPLES,
                                 method="percentile", rng=np.random.default_rng(seed))
        assert ours.method == "bootstrap-paired"
        assert interval == pytest.approx((theirs.confidence_interval.low, theirs.confidence_interval.high), abs=1e-12)


def test_a_constant_shift_on_every_item_is_decided_paired_and_not_unpaired():
    # The candidate scores 0.02 below the retain model on every one of 30 items
    # whose scores spread over [0.1, 0.9]: paired, the difference is exactly
    # -0.02 with no spread; unpaired, each mean's own spread (~0.08) swamps it.
    reference = np.linspace(0.1, 0.9, 30)
    candidate, retain = scores(reference - 0.02), scores(reference)
    paired = difference_estimate(candidate, retain)
    assert paired.interval(0.05) == pytest.approx((-0.02, -0.02), abs=1e-12)
    renamed = mean_result("m", {f"other{i}": v for i, v in enumerate(reference - 0.02)}, higher_is_better=True)
    unpaired = difference_estimate(renamed, retain)  # not the same items: no pairing
    low, high = unpaired.interval(0.05)
    assert unpaired.method == "mover-unpaired" and low < -0.05 < 0 < high
    # The verdict follows the paired interval: -0.02 >= -0.05 is decided.
    verdict = kept().judge({"m": candidate}, {"m": retain})
    assert verdict.outcome == "pass" and verdict.decided_by == "interval"
    assert verdict.difference == pytest.approx(-0.02) and verdict.interval == "bootstrap-paired"
    assert kept().judge({"m": renamed}, {"m": retain}).outcome == "inconclusive"


def test_newcombe_paired_with_uncorrelated_scores_is_newcombes_independent_hybrid_score_interval():
    # phi = 0 when both * neither == first_only * second_only: (2, 3, 2, 3) -> 6 == 6.
    # Newcombe's paired method 10 then reduces to his hybrid score interval for
    # two independent proportions (statsmodels' "newcomb"), p1 = 5/10, p2 = 4/10.
    for alpha in (0.05, 0.1):
        low, high = newcombe_paired((2, 3, 2, 3), alpha)
        ref = confint_proportions_2indep(5, 10, 4, 10, method="newcomb", compare="diff", alpha=alpha)
        assert (low, high) == pytest.approx(tuple(map(float, ref)), abs=1e-12)


def test_newcombe_paired_worked_by_hand():
    # 20 items: both right 12, only the candidate 1, only the reference 5, neither 2.
    # p1 = 13/20 = 0.65, p2 = 17/20 = 0.85, delta = -0.2. Wilson 95% (z = 1.959964):
    # p1: [0.432854, 0.818808], p2: [0.639581, 0.947631] (statsmodels agrees, checked below).
    # phi = (12*2 - 1*5) / sqrt(13 * 7 * 17 * 3) = 19 / sqrt(4641) = 0.278899.
    # L = -0.2 - sqrt(0.217146^2 - 2 phi 0.217146 * 0.097631 + 0.097631^2) = -0.2 - sqrt(0.044859) = -0.411799
    # U = -0.2 + sqrt(0.168808^2 - 2 phi 0.168808 * 0.210419 + 0.210419^2) = -0.2 + sqrt(0.052959) = 0.030128
    assert proportion_confint(13, 20, method="wilson") == pytest.approx((0.432854, 0.818808), abs=1e-6)
    assert proportion_confint(17, 20, method="wilson") == pytest.approx((0.639581, 0.947631), abs=1e-6)
    assert newcombe_paired((12, 1, 5, 2)) == pytest.approx((-0.411799, 0.030128), abs=2e-6)


def test_a_paired_difference_of_all_correct_items_is_not_a_zero_width_interval():
    # Candidate and retain both answer all 6: the difference is 0, but 6 items
    # cannot show that the candidate keeps 95% of what the retain model knows.
    estimate = difference_estimate(scores([1] * 6), scores([1] * 6))
    low, high = estimate.interval(0.05)
    # phi is 0 (no discordant pairs, no variation): both Wilson half-widths, 0.39 each way.
    assert estimate.method == "newcombe-paired" and low == pytest.approx(-0.390334, abs=1e-6) == -high
    verdict = kept().judge({"m": scores([1] * 6)}, {"m": scores([1] * 6)})
    assert verdict.outcome == "inconclusive" and verdict.lean == "pass" and verdict.n_needed > 6
    # At n_needed items with the same table, the interval decides it; one fewer, it does not.
    big = verdict.n_needed
    assert newcombe_paired((big, 0, 0, 0))[0] > -0.05 >= newcombe_paired((big - 1, 0, 0, 0))[0]


def test_the_p_value_inverts_the_interval_wilsons_is_the_score_tests():
    # A Wilson interval is the inversion of the score test with the null's variance:
    # its p-value at a bound is statsmodels' proportions_ztest with prop_var = the bound.
    estimate = value_estimate(scores([1] * 17 + [0] * 3))
    for bound in (0.6, 0.7, 0.95):
        _, expected = proportions_ztest(17, 20, value=bound, prop_var=bound)
        assert estimate.p_value(bound) == pytest.approx(expected, rel=1e-6)


def test_set_level_replicates_pair_the_same_resamples():
    rng = np.random.default_rng(0)
    base = rng.normal(0.6, 0.1, BOOTSTRAP_RESAMPLES)
    reference = MetricResult("m", 0.6, 50, higher_is_better=True, **replicated(base))
    candidate = MetricResult("m", 0.58, 50, higher_is_better=True, **replicated(base - 0.02))
    paired = difference_estimate(candidate, reference)
    assert paired.method == "bootstrap-paired" and paired.interval(0.05) == pytest.approx((-0.02, -0.02))
    other_items = MetricResult("m", 0.58, 49, higher_is_better=True, **replicated(base - 0.02))
    assert difference_estimate(other_items, reference).method == "mover-unpaired"


def test_alpha_widens_and_narrows_the_interval():
    values = [1] * 15 + [0] * 5
    estimate = value_estimate(scores(values))
    for alpha in (0.01, 0.05, 0.2):
        assert estimate.interval(alpha) == pytest.approx(proportion_confint(15, 20, alpha=alpha, method="wilson"))
    check = Check(suite="demo", name="c", metric="m", direction="at_least", rationale="r", source="t.yaml", bound=0.55)
    # 95%: [0.531, 0.888] reaches below 0.55; 80%: [0.610, 0.852] does not.
    assert check.judge({"m": scores(values)}).outcome == "inconclusive"
    assert check.judge({"m": scores(values)}, rule=DecisionRule(alpha=0.2)).outcome == "pass"


def test_holm_worked_by_hand():
    # p-values 0.01, 0.04, 0.03, 0.005 at alpha 0.05. Sorted: 0.005 (x4 = 0.02),
    # 0.01 (x3 = 0.03), 0.03 (x2 = 0.06), 0.04 (x1 = 0.04, raised to the running max 0.06).
    # Rejected: the first two; 0.03 fails its step, so 0.04 is not rejected either.
    adjusted = holm_adjusted({"a": 0.01, "b": 0.04, "c": 0.03, "d": 0.005}, 0.05)
    assert adjusted == pytest.approx({"a": 0.03, "b": 0.06, "c": 0.06, "d": 0.02})
    assert sorted(k for k, p in adjusted.items() if p <= 0.05) == ["a", "d"]
    reject, corrected, _, _ = multipletests([0.01, 0.04, 0.03, 0.005], alpha=0.05, method="holm")
    assert list(corrected) == pytest.approx([adjusted[k] for k in "abcd"])


def test_holm_leaves_a_check_undecided_that_alone_would_be_decided():
    check = Check(suite="demo", name="c", metric="m", direction="at_least", rationale="r", source="t.yaml", bound=0.5)
    result = scores([1] * 15 + [0] * 5)  # 0.75 [0.531, 0.888]: decided alone
    p = value_estimate(result).p_value(0.5)
    assert 0.01 < p < 0.05
    alone = check.judge({"m": result})
    assert alone.outcome == "pass" and alone.p_value == pytest.approx(p)
    family = holm_adjusted({"c": p, "other": 0.5}, 0.05)  # one of two checks: p is doubled
    corrected = check.judge({"m": result}, rule=DecisionRule(correction="holm"), p_adjusted=family["c"])
    assert corrected.outcome == "inconclusive" and "Holm-adjusted p" in corrected.reason


def test_an_estimate_without_an_interval_has_no_p_value():
    assert Estimate(0.5, 10, "none", None).p_value(0.4) is None


def test_the_preflight_needs_as_many_items_as_an_underpowered_verdict_would():
    # A retain model that leaks 0 of 24 forget answers: Wilson's upper end is 0.138, over the bound 0.05;
    # 0 of 73 is the first to clear it (z^2 / (n + z^2) <= 0.05), as for the verdict itself.
    check = Check(suite="demo", name="c", metric="m", direction="at_most", rationale="r", source="t.yaml", bound=0.05)
    power = check.power({"retain": {"m": scores([0] * 24)}})
    assert power["underpowered"] and power["n"] == 24 and power["n_needed"] == 73
    assert power["mde"] == pytest.approx(proportion_confint(0, 24, method="wilson")[1]) and power["margin"] == 0.05
    assert check.judge({"m": scores([0] * 24)}).n_needed == 73
    assert check.power({"retain": {"m": scores([0] * 80)}})["underpowered"] is False
    assert check.power({"retain": {"m": scores([1] * 24)}}) is None  # the reference fails it itself


def test_a_bootstrap_p_value_is_never_zero_it_is_below_one_over_the_resamples():
    # Every one of the 5,000 resampled means lies far above the bound: the
    # bootstrap cannot tell a p-value smaller than 1/B, so it reports 1/B (shown
    # as "< 1/B"), never 0.
    estimate = value_estimate(scores(np.linspace(0.8, 0.9, 40)))
    p = estimate.p_value(0.1)
    assert p == pytest.approx(1 / BOOTSTRAP_RESAMPLES)
    assert estimate.p_floor == pytest.approx(1 / BOOTSTRAP_RESAMPLES)


def test_a_relative_bound_is_the_margin_itself_not_a_rounded_difference():
    # (0.55 - 0.05) - 0.55 is -0.050000000000000044 in floating point: the
    # difference is held to -margin exactly.
    candidate, retain = scores([0.5, 0.6] * 10), scores([0.55, 0.55] * 10)
    verdict = kept(0.05).judge({"m": candidate}, {"m": retain})
    assert verdict.difference == pytest.approx(-0.05)
    assert "held to >= -0.05" in verdict.reason
    assert verdict.bound - verdict.reference_value != -0.05  # what the old arithmetic decided against
    from unlearnbench.thresholds import relative_threshold
    assert relative_threshold(kept(0.05)) == -0.05
