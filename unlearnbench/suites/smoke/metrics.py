"""The smoke suite: one teacher-forced and one generation metric per checkpoint.

It exercises the whole harness (loading, scoring, generation, thresholds,
reports) in seconds and is kept as the plugin's worked example.
"""

from __future__ import annotations

import numpy as np

from unlearnbench.metrics.core import MetricResult, References, mean_result
from unlearnbench.metrics.text import rouge
from unlearnbench.models.interface import LanguageModel
from unlearnbench.suites.smoke.data import SmokeData

QA_PROMPT = "Question: {question}\nAnswer:"
QA_MAX_NEW_TOKENS = 16
QA_STOP_STRINGS = ("\n",)


def evaluate(model: LanguageModel, data: SmokeData, refs: References | None = None) -> dict[str, MetricResult]:
    """The smoke metrics of `model` (no reference-model work: `refs` is unused)."""
    text_ids = list(data.texts)
    scores = model.score_continuations([""] * len(text_ids), [data.texts[i] for i in text_ids])
    logprob = mean_result(
        "mean_token_logprob",
        {i: float(np.mean(s.logprobs)) for i, s in zip(text_ids, scores)},
        higher_is_better=True,
        params={"aggregation": "mean over tokens, then over texts", "dtype": "float32"},
    )

    qa_ids = list(data.qa)
    prompts = [QA_PROMPT.format(question=data.qa[i][0]) for i in qa_ids]
    generations = model.generate(prompts, max_new_tokens=QA_MAX_NEW_TOKENS, stop_strings=QA_STOP_STRINGS)
    recall = mean_result(
        "qa_rougeL_recall",
        {i: rouge(data.qa[i][1], g)["rougeL_recall"] for i, g in zip(qa_ids, generations)},
        higher_is_better=True,
        params={"prompt": QA_PROMPT, "max_new_tokens": QA_MAX_NEW_TOKENS, "stop_strings": list(QA_STOP_STRINGS)},
        details={
            "items": {
                i: {"prompt": p, "reference": data.qa[i][1], "generation": g}
                for i, p, g in zip(qa_ids, prompts, generations)
            }
        },
    )
    return {logprob.name: logprob, recall.name: recall}
