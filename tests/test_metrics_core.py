"""MetricResult statistics and text metrics against independent computations."""

from __future__ import annotations

import json

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
