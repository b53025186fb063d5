"""TOFU's statistics as OpenUnlearning computes them (SPEC §10), over
per-item values the scoring and generation passes produce.

The suite around them (data layout, zoo set, gates) is issue 17's next step;
these are the definitions it will use, each tested against a hand-worked value
or scipy (tests/test_tofu_statistics.py).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np


def answer_probability(mean_nll: float) -> float:
    """exp(-mean token NLL): the length-normalised probability of an answer."""
    return float(np.exp(-mean_nll))


def truth_ratio(paraphrased_mean_nll: float, perturbed_mean_nlls: Sequence[float]) -> float:
    """tr = P(perturbed) / P(paraphrased). Several perturbed answers enter as
    exp(-mean of their mean NLLs), as OpenUnlearning averages the losses
    before the exponential (a geometric mean of their probabilities)."""
    wrong = np.exp(-float(np.mean(perturbed_mean_nlls)))
    return float(wrong / np.exp(-paraphrased_mean_nll))


def forget_truth_ratio(ratios: Sequence[float]) -> float:
    """The forget-set aggregate: mean(min(tr, 1/tr)); 1 when paraphrased and
    perturbed answers are equally likely (no knowledge either way)."""
    tr = np.asarray(ratios, dtype=np.float64)
    return float(np.mean(np.minimum(tr, 1 / tr)))


def retained_truth_ratio(ratios: Sequence[float]) -> float:
    """The retain-side aggregate: mean(max(0, 1 - tr)); higher = the true
    answer is preferred to the perturbed ones."""
    tr = np.asarray(ratios, dtype=np.float64)
    return float(np.mean(np.maximum(0.0, 1 - tr)))


def forget_quality(model_ratios: Sequence[float], retain_ratios: Sequence[float]) -> float:
    """The two-sample Kolmogorov-Smirnov p-value between the checkpoint's and
    the retain model's forget truth ratios (scipy's `ks_2samp`, two-sided)."""
    from scipy.stats import ks_2samp

    return float(ks_2samp(np.asarray(model_ratios, dtype=np.float64),
                          np.asarray(retain_ratios, dtype=np.float64)).pvalue)


def normalised_probability(correct_mean_nll: float, wrong_mean_nlls: Sequence[float]) -> float:
    """P(correct) / (P(correct) + sum of P(wrong)), each exp(-mean NLL): real
    authors and world facts, where the options are other valid-looking answers."""
    correct = np.exp(-correct_mean_nll)
    return float(correct / (correct + np.sum(np.exp(-np.asarray(wrong_mean_nlls, dtype=np.float64)))))


def model_utility(values: Sequence[float]) -> float:
    """The harmonic mean of {Prob, ROUGE, Truth Ratio} x {retain, real
    authors, world facts} (scipy's `hmean`); 0 if any of them is 0."""
    from scipy.stats import hmean

    array = np.asarray(values, dtype=np.float64)
    return 0.0 if np.any(array == 0) else float(hmean(array))


def exact_memorization(argmax: Sequence[int], gold: Sequence[int]) -> float:
    """The share of answer tokens whose teacher-forced argmax is the gold token."""
    return float(np.mean(np.asarray(argmax) == np.asarray(gold)))


def extraction_strength(argmax: Sequence[int], gold: Sequence[int]) -> float:
    """1 - k/n for the smallest k from which every teacher-forced argmax is
    the gold token: from there, greedy decoding reproduces the rest of the
    answer exactly. As OpenUnlearning computes it, k stops at n - 1: an answer
    whose last token is not reproduced either scores 1/n, like one whose last
    token alone is (kept, so the numbers compare)."""
    matches = np.asarray(argmax) == np.asarray(gold)
    n = len(matches)
    k = n
    while k > 0 and matches[k - 1]:
        k -= 1
    return 1 - min(k, n - 1) / n
