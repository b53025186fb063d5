"""The decision quantity and its intervals (unlearnbench/evidence.py) against
scipy, statsmodels and hand-worked values, never against our own functions."""

from __future__ import annotations

import numpy as np
import pytest
import statsmodels.api as sm
from scipy import stats
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import confint_proportions_2indep, proportion_confint, proportions_ztest

from unlearnbench.evidence import (
    Estimate,
    cluster_robust_se,
    difference_estimate,
    holm_adjusted,
    powered_alpha,
    value_estimate,
)
from unlearnbench.rule import DecisionRule
from unlearnbench.metrics.core import BOOTSTRAP_RESAMPLES, MetricResult, mean_result, replicated, seeded
from unlearnbench.thresholds import Check


def scores(values, name="m", clusters=None):
    result = mean_result(name, {f"q{i}": float(v) for i, v in enumerate(values)}, higher_is_better=True)
    if clusters is not None:
        result.clusters = {f"q{i}": str(c) for i, c in enumerate(clusters)}
    return result


def kept(margin=0.05, kind="bounded"):
    return Check(suite="demo", name="kept", metric="m", direction="at_least", rationale="r", source="t.yaml",
                 relative_to="retain", margin=margin, kind=kind, scale=(0.0, 1.0))


def at_least(bound, kind="binary"):
    return Check(suite="demo", name="c", metric="m", direction="at_least", rationale="r", source="t.yaml",
                 bound=bound, kind=kind, scale=(0.0, 1.0))


def test_cluster_robust_standard_error_is_statsmodels_cr1_of_an_intercept_only_regression():
    rng = np.random.default_rng(3)
    clusters = np.repeat(np.arange(7), [3, 5, 4, 6, 2, 5, 3])
    values = rng.normal(0, 1, 7)[clusters] + rng.normal(0, 1, clusters.size)
    se, groups, deff = cluster_robust_se(values, clusters)
    fit = sm.OLS(values, np.ones((values.size, 1))).fit(cov_type="cluster", cov_kwds={"groups": clusters})
    assert groups == 7 and se == pytest.approx(float(fit.bse[0]), rel=1e-10)
    # Every item its own cluster: CR1 is the usual s / sqrt(n), the design effect 1.
    se1, groups1, deff1 = cluster_robust_se(values, np.arange(values.size))
    assert se1 == pytest.approx(stats.sem(values), rel=1e-10) and groups1 == values.size and deff1 == pytest.approx(1)


def test_an_unbounded_mean_gets_the_t_interval_with_t_of_clusters_minus_one():
    rng = np.random.default_rng(4)
    values = rng.normal(1.0, 2.0, 30)
    estimate = value_estimate(scores(values), "unbounded")
    expected = stats.ttest_1samp(values, 0).confidence_interval(0.95)
    assert estimate.method == "t-clustered" and estimate.interval(0.05) == pytest.approx(tuple(expected), rel=1e-10)
    clusters = np.arange(30) // 5  # 6 persons of 5 questions
    clustered = value_estimate(scores(values, clusters=clusters), "unbounded")
    fit = sm.OLS(values, np.ones((30, 1))).fit(cov_type="cluster", cov_kwds={"groups": clusters})
    half = stats.t.isf(0.025, 5) * float(fit.bse[0])
    assert clustered.clusters == 6
    assert clustered.interval(0.05) == pytest.approx((values.mean() - half, values.mean() + half), rel=1e-10)


def test_a_bounded_mean_worked_by_hand_quasibinomial_wilson():
    # Six items all 0 on [0, 1]: every item at an end of the scale, so six 0/1
    # items: Wilson's 0-of-6 upper end z^2 / (6 + z^2).
    z, t5 = stats.norm.isf(0.025), stats.t.isf(0.025, 5)
    estimate = value_estimate(scores([0.0] * 6), "bounded", (0.0, 1.0))
    low, high = estimate.interval(0.05)
    assert estimate.method == "wilson-quasibinomial" and estimate.value == 0
    assert low == pytest.approx(0, abs=1e-12) and high == pytest.approx(z**2 / (6 + z**2), rel=1e-9)
    assert estimate.interval(0.05) == pytest.approx(proportion_confint(0, 6, method="wilson"), abs=1e-12)
    # Spread values on a scale of [0, 2]: on the unit scale m = 0.35, sum of squared residuals 0.17, and one
    # pseudo-item at each end adds m^2 + (1 - m)^2 = 0.545: n_eff = m (1 - m) n^2 / 0.715 = 3.64 / 0.715 = 5.0909.
    values = [0.2, 0.4, 1.2, 1.0]
    unit = np.asarray(values) / 2
    m = unit.mean()
    n_eff = m * (1 - m) * 16 / (((unit - m) ** 2).sum() + m**2 + (1 - m) ** 2)
    assert n_eff == pytest.approx(5.090909, rel=1e-6)
    expected = proportion_confint(0.35 * n_eff * (z / stats.t.isf(0.025, 3)) ** 2,
                                  n_eff * (z / stats.t.isf(0.025, 3)) ** 2, method="wilson")
    got = value_estimate(scores(values), "bounded", (0.0, 2.0))
    assert got.interval(0.05) == pytest.approx(tuple(2 * x for x in expected), rel=1e-9)
    assert got.n_effective == pytest.approx(n_eff)


def test_a_binary_share_gets_wilson_and_shared_clusters_shrink_its_effective_n():
    values = [1] * 15 + [0] * 5
    plain = value_estimate(scores(values), "binary")
    assert plain.method == "wilson" and plain.interval(0.05) == pytest.approx(proportion_confint(15, 20, method="wilson"))
    # Four persons of five questions, answered all-or-nothing but one: the items are worth fewer.
    clusters = np.arange(20) // 5
    values = [1] * 5 + [1] * 5 + [1] * 4 + [0] + [0] * 5
    clustered = value_estimate(scores(values, clusters=clusters), "binary")
    share, n = 14 / 20, 20
    residuals = np.asarray(values) - share
    deff = sum(residuals[clusters == g].sum() ** 2 for g in range(4)) / (residuals**2).sum()
    effective = n / deff * (stats.norm.isf(0.025) / stats.t.isf(0.025, 3)) ** 2
    assert clustered.method == "wilson-clustered" and clustered.clusters == 4
    assert clustered.n_effective == pytest.approx(n / deff)
    expected = proportion_confint(share * effective, effective, method="wilson")
    assert clustered.interval(0.05) == pytest.approx(expected, rel=1e-9)
    assert clustered.interval(0.05)[0] < plain.interval(0.05)[0]


def test_the_interval_follows_the_declared_kind_not_the_values():
    # A bounded metric whose items happen to be all 0 or 1 keeps the bounded interval.
    values = scores([1] * 15 + [0] * 5)
    assert value_estimate(values, "bounded", (0.0, 1.0)).method == "wilson-quasibinomial"
    assert value_estimate(values, "binary").method == "wilson"
    with pytest.raises(ValueError, match="declared binary"):
        value_estimate(scores([0.5, 1.0]), "binary")


def test_the_npo_cases_are_decided_coherently_all_perfect_no_less_favourably_than_one_item_worse():
    # Six benign queries: the retain model answers all. One candidate answers all six,
    # the other five: the perfect one's difference interval is never below the other's.
    retain = scores([1] * 6)
    for kind in ("binary", "bounded"):
        perfect = difference_estimate(scores([1] * 6), retain, kind, (0.0, 1.0)).interval(0.05)
        worse = difference_estimate(scores([1] * 5 + [0]), retain, kind, (0.0, 1.0)).interval(0.05)
        assert perfect[0] >= worse[0] and perfect[1] >= worse[1], kind
        order = {"pass": 2, "inconclusive": 1, "fail": 0}
        good = kept(kind=kind).judge({"m": scores([1] * 6)}, {"m": retain}).outcome
        bad = kept(kind=kind).judge({"m": scores([1] * 5 + [0])}, {"m": retain}).outcome
        assert order[good] >= order[bad], kind


def test_a_constant_shift_on_every_item_is_decided_paired_and_not_unpaired():
    # The candidate scores 0.02 below the retain model on every one of 128 items
    # whose scores spread over [0.1, 0.9]: paired, the difference is -0.02 with
    # no spread but the pseudo-items'; unpaired, each mean's own spread swamps it.
    reference = np.linspace(0.1, 0.9, 128)
    candidate, retain = scores(reference - 0.02), scores(reference)
    paired = difference_estimate(candidate, retain, "bounded", (0.0, 1.0))
    low, high = paired.interval(0.05)
    assert paired.method == "t-clustered-paired-bounded" and -0.05 < low < -0.02 < high
    renamed = mean_result("m", {f"other{i}": v for i, v in enumerate(reference - 0.02)}, higher_is_better=True)
    unpaired = difference_estimate(renamed, retain, "bounded", (0.0, 1.0))  # not the same items: no pairing
    low, high = unpaired.interval(0.05)
    assert unpaired.method == "mover-unpaired" and low < -0.05 < 0 < high
    verdict = kept().judge({"m": candidate}, {"m": retain})
    assert verdict.outcome == "pass" and verdict.decided_by == "interval"
    assert verdict.difference == pytest.approx(-0.02) and verdict.interval == "t-clustered-paired-bounded"
    assert kept().judge({"m": renamed}, {"m": retain}).outcome == "inconclusive"


def test_a_paired_difference_of_all_correct_items_is_not_a_zero_width_interval():
    # Candidate and retain both answer all 6: the difference is 0, but 6 items
    # cannot show that the candidate keeps 95% of what the retain model knows.
    # By hand: differences 0 x 6 with pseudo-items -1 and +1: mean 0, sum of
    # squared residuals 2, CR1 over 8 singletons 8/7 x 2 / 64 = 1/28;
    # t(0.975, 5) = 2.570582: +-2.570582 / sqrt(28) = +-0.485794.
    estimate = difference_estimate(scores([1] * 6), scores([1] * 6), "binary")
    low, high = estimate.interval(0.05)
    assert estimate.method == "t-clustered-paired-bounded" and low == pytest.approx(-0.485794, abs=1e-6) == -high
    verdict = kept(kind="binary").judge({"m": scores([1] * 6)}, {"m": scores([1] * 6)})
    assert verdict.outcome == "inconclusive" and verdict.lean == "pass" and verdict.n_needed > 6
    big = scores([1] * verdict.n_needed)
    assert kept(kind="binary").judge({"m": big}, {"m": big}).outcome == "pass"


def test_the_p_value_inverts_the_interval_wilsons_is_the_score_tests():
    # A Wilson interval is the inversion of the score test with the null's variance:
    # its p-value at a bound is statsmodels' proportions_ztest with prop_var = the bound.
    estimate = value_estimate(scores([1] * 17 + [0] * 3), "binary")
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
    estimate = value_estimate(scores(values), "binary")
    for alpha in (0.01, 0.05, 0.2):
        assert estimate.interval(alpha) == pytest.approx(proportion_confint(15, 20, alpha=alpha, method="wilson"))
    check = at_least(0.55)
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


def test_holm_leaves_a_fail_undecided_that_alone_would_be_decided_and_never_touches_a_pass():
    fails_alone = at_least(0.9)
    result = scores([1] * 15 + [0] * 5)  # 0.75 [0.531, 0.888]: decided below 0.9 alone
    p = value_estimate(result, "binary").p_value(0.9)
    assert 0.01 < p < 0.05
    alone = fails_alone.judge({"m": result})
    assert alone.outcome == "fail" and alone.p_value == pytest.approx(p)
    family = holm_adjusted({"c": p, "other": 0.5}, 0.05)  # one of two checks: p is doubled
    corrected = fails_alone.judge({"m": result}, rule=DecisionRule(correction="holm"), p_adjusted=family["c"])
    assert corrected.outcome == "inconclusive" and "Holm-adjusted p" in corrected.reason
    # A pass is an intersection-union test: no correction (the checkpoint passes only if all checks do).
    passes = at_least(0.5).judge({"m": result}, rule=DecisionRule(correction="holm"), p_adjusted=0.9)
    assert passes.outcome == "pass"


def test_an_estimate_without_an_interval_has_no_p_value():
    assert Estimate(0.5, 10, "none", None).p_value(0.4) is None


def test_the_preflight_needs_as_many_items_as_an_underpowered_verdict_would():
    # A retain model that leaks 0 of 24 forget answers. At 80% power the
    # interval to clear is Wilson's at the level whose critical value is
    # z(0.975) + z(0.8) = 2.801585: its upper end for 0 of n is z^2 / (n + z^2),
    # under the bound 0.05 from n = 150 (19 z^2 = 149.13), as for the verdict itself.
    z = stats.norm.isf(0.025) + stats.norm.ppf(0.8)
    level = powered_alpha(0.05, 0.8)
    assert level == pytest.approx(2 * stats.norm.sf(z)) and z == pytest.approx(2.801585, abs=1e-6)
    check = Check(suite="demo", name="c", metric="m", direction="at_most", rationale="r", source="t.yaml", bound=0.05,
                  kind="binary", scale=(0.0, 1.0))
    power = check.power({"retain": {"m": scores([0] * 24)}})
    assert power["underpowered"] and power["n"] == 24 and power["n_needed"] == 150 and power["power"] == 0.8
    assert power["mde"] == pytest.approx(proportion_confint(0, 24, alpha=level, method="wilson")[1])
    assert power["margin"] == 0.05
    assert check.judge({"m": scores([0] * 24)}).n_needed == 150
    assert check.power({"retain": {"m": scores([0] * 160)}})["underpowered"] is False
    assert check.power({"retain": {"m": scores([1] * 24)}}) is None  # the reference fails it itself


def test_a_bootstrap_p_value_is_never_zero_it_is_below_one_over_the_resamples():
    # Every one of the 5,000 replicates lies far above the bound: the
    # bootstrap cannot tell a p-value smaller than 1/B, so it reports 1/B,
    # never 0.
    reps = np.random.default_rng(0).normal(0.85, 0.01, BOOTSTRAP_RESAMPLES)
    estimate = value_estimate(MetricResult("m", 0.85, 40, higher_is_better=True, **replicated(reps)), "set")
    assert estimate.p_value(0.1) == pytest.approx(1 / BOOTSTRAP_RESAMPLES)
    assert estimate.p_floor == pytest.approx(1 / BOOTSTRAP_RESAMPLES)


def test_a_relative_bound_is_the_margin_itself_not_a_rounded_difference():
    # (0.55 - 0.05) - 0.55 is -0.050000000000000044 in floating point: the
    # difference is held to -margin exactly.
    assert (0.55 - 0.05) - 0.55 != -0.05
    from unlearnbench.thresholds import relative_threshold
    assert relative_threshold(kept(0.05)) == -0.05
    verdict = kept(0.05).judge({"m": scores([0.5, 0.6] * 64)}, {"m": scores([0.55, 0.55] * 64)})
    assert "held to >= -0.05" in verdict.reason
