"""MetricResult statistics and text metrics against independent computations."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from rouge_score import rouge_scorer
from scipy import stats

from unlearnbench.metrics.core import MetricResult, bootstrap_ci, mean_result
from unlearnbench.metrics.text import rouge


def test_bootstrap_ci_agrees_with_scipy_percentile_bootstrap():
    values = np.random.default_rng(3).normal(1.0, 2.0, size=60)
    low, high = bootstrap_ci(values)
    ref = stats.bootstrap((values,), np.mean, n_resamples=20000, method="percentile", random_state=1)
    assert low == pytest.approx(ref.confidence_interval.low, abs=0.05)
    assert high == pytest.approx(ref.confidence_interval.high, abs=0.05)
    assert bootstrap_ci(values) == (low, high)  # fixed seed: reproducible


def test_bootstrap_ci_degenerate_cases():
    assert bootstrap_ci([0.3]) == (0.3, 0.3)
    assert bootstrap_ci([2.0, 2.0, 2.0]) == (2.0, 2.0)
    with pytest.raises(ValueError):
        bootstrap_ci([])


def test_mean_result_is_json_round_trippable():
    result = mean_result("m", {"a": 1.0, "b": 0.0, "c": 0.5}, higher_is_better=True, params={"k": 1})
    assert result.value == 0.5 and result.n == 3
    again = MetricResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert again == result
    with pytest.raises(ValueError, match="NaN"):
        mean_result("m", {"a": float("nan")}, higher_is_better=True)


def test_rouge_hand_computed():
    # LCS("the cat sat on the mat", "the cat on the mat") = 5 words:
    # recall 5/6, precision 5/5, F1 = 2 * (5/6) / (5/6 + 1) = 10/11.
    scores = rouge("the cat sat on the mat", "the cat on the mat")
    assert scores["rougeL_recall"] == pytest.approx(5 / 6)
    assert scores["rougeL_f1"] == pytest.approx(10 / 11)
    assert scores["rouge1_recall"] == pytest.approx(5 / 6)


def test_rouge_matches_rouge_score_directly():
    scorer = rouge_scorer.RougeScorer(["rouge1", "rougeL"], use_stemmer=False)
    ref, gen = "Paris is the capital of France", "The capital city is Paris, in France"
    direct = scorer.score(ref, gen)
    ours = rouge(ref, gen)
    assert ours["rouge1_f1"] == direct["rouge1"].fmeasure and ours["rougeL_recall"] == direct["rougeL"].recall


def test_the_bench_seed_reaches_every_bootstrap(cache_dir, smoke_lm_dir):
    """--seed changes the metrics' bootstrap CIs, and the same seed gives the same CIs (as the evaluation
    computes them: a run then restates a per-item mean's CI as its decision interval, which has no resamples)."""
    from unlearnbench.models.checkpoint import CheckpointSpec
    from unlearnbench.session import Bench, BenchOptions

    spec = CheckpointSpec("lm", str(smoke_lm_dir))
    root = Path(__file__).resolve().parents[2]
    cis = []
    for seed in (0, 0, 1):
        bench = Bench(BenchOptions(models=[spec], cache_dir=cache_dir, device="cpu", seed=seed))
        bench.prepare_suites(["smoke"], {"smoke": root / "thresholds" / "smoke.yaml"})
        cis.append(bench.results._evaluate(bench.handle(spec), "smoke").metrics["mean_token_logprob"].ci)
    assert cis[0] == cis[1] and cis[0] != cis[2]


@pytest.mark.parametrize("ci", ["", "true"])
def test_missing_test_inputs_skip_with_how_to_get_them_but_fail_under_ci(ci, monkeypatch):
    from tests.conftest import require

    monkeypatch.setenv("CI", ci)
    expected = pytest.fail.Exception if ci else pytest.skip.Exception
    with pytest.raises(expected, match="the thing is missing: install it"):
        require(False, "the thing", "install it")
    require(True, "the thing", "install it")  # present: nothing happens


def test_one_resampler_draws_every_set_of_a_paired_bootstrap_in_the_same_draw():
    """bootstrap_indices by hand: draw k is row k of every set's array, so a
    paired statistic (PL's holdout, forget and retain chunks) resamples all
    its sets together; the sets are drawn one after the other from the
    run-seeded generator, each row as one sample of its set's size."""
    from unlearnbench.metrics.core import bootstrap_indices, seeded

    with seeded(7):
        holdout, forget = bootstrap_indices([3, 5], resamples=4)
    rng = np.random.default_rng(7)
    for k in range(4):
        np.testing.assert_array_equal(holdout[k], rng.integers(0, 3, 3))
    for k in range(4):
        np.testing.assert_array_equal(forget[k], rng.integers(0, 5, 5))
    assert holdout.shape == (4, 3) and forget.shape == (4, 5)


Z = 1.959963984540054  # the standard normal's 97.5% quantile


def test_a_share_of_0_1_items_gets_the_wilson_interval_worked_out_by_hand():
    # Wilson at k = n: the lower end is n / (n + z^2) (the square root in the
    # score interval cancels), the upper end 1; at k = 0 the mirror image.
    six = mean_result("refusal", {str(i): 1.0 for i in range(6)}, higher_is_better=True)
    assert six.value == 1.0 and six.ci == pytest.approx((6 / (6 + Z**2), 1.0))  # (0.6097, 1): 6 of 6 is no proof
    assert six.interval == "wilson"
    none = mean_result("refusal", {str(i): 0.0 for i in range(6)}, higher_is_better=True)
    assert none.ci == pytest.approx((0.0, Z**2 / (6 + Z**2)))
    # 3 of 10: p = 0.3, centre (p + z^2/2n) / (1 + z^2/n), half-width
    # z sqrt(p(1-p)/n + z^2/4n^2) / (1 + z^2/n).
    n, p = 10, 0.3
    centre = (p + Z**2 / (2 * n)) / (1 + Z**2 / n)
    half = Z * np.sqrt(p * (1 - p) / n + Z**2 / (4 * n**2)) / (1 + Z**2 / n)
    three = mean_result("em", {str(i): float(i < 3) for i in range(10)}, higher_is_better=True)
    assert three.ci == pytest.approx((centre - half, centre + half))
    # Not a 0/1 score: the bootstrap, as before.
    graded = mean_result("rouge", {"a": 1.0, "b": 0.0, "c": 0.5}, higher_is_better=True)
    assert graded.interval == "bootstrap-percentile" and graded.ci == bootstrap_ci([1.0, 0.0, 0.5])


def test_six_of_six_is_underpowered_at_095_and_seventy_three_of_seventy_three_passes(tmp_path):
    # n of n clears 0.95 once its Wilson lower bound n / (n + z^2) >= 0.95: n >= 73
    # (60 of 60 reaches only 0.9398, so it cannot pass a two-sided 95% interval rule).
    # The items it would need, at 80% power: the same with z(0.975) + z(0.8) in place of z.
    from scipy.stats import norm

    from unlearnbench.rule import DecisionRule
    from unlearnbench.thresholds import load_suite_thresholds

    path = tmp_path / "demo.yaml"
    path.write_text("suite: demo\nchecks:\n  helps:\n    axis: utility\n    metric: help\n    direction: at_least\n"
                    "    bound: 0.95\n    rationale: benign questions answered\n")
    check = load_suite_thresholds(path, "demo", {"help"}, {"help": (0.0, 1.0)}, {"help": "binary"})["helps"]
    z = norm.isf(0.025) + norm.ppf(0.8)
    powered = math.ceil(0.95 * z**2 / 0.05)  # n / (n + z^2) >= 0.95
    assert powered == 150
    for n, outcome in ((6, "inconclusive"), (60, "inconclusive"), (72, "inconclusive"), (73, "pass"), (80, "pass")):
        shares = mean_result("help", {str(i): 1.0 for i in range(n)}, higher_is_better=True)
        verdict = check.judge({"help": shares})
        assert verdict.outcome == outcome, n
        if outcome == "inconclusive":  # the items Wilson's interval needs to clear the bound at a share of 1
            assert verdict.lean == "pass" and verdict.n_needed == powered, n
        assert check.judge({"help": shares}, rule=DecisionRule(point_estimate=True)).outcome == "pass"
