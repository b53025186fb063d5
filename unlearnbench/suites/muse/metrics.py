"""MUSE's criteria a single checkpoint answers, as OpenUnlearning computes
them (docs/suites/muse.md), sharing DUSK's code where the definitions coincide.

One checkpoint costs five passes:
1. ONE greedy pass over the VerbMem openings feeds every VerbMem metric
   (DUSK's verbatim metrics with stemmed ROUGE: ROUGE-L F1 is MUSE's VerbMem);
2. ONE teacher-forced pass over opening + continuation feeds extraction
   strength and exact memorization (TOFU's definitions);
3. ONE greedy pass per KnowMem set (forget, retain: each behind its own ICL
   block, whose KV cache is computed once);
4. ONE teacher-forced pass over the PrivLeak texts feeds every membership
   score; PrivLeak is DUSK's PL (`mia.membership_metrics`), on one sample
   per text. The retain model's scores come from the reference memo.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from unlearnbench.data.openunlearning import floor_count
from unlearnbench.errors import MissingCapability
from unlearnbench.metrics import mia, openunlearning
from unlearnbench.metrics.core import MetricResult, References, Unavailable, mean_result
from unlearnbench.metrics.memorization import exact_memorization, extraction_strength, verbatim_metrics
from unlearnbench.metrics.qa import QA_STOP_STRINGS, qa_block, qa_prompt, qa_rouge_metrics
from unlearnbench.models.interface import LanguageModel
from unlearnbench.suites.muse.data import MuseData

# DUSK's membership metric names -> MUSE's (OpenUnlearning's `privleak`).
MEMBERSHIP_NAMES = {
    "mia_auc_holdout_forget": "mia_auc_holdout_forget",
    "privacy_leakage": "privleak",
    "privacy_leakage_magnitude": "privleak_magnitude",
    "retain_deviation": "retain_deviation",
}
KNOWMEM_SETS = {"knowmem_forget": "forget_qa", "knowmem_retain": "retain_qa"}


def is_reference(data: MuseData) -> bool:
    return data.params["convention"] == "reference"


def membership_scores(model, data: MuseData) -> dict:
    """Every membership score of every PrivLeak text, each text one sample cut
    at `privleak_max_tokens`; the vocabulary statistics only for Min-K%++ (so
    an endpoint gives OpenUnlearning's Min-K% privleak). Under the reference
    convention, OpenUnlearning's samples: BOS + text cut at BOS + the
    maximum, every label but the last."""
    params = data.params
    vocab_stats, floor = params["privleak_score"] == "minkpp", floor_count(params)
    if not is_reference(data):
        return mia.score_texts(
            model,
            data.privleak,
            params["privleak_max_tokens"],
            params["mink_k"],
            truncate=True,
            vocab_stats=vocab_stats,
            floor=floor,
        )
    samples = [
        (name, openunlearning.encode_completion(model, "", text, params["privleak_max_tokens"], insert_space=False))
        for name, texts in data.privleak.items()
        for text in texts
    ]
    scored = openunlearning.score(model, [e for _, e in samples], vocab_stats=vocab_stats)
    out: dict[str, Any] = {name: {s: [] for s in mia.SCORES if vocab_stats or s != "minkpp"} for name in data.privleak}
    for (name, encoded), scores in zip(samples, scored):
        scores = openunlearning.labels_but_last(scores)
        for score, value in mia.chunk_scores(
            scores.logprobs,
            scores.vocab_mean,
            scores.vocab_var,
            model.decode(encoded.ids),
            params["mink_k"],
            floor=floor,
            variance_floor=True,
        ).items():
            out[name][score].append(value)
    return out


def memorization_metrics(model, data: MuseData, params: dict) -> dict:
    """Extraction strength and exact memorization of the VerbMem continuations,
    from one teacher-forced pass: the continuation after its opening
    (`encode_pair`), or under the reference convention OpenUnlearning's
    `opening + " " + continuation` and every label but the last."""
    if is_reference(data):
        encoded = [
            openunlearning.encode_completion(
                model, v.prompt, v.gt, openunlearning.MAX_COMPLETION_TOKENS, insert_space=True
            )
            for v in data.verbmem
        ]
        scored = [openunlearning.labels_but_last(s) for s in openunlearning.score(model, encoded)]
    else:
        scored = model.score_continuations([v.prompt for v in data.verbmem], [v.gt for v in data.verbmem])
    if scored[0].argmax is None:
        reason = f"{model.name}: the backend gives no teacher-forced argmax"
        return {name: Unavailable(name, reason) for name in ("extraction_strength", "exact_memorization")}
    return {
        name: mean_result(
            name,
            {v.id: function(s.argmax, s.token_ids) for v, s in zip(data.verbmem, scored)},
            higher_is_better=False,
            params=params,
            ideal="retain",
        )
        for name, function in (("extraction_strength", extraction_strength), ("exact_memorization", exact_memorization))
    }


def verbmem_replies(model, data: MuseData) -> tuple[list[str], list[str]]:
    """(continuations of each VerbMem opening, what they are compared with):
    the given continuation, or under the reference convention
    OpenUnlearning's decoded label text and cleaned-up replies."""
    prompts, max_new_tokens = [v.prompt for v in data.verbmem], data.params["verbmem_max_new_tokens"]
    if not is_reference(data):
        return model.generate(prompts, max_new_tokens=max_new_tokens), [v.gt for v in data.verbmem]
    encoded = [
        openunlearning.encode_completion(model, v.prompt, v.gt, openunlearning.MAX_COMPLETION_TOKENS, insert_space=True)
        for v in data.verbmem
    ]
    return (
        openunlearning.generate(model, prompts, max_new_tokens=max_new_tokens),
        [openunlearning.reference_text(model, e, whole=False) for e in encoded],
    )


def knowmem_replies(model, data: MuseData, split: str) -> tuple[list, list[str]]:
    """(items, replies) of one KnowMem set behind its ICL examples: DUSK's
    plain QA block, or under the reference convention OpenUnlearning's
    templated few-shot conversation, the items' answers being its decoded
    label text."""
    items, icl = data.knowmem[split], data.icl(split)
    max_new_tokens = data.params["knowmem_max_new_tokens"]
    if not is_reference(data):
        return items, model.generate(
            [qa_prompt(q.question) for q in items],
            prefix=qa_block(icl),
            max_new_tokens=max_new_tokens,
            stop_strings=QA_STOP_STRINGS,
        )
    template = openunlearning.template_for(model, data.params["reference_system_prompt"])
    turns = [([e.question for e in icl] + [q.question], [e.answer for e in icl] + [q.answer]) for q in items]
    encoded = [openunlearning.encode_qa(model, template, questions, answers) for questions, answers in turns]
    replies = openunlearning.generate(
        model,
        [openunlearning.qa_prompt(model, template, *turn) for turn in turns],
        max_new_tokens=max_new_tokens,
        stop_strings=QA_STOP_STRINGS,
    )
    return [
        replace(q, answer=openunlearning.reference_text(model, e, whole=True)) for q, e in zip(items, encoded)
    ], replies


def evaluate(
    model: LanguageModel, data: MuseData, refs: References | None = None
) -> dict[str, MetricResult | Unavailable]:
    refs = refs or References()
    params = dict(data.params)
    if is_reference(data):
        params["reference_template"] = openunlearning.template_for(model, params["reference_system_prompt"]).family
    prompts = [v.prompt for v in data.verbmem]
    generations, references = verbmem_replies(model, data)
    out: dict[str, Any] = verbatim_metrics(
        references, generations, [v.id for v in data.verbmem], prompts, None, params, stemmed=True, prefix="verbmem"
    )
    out |= memorization_metrics(model, data, params)
    for short, split in KNOWMEM_SETS.items():
        items, replies = knowmem_replies(model, data, split)
        out |= qa_rouge_metrics(short, items, replies, params, higher_is_better=split == "retain_qa", stemmed=True)
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
        return out | {name: Unavailable(name, str(exc)) for name in MEMBERSHIP_NAMES.values()}
    for name, result in mia.membership_metrics(scores, retain, params, params["privleak_score"]).items():
        out[MEMBERSHIP_NAMES[name]] = replace(result, name=MEMBERSHIP_NAMES[name])
    return out
