"""DUSK (arXiv 2505.15209): selective forgetting under forget/retain overlap (docs/suites/dusk.md).

One checkpoint costs three model passes in all:
1. ONE greedy generation pass over the verbatim prompts feeds every verbatim
   metric (ROUGE-1/ROUGE-L F1 and recall, normalised Levenshtein, LCS ratio,
   embedding cosine);
2. ONE batched generation pass over all knowledge questions (UFK, SK, URK)
   behind the shared ICL prefix, whose KV cache is computed once;
3. ONE teacher-forced pass per text chunk yields all membership scores
   (LOSS, zlib, Min-K%, Min-K%++), for the forget, retain and holdout texts.
The retain model's chunk scores come from the on-disk reference cache.
"""

from __future__ import annotations

from typing import Any

from unlearnbench.errors import MissingCapability
from unlearnbench.metrics import mia
from unlearnbench.metrics.core import MetricResult, References, Unavailable, mean_result
from unlearnbench.metrics.memorization import verbatim_metrics
from unlearnbench.metrics.mia import MEMBERSHIP_METRICS, membership_metrics
from unlearnbench.metrics.qa import QA_STOP_STRINGS, qa_block, qa_prompt, qa_rouge_metrics
from unlearnbench.metrics.text import Embedder, rouge
from unlearnbench.models.interface import LanguageModel
from unlearnbench.suites.dusk.data import DuskData

QA_SETS = {"ufk": "unique_forget", "sk": "shared", "urk": "unique_retain"}


def qa_prefix(data: DuskData) -> str:
    """The ICL block, exactly as the DUSK reference code builds it."""
    return qa_block(data.icl[: data.params["icl_shots"]])


def verbatim_references(model, data: DuskData) -> list[str]:
    """The first `verbatim_reference_tokens` tokens of each ground truth."""
    limit = data.params["verbatim_reference_tokens"]
    return [model.decode(model.encode(item.gt, add_special_tokens=False)[:limit]) for item in data.verbatim]


def knowledge_metrics(data: DuskData, generations: dict[str, list[str]], params: dict) -> dict[str, MetricResult]:
    out: dict[str, Any] = {}
    for short, qa_set in QA_SETS.items():
        out |= qa_rouge_metrics(short, data.qa[qa_set], generations[qa_set], params, higher_is_better=short != "ufk")
    return out


def mia_texts(data: DuskData) -> dict[str, list[str]]:
    return {"forget": [data.forget_text], "retain": data.retain_texts, "holdout": [data.holdout]}


def membership_scores(model, data: DuskData) -> dict:
    return mia.score_texts(model, mia_texts(data), data.params["mia_chunk_tokens"], data.params["mink_k"])


def unique_forget_probe(model: LanguageModel, data: DuskData, refs: References | None = None) -> MetricResult:
    """ROUGE-L recall of greedy answers to the unique-forget questions: the
    robustness suite's `ufk` probe."""
    items = data.qa["unique_forget"]
    replies = model.generate(
        [qa_prompt(q.question) for q in items],
        prefix=qa_prefix(data),
        max_new_tokens=data.params["qa_max_new_tokens"],
        stop_strings=QA_STOP_STRINGS,
    )
    return mean_result(
        "ufk",
        {q.id: rouge(q.answer, r)["rougeL_recall"] for q, r in zip(items, replies)},
        higher_is_better=False,
        details={
            "items": {
                q.id: {"question": q.question, "answer": q.answer, "generation": r} for q, r in zip(items, replies)
            }
        },
    )


def evaluate(
    model: LanguageModel, data: DuskData, refs: References | None = None
) -> dict[str, MetricResult | Unavailable]:
    refs = refs or References()
    params = dict(data.params)
    embedder = Embedder(params["embedder"], device=str(model.device))

    references = verbatim_references(model, data)
    prompts = [item.prompt for item in data.verbatim]
    generations = model.generate(prompts, max_new_tokens=params["verbatim_max_new_tokens"])
    out = verbatim_metrics(references, generations, [v.id for v in data.verbatim], prompts, embedder, params)

    order = [(name, q) for name in QA_SETS.values() for q in data.qa[name]]
    replies = model.generate(
        [qa_prompt(q.question) for _, q in order],
        prefix=qa_prefix(data),
        max_new_tokens=params["qa_max_new_tokens"],
        stop_strings=QA_STOP_STRINGS,
    )
    by_set = {name: [r for (n, _), r in zip(order, replies) if n == name] for name in QA_SETS.values()}
    out |= knowledge_metrics(data, by_set, params)

    try:
        scores = membership_scores(model, data)
        retain = (
            None
            if refs.retain is None
            else refs.memo.get_or_compute(
                "membership-scores", {"retain": refs.retain}, params, lambda: membership_scores(refs.retain, data)
            )
        )
    except MissingCapability as exc:  # Min-K%++ needs the full next-token distribution
        return out | {name: Unavailable(name, str(exc)) for name in MEMBERSHIP_METRICS}
    return out | membership_metrics(scores, retain, params)
