"""Text similarity between a generation and its reference (SPEC §1)."""

from __future__ import annotations

import re
from functools import lru_cache


@lru_cache(maxsize=1)
def _rouge_scorer():
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rouge1", "rougeL"], use_stemmer=False)


def rouge(reference: str, generation: str) -> dict[str, float]:
    """ROUGE-1 / ROUGE-L F1 and recall, `rouge_score` with no stemming."""
    scores = _rouge_scorer().score(reference, generation)
    return {
        "rouge1_f1": scores["rouge1"].fmeasure,
        "rouge1_recall": scores["rouge1"].recall,
        "rougeL_f1": scores["rougeL"].fmeasure,
        "rougeL_recall": scores["rougeL"].recall,
    }


def normalize_answer(text: str) -> str:
    """Lower case, punctuation to spaces, whitespace collapsed."""
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


def contains_answer(reply: str, gold: str) -> bool:
    """True when the normalised gold answer appears in the normalised reply
    as whole words ("1965" is not found in "19650")."""
    needle = normalize_answer(gold)
    return bool(needle) and f" {needle} " in f" {normalize_answer(reply)} "
