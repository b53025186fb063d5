"""TOFU's statistics (issue 17, docs/suites/tofu.md) against hand-worked values and scipy."""

from __future__ import annotations

import math

import numpy as np
import pytest

from unlearnbench.suites.tofu import metrics as tofu


def test_truth_ratio_by_hand():
    # Paraphrased answer: mean NLL 0.5 -> P = e^-0.5. Perturbed: mean NLLs 1.0 and 2.0 -> averaged
    # before the exponential: e^-1.5. tr = e^-1.5 / e^-0.5 = e^-1.
    assert tofu.truth_ratio(0.5, [1.0, 2.0]) == pytest.approx(math.exp(-1.0))
    # Not the arithmetic mean of the probabilities: (e^-1 + e^-2) / 2 / e^-0.5 differs.
    assert tofu.truth_ratio(0.5, [1.0, 2.0]) != pytest.approx((math.exp(-1) + math.exp(-2)) / 2 / math.exp(-0.5))


def test_the_prob_mean_truth_ratio_by_hand():
    # The same answers: P(paraphrased) = e^-0.5, P(perturbed) = e^-1.5 (losses averaged first):
    # e^-0.5 / (e^-0.5 + e^-1.5) = 1 / (1 + e^-1), the logistic function at 1.
    assert tofu.truth_ratio_prob_mean(0.5, [1.0, 2.0]) == pytest.approx(1 / (1 + math.exp(-1)))
    # No preference: 0.5; OpenUnlearning's 1e-10 in the denominator.
    assert tofu.truth_ratio_prob_mean(1.0, [1.0]) == pytest.approx(0.5)
    assert tofu.truth_ratio_prob_mean(0.0, [0.0], epsilon=1e-10) == 1 / (2 + 1e-10)


def test_truth_ratio_aggregates_on_a_made_up_distribution():
    ratios = [0.5, 2.0, 1.0, 0.25]
    # forget: min(tr, 1/tr) = 0.5, 0.5, 1, 0.25 -> mean 0.5625
    assert tofu.forget_truth_ratio(ratios) == pytest.approx(0.5625)
    # retain side: max(0, 1 - tr) = 0.5, 0, 0, 0.75 -> mean 0.3125
    assert tofu.retained_truth_ratio(ratios) == pytest.approx(0.3125)


def test_forget_quality_is_the_exact_two_sample_ks_p_value_by_hand():
    # n = m = 3, fully separated: D = 1. Of the C(6, 3) = 20 equally likely
    # splits under H0, two reach D = 1 (all of one sample below the other): p = 2/20.
    assert tofu.forget_quality([0.1, 0.2, 0.3], [0.4, 0.5, 0.6]) == pytest.approx(0.1)
    # Interleaved [a b a b a b]: the ECDFs differ by at most 1/3 at every point,
    # and every split has D >= 1/3: p = 1.
    assert tofu.forget_quality([1.0, 3.0, 5.0], [2.0, 4.0, 6.0]) == pytest.approx(1.0)
    # The p-value is the same on 1/tr (a strictly monotone map of both samples).
    rng = np.random.default_rng(0)
    model, retain = rng.lognormal(0, 1, 40), rng.lognormal(0.8, 1, 40)
    assert tofu.forget_quality(1 / model, 1 / retain) == pytest.approx(tofu.forget_quality(model, retain))


def test_normalised_probability_and_model_utility_by_hand():
    # P(correct) = e^-1, wrong: e^-2 and e^-3.
    expected = math.exp(-1) / (math.exp(-1) + math.exp(-2) + math.exp(-3))
    assert tofu.normalised_probability(1.0, [2.0, 3.0]) == pytest.approx(expected)
    # Harmonic mean of 0.5, 0.25, 1: 3 / (2 + 4 + 1) = 3/7; any zero makes it 0.
    assert tofu.model_utility([0.5, 0.25, 1.0]) == pytest.approx(3 / 7)
    assert tofu.model_utility([0.5, 0.0, 1.0]) == 0.0
    assert tofu.answer_probability(0.0) == 1.0


@pytest.mark.parametrize("argmax,gold,es,em", [
    ([1, 2, 3, 4], [1, 2, 3, 4], 1.0, 1.0),  # k = 0
    ([9, 2, 3, 4], [1, 2, 3, 4], 0.75, 0.75),  # the suffix from k = 1 is reproduced
    ([1, 2, 9, 4], [1, 2, 3, 4], 0.25, 0.75),  # only the last token: k = 3
    ([1, 2, 3, 9], [1, 2, 3, 4], 0.25, 0.75),  # not even the last: k stops at n - 1, as OpenUnlearning
])
def test_extraction_strength_and_exact_memorization_by_hand(argmax, gold, es, em):
    assert tofu.extraction_strength(argmax, gold) == pytest.approx(es)
    assert tofu.exact_memorization(argmax, gold) == pytest.approx(em)


def test_privleak_score_chooses_the_membership_statistic():
    """Min-K%++ (the default, docs/suites/tofu.md) and Min-K% (OpenUnlearning's choice,
    privleak_score=mink) rank these answers oppositely, worked by hand.

    Forget answer F: log-probs (-1, -1), vocab mean -3, sd 1: Min-K% (k = 0.5:
    the lowest 1 of 2) = -1, Min-K%++ = (-1 + 3) / 1 = 2.
    Holdout answer H: log-probs (-0.5, -0.5), vocab mean -0.2, sd 1: Min-K%
    = -0.5, Min-K%++ = -0.3. Min-K%++ puts F above H (AUC 1), Min-K% below (AUC 0)."""
    from types import SimpleNamespace

    from unlearnbench.models.interface import TokenScores
    from unlearnbench.suites.tofu.data import TofuItem

    def scores(logprob: float, mean: float) -> TokenScores:
        return TokenScores(np.array([1, 2]), np.full(2, logprob), np.full(2, mean), np.ones(2))

    sets = {"forget": [TofuItem("f", "q", "a", None, (), "f")], "holdout": [TofuItem("h", "q", "a", None, (), "h")]}
    scored = {("forget", 0, "answer", 0): scores(-1.0, -3.0), ("holdout", 0, "answer", 0): scores(-0.5, -0.2)}
    for score, expected in (("minkpp", 1.0), ("mink", 0.0)):
        data = SimpleNamespace(sets=sets, params={"mink_k": 0.5, "privleak_score": score, "convention": "spec"})
        assert tofu.membership_auc(scored, data) == expected, score


def test_ks_distance_replicates_are_scipys_ks_statistic_on_each_paired_resample_reflected():
    from scipy.stats import ks_2samp

    from unlearnbench.metrics.core import bootstrap_indices, seeded

    rng = np.random.default_rng(2)
    own, retain = rng.uniform(0, 1, 30), rng.uniform(0.1, 1.1, 30)
    with seeded(3):
        replicates = tofu.ks_distance_replicates(own.tolist(), retain.tolist())
        [rows] = bootstrap_indices([30])  # the same draws: the run's seed
    distance = ks_2samp(own, retain).statistic
    for k in (0, 1, 17, 4999):
        expected = ks_2samp(own[rows[k]], retain[rows[k]]).statistic
        assert replicates[k] == pytest.approx(2 * distance - expected, abs=1e-12)
    assert len(replicates) == rows.shape[0]


def test_model_utility_replicates_resample_each_sets_items_and_take_the_harmonic_mean_of_nine_means():
    from scipy.stats import hmean

    from unlearnbench.metrics.core import bootstrap_indices, seeded

    rng = np.random.default_rng(4)
    sizes = (12, 7, 9)
    parts = [[{f"s{s}-{i}": float(v) for i, v in enumerate(rng.uniform(0.05, 1, n))} for _ in range(3)]
             for s, n in enumerate(sizes)]
    with seeded(1):
        replicates = tofu.model_utility_replicates(parts)
        rows = bootstrap_indices(list(sizes))
    for k in (0, 5, 4999):
        means = [np.mean([list(metric.values())[i] for i in rows[s][k]]) for s, metrics in enumerate(parts)
                 for metric in metrics]
        assert replicates[k] == pytest.approx(hmean(means), rel=1e-12)
    # Any mean of 0 makes the harmonic mean 0, as model_utility does.
    parts[1][0] = {k: 0.0 for k in parts[1][0]}
    with seeded(1):
        assert set(tofu.model_utility_replicates(parts)) == {0.0}
