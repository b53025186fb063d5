"""Knowledge QA as DUSK and MUSE ask it and score it: greedy answers to
"Question: ...\nAnswer: " prompts after in-context examples, cut at the
next question, scored by ROUGE against the gold answers."""

from __future__ import annotations

from unlearnbench.metrics.core import MetricResult, mean_result
from unlearnbench.metrics.text import rouge

QA_STOP_STRINGS = ("\n\n", "\nQuestion", "Question:")


def qa_block(examples) -> str:
    """In-context examples ({question, answer} items) as the DUSK and MUSE
    reference codes write them: "Question: ...\nAnswer: ...\n\n" each."""
    return "".join(f"Question: {q.question}\nAnswer: {q.answer}\n\n" for q in examples)


def qa_prompt(question: str) -> str:
    return f"Question: {question}\nAnswer: "


def qa_rouge_metrics(
    prefix: str, items, generations: list[str], params: dict, *, higher_is_better: bool, stemmed: bool = False
) -> dict[str, MetricResult]:
    """`{prefix}_rougeL_recall` and `{prefix}_rougeL_f1` of greedy answers
    against the gold answers (DUSK's UFK/SK/URK, MUSE's KnowMem)."""
    scores = [rouge(q.answer, g, stemmed=stemmed) for q, g in zip(items, generations)]
    details = {
        "items": {
            q.id: {"question": q.question, "answer": q.answer, "generation": g} for q, g in zip(items, generations)
        }
    }
    return {
        f"{prefix}_{key}": mean_result(
            f"{prefix}_{key}",
            {q.id: s[key] for q, s in zip(items, scores)},
            higher_is_better=higher_is_better,
            params=params,
            details=details if key == "rougeL_recall" else {},
        )
        for key in ("rougeL_recall", "rougeL_f1")
    }
