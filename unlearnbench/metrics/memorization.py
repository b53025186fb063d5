"""How much of a text a model reproduces: verbatim continuation scores
(DUSK's verbatim set, MUSE's VerbMem) and, from teacher-forced argmax tokens,
exact memorization and extraction strength (TOFU and MUSE, as OpenUnlearning
computes them)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from unlearnbench.metrics.core import MetricResult, mean_result
from unlearnbench.metrics.text import Embedder, lcs_ratio, levenshtein_similarity, rouge


def verbatim_metrics(
    references: list[str],
    generations: list[str],
    ids: list[str],
    prompts: list[str],
    embedder: Embedder | None,
    params: dict,
    *,
    stemmed: bool = False,
    prefix: str = "verbatim",
) -> dict[str, MetricResult]:
    """Every verbatim metric from one set of generations: `{prefix}_rougeL_f1`
    and the rest (DUSK's verbatim set; MUSE's VerbMem with `stemmed` ROUGE,
    as OpenUnlearning scores it, and no embedding model)."""
    scores = [rouge(r, g, stemmed=stemmed) for r, g in zip(references, generations)]
    per_metric = {
        f"{prefix}_rougeL_f1": [s["rougeL_f1"] for s in scores],
        f"{prefix}_rougeL_recall": [s["rougeL_recall"] for s in scores],
        f"{prefix}_rouge1_f1": [s["rouge1_f1"] for s in scores],
        f"{prefix}_rouge1_recall": [s["rouge1_recall"] for s in scores],
        f"{prefix}_levenshtein": [levenshtein_similarity(r, g) for r, g in zip(references, generations)],
        f"{prefix}_lcs_ratio": [lcs_ratio(r, g) for r, g in zip(references, generations)],
    }
    if embedder is not None:
        per_metric[f"{prefix}_embedding_cosine"] = embedder.cosine(references, generations)
    details = {
        "items": {
            i: {"prompt_tail": p[-300:], "reference": r, "generation": g}
            for i, p, r, g in zip(ids, prompts, references, generations)
        }
    }
    out = {}
    for name, values in per_metric.items():
        out[name] = mean_result(
            name,
            dict(zip(ids, values)),
            higher_is_better=False,
            params=params,
            details=details if name == f"{prefix}_rougeL_f1" else {},
        )
    return out


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
