"""MUSE's criteria a single checkpoint answers, as OpenUnlearning computes
them (SPEC §10), sharing DUSK's code where the definitions coincide.

One checkpoint costs five passes:
1. ONE greedy pass over the VerbMem openings feeds every VerbMem metric
   (DUSK's verbatim metrics with stemmed ROUGE: ROUGE-L F1 is MUSE's VerbMem);
2. ONE teacher-forced pass over opening + continuation feeds extraction
   strength and exact memorization (TOFU's definitions);
3. ONE greedy pass per KnowMem set (forget, retain: each behind its own ICL
   block, whose KV cache is computed once);
4. ONE teacher-forced pass over the PrivLeak texts feeds every membership
   score; PrivLeak is DUSK's PL (`dusk.membership_metrics`), on one sample
   per text. The retain model's scores come from the reference memo.
"""

from __future__ import annotations

from dataclasses import replace

from unlearnbench.data.muse import MuseData
from unlearnbench.data.openunlearning import floor_count
from unlearnbench.errors import MissingCapability
from unlearnbench.metrics import dusk, mia
from unlearnbench.metrics.core import References, Unavailable, mean_result
from unlearnbench.metrics.tofu import exact_memorization, extraction_strength

# DUSK's membership metric names -> MUSE's (OpenUnlearning's `privleak`).
MEMBERSHIP_NAMES = {"mia_auc_holdout_forget": "mia_auc_holdout_forget", "privacy_leakage": "privleak",
                    "privacy_leakage_magnitude": "privleak_magnitude", "retain_deviation": "retain_deviation"}
VERBMEM_METRICS = tuple(f"verbmem_{m}" for m in ("rougeL_f1", "rougeL_recall", "rouge1_f1", "rouge1_recall",
                                                 "levenshtein", "lcs_ratio"))
KNOWMEM_SETS = {"knowmem_forget": "forget_qa", "knowmem_retain": "retain_qa"}
METRICS = (*VERBMEM_METRICS, "extraction_strength", "exact_memorization",
           *(f"{short}_{key}" for short in KNOWMEM_SETS for key in ("rougeL_recall", "rougeL_f1")),
           *MEMBERSHIP_NAMES.values())


def membership_scores(handle, data: MuseData) -> dict:
    """Every membership score of every PrivLeak text, each text one sample cut
    at `privleak_max_tokens`; the vocabulary statistics only for Min-K%++ (so
    an endpoint gives OpenUnlearning's Min-K% privleak)."""
    return mia.score_texts(handle, data.privleak, data.params["privleak_max_tokens"], data.params["mink_k"],
                           truncate=True, vocab_stats=data.params["privleak_score"] == "minkpp",
                           floor=floor_count(data.params))


def memorization_metrics(handle, data: MuseData, params: dict) -> dict:
    """Extraction strength and exact memorization of the VerbMem continuations, from one teacher-forced pass."""
    scored = handle.score_continuations([v.prompt for v in data.verbmem], [v.gt for v in data.verbmem])
    if scored[0].argmax is None:
        reason = f"{handle.name}: the backend gives no teacher-forced argmax"
        return {name: Unavailable(name, reason) for name in ("extraction_strength", "exact_memorization")}
    return {name: mean_result(name, {v.id: function(s.argmax, s.token_ids) for v, s in zip(data.verbmem, scored)},
                              higher_is_better=False, params=params, ideal="retain")
            for name, function in (("extraction_strength", extraction_strength),
                                   ("exact_memorization", exact_memorization))}


def evaluate(handle, data: MuseData, refs: References | None = None) -> dict:
    refs = refs or References()
    params = dict(data.params)
    prompts = [v.prompt for v in data.verbmem]
    generations = handle.generate(prompts, max_new_tokens=params["verbmem_max_new_tokens"])
    out = dusk.verbatim_metrics([v.gt for v in data.verbmem], generations, [v.id for v in data.verbmem], prompts,
                                None, params, stemmed=True, prefix="verbmem")
    out |= memorization_metrics(handle, data, params)
    for short, split in KNOWMEM_SETS.items():
        items = data.knowmem[split]
        replies = handle.generate([dusk.qa_prompt(q.question) for q in items], prefix=dusk.qa_block(data.icl(split)),
                                  max_new_tokens=params["knowmem_max_new_tokens"], stop_strings=dusk.QA_STOP_STRINGS)
        out |= dusk.qa_rouge_metrics(short, items, replies, params, higher_is_better=split == "retain_qa",
                                     stemmed=True)
    try:
        scores = membership_scores(handle, data)
        retain = None if refs.retain is None else refs.memo.get_or_compute(
            "membership-scores", {"retain": refs.retain}, params, lambda: membership_scores(refs.retain, data))
    except MissingCapability as exc:  # Min-K%++ needs the full next-token distribution
        return out | {name: Unavailable(name, str(exc)) for name in MEMBERSHIP_NAMES.values()}
    for name, result in dusk.membership_metrics(scores, retain, params, params["privleak_score"]).items():
        out[MEMBERSHIP_NAMES[name]] = replace(result, name=MEMBERSHIP_NAMES[name])
    return out
