"""MetricResult statistics and text metrics against independent computations."""

from __future__ import annotations

import json
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
    """--seed changes the CIs, and the same seed gives the same CIs."""
    from unlearnbench.models.checkpoint import CheckpointSpec
    from unlearnbench.session import Bench, BenchOptions

    spec = CheckpointSpec("lm", str(smoke_lm_dir))
    root = Path(__file__).resolve().parents[2]
    cis = []
    for seed in (0, 0, 1):
        bench = Bench(BenchOptions(models=[spec], cache_dir=cache_dir, device="cpu", seed=seed))
        bench.prepare_suites(["smoke"], {"smoke": root / "thresholds" / "smoke.yaml"})
        cis.append(bench.run(spec, "smoke").metrics["mean_token_logprob"].ci)
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
