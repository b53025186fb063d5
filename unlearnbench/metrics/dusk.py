"""DUSK (arXiv 2505.15209): selective forgetting under forget/retain overlap (SPEC §2).

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

import numpy as np

from unlearnbench.data.dusk import DuskData
from unlearnbench.errors import MissingCapability
from unlearnbench.metrics import mia
from unlearnbench.metrics.openunlearning import EPSILON
from unlearnbench.metrics.core import (
    MetricResult,
    References,
    Unavailable,
    bootstrap_indices,
    mean_result,
    percentile_ci,
)
from unlearnbench.metrics.text import Embedder, lcs_ratio, levenshtein_similarity, rouge

QA_STOP_STRINGS = ("\n\n", "\nQuestion", "Question:")
MEMBERSHIP_METRICS = ("mia_auc_holdout_forget", "privacy_leakage", "privacy_leakage_magnitude", "retain_deviation")
QA_SETS = {"ufk": "unique_forget", "sk": "shared", "urk": "unique_retain"}
PL_SIGN = ("PL = (H_m - H_r) / H_r x 100, H = AUC(holdout, forget) under the model (m) and the retain "
           "model (r); PL > 0: over-unlearning (forget text looks less seen than never-seen text), "
           "PL < 0: under-unlearning; ideal 0")


def qa_block(examples) -> str:
    """In-context examples ({question, answer} items) as the DUSK and MUSE
    reference codes write them: "Question: ...\nAnswer: ...\n\n" each."""
    return "".join(f"Question: {q.question}\nAnswer: {q.answer}\n\n" for q in examples)


def qa_prefix(data: DuskData) -> str:
    """The ICL block, exactly as the DUSK reference code builds it."""
    return qa_block(data.icl[: data.params["icl_shots"]])


def qa_prompt(question: str) -> str:
    return f"Question: {question}\nAnswer: "


def verbatim_references(model, data: DuskData) -> list[str]:
    """The first `verbatim_reference_tokens` tokens of each ground truth."""
    limit = data.params["verbatim_reference_tokens"]
    return [model.decode(model.encode(item.gt, add_special_tokens=False)[:limit]) for item in data.verbatim]


def verbatim_metrics(references: list[str], generations: list[str], ids: list[str], prompts: list[str],
                     embedder: Embedder | None, params: dict, *, stemmed: bool = False,
                     prefix: str = "verbatim") -> dict[str, MetricResult]:
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
    details = {"items": {i: {"prompt_tail": p[-300:], "reference": r, "generation": g}
                         for i, p, r, g in zip(ids, prompts, references, generations)}}
    out = {}
    for name, values in per_metric.items():
        out[name] = mean_result(name, dict(zip(ids, values)), higher_is_better=False, params=params,
                                details=details if name == f"{prefix}_rougeL_f1" else {})
    return out


def qa_rouge_metrics(prefix: str, items, generations: list[str], params: dict, *, higher_is_better: bool,
                     stemmed: bool = False) -> dict[str, MetricResult]:
    """`{prefix}_rougeL_recall` and `{prefix}_rougeL_f1` of greedy answers
    against the gold answers (DUSK's UFK/SK/URK, MUSE's KnowMem)."""
    scores = [rouge(q.answer, g, stemmed=stemmed) for q, g in zip(items, generations)]
    details = {"items": {q.id: {"question": q.question, "answer": q.answer, "generation": g}
                         for q, g in zip(items, generations)}}
    return {f"{prefix}_{key}": mean_result(f"{prefix}_{key}", {q.id: s[key] for q, s in zip(items, scores)},
                                           higher_is_better=higher_is_better, params=params,
                                           details=details if key == "rougeL_recall" else {})
            for key in ("rougeL_recall", "rougeL_f1")}


def knowledge_metrics(data: DuskData, generations: dict[str, list[str]], params: dict) -> dict[str, MetricResult]:
    out = {}
    for short, qa_set in QA_SETS.items():
        out |= qa_rouge_metrics(short, data.qa[qa_set], generations[qa_set], params, higher_is_better=short != "ufk")
    return out


def mia_texts(data: DuskData) -> dict[str, list[str]]:
    return {"forget": [data.forget_text], "retain": data.retain_texts, "holdout": [data.holdout]}


def membership_scores(model, data: DuskData) -> dict:
    return mia.score_texts(model, mia_texts(data), data.params["mia_chunk_tokens"], data.params["mink_k"])


def membership_metrics(own: dict, retain: dict | None, params: dict, score: str = mia.DEFAULT_SCORE) -> dict:
    """AUC(holdout, forget), PL, |PL| and RD from the `score` of each chunk
    under the evaluated model (`own`) and the retain model (DUSK's membership
    metrics; MUSE's PrivLeak is the same PL)."""
    aucs = {s: mia.auc(own["holdout"][s], own["forget"][s]) for s in own["forget"]}
    n = len(own["forget"][score]) + len(own["holdout"][score])
    out = {"mia_auc_holdout_forget": MetricResult(
        "mia_auc_holdout_forget", aucs[score], n, _auc_ci(own, score), higher_is_better=True, ideal="retain",
        params={**params, "score": score},
        details={"auc_holdout_forget_by_score": aucs,
                 "chunks": {k: len(v[score]) for k, v in own.items()}})}
    if retain is None:
        reason = "needs --retain-model (PL and RD compare AUCs with the retain model's)"
        for name in MEMBERSHIP_METRICS[1:]:
            out[name] = Unavailable(name, reason)
        return out
    h_m, h_r = aucs[score], mia.auc(retain["holdout"][score], retain["forget"][score])
    a_m = mia.auc(own["retain"][score], own["holdout"][score])
    a_r = mia.auc(retain["retain"][score], retain["holdout"][score])
    out["mia_auc_holdout_forget"].details["retain_auc_holdout_forget"] = h_r
    pl_ci, pl_abs_ci, rd_ci, dropped = mia.bootstrap_pl_rd(own, retain, score)
    common = {"score": score, "auc_holdout_forget": {"model": h_m, "retain": h_r},
              "auc_retain_holdout": {"model": a_m, "retain": a_r}}
    pl_params = {**params, "score": score, "sign_convention": PL_SIGN}
    # MUSE under convention=reference: OpenUnlearning's privleak, 1e-10 in the denominator.
    epsilon = EPSILON if params.get("convention") == "reference" else 0.0
    if h_r == 0 and not epsilon:
        # PL divides by it: the retain model ranks every forget chunk above
        # every holdout chunk, so "relative to retain" has no scale.
        reason = ("PL is undefined: the retain model's AUC(holdout, forget) is 0 (every forget chunk scores above "
                  "every holdout chunk under the retain model)")
        out["privacy_leakage"] = Unavailable("privacy_leakage", reason)
        out["privacy_leakage_magnitude"] = Unavailable("privacy_leakage_magnitude", reason)
    else:
        pl = mia.privacy_leakage(h_m, h_r, epsilon)
        pl_details = {**common, "bootstrap_resamples_dropped": dropped["pl"]}
        out["privacy_leakage"] = MetricResult("privacy_leakage", pl, n, pl_ci, higher_is_better=False,
                                              params=pl_params, details=pl_details, ideal=0.0)
        out["privacy_leakage_magnitude"] = MetricResult("privacy_leakage_magnitude", abs(pl), n, pl_abs_ci,
                                                        higher_is_better=False, params=pl_params,
                                                        details=pl_details)
    if a_r == 0:
        out["retain_deviation"] = Unavailable(
            "retain_deviation", "RD is undefined: the retain model's AUC(retain, holdout) is 0")
    else:
        out["retain_deviation"] = MetricResult(
            "retain_deviation", mia.retain_deviation(a_m, a_r), n, rd_ci, higher_is_better=False,
            params={**params, "score": score}, details={**common, "bootstrap_resamples_dropped": dropped["rd"]})
    return out


def _auc_ci(own: dict, score: str) -> tuple[float, float]:
    matrix = mia.comparison_matrix(own["holdout"][score], own["forget"][score])
    holdout, forget = bootstrap_indices(matrix.shape)
    return percentile_ci([matrix[np.ix_(h, f)].mean() for h, f in zip(holdout, forget)])


def evaluate(model, data: DuskData, refs: References | None = None) -> dict:
    refs = refs or References()
    params = dict(data.params)
    embedder = Embedder(params["embedder"], device=str(model.device))

    references = verbatim_references(model, data)
    prompts = [item.prompt for item in data.verbatim]
    generations = model.generate(prompts, max_new_tokens=params["verbatim_max_new_tokens"])
    out = verbatim_metrics(references, generations, [v.id for v in data.verbatim], prompts, embedder, params)

    order = [(name, q) for name in QA_SETS.values() for q in data.qa[name]]
    replies = model.generate([qa_prompt(q.question) for _, q in order], prefix=qa_prefix(data),
                              max_new_tokens=params["qa_max_new_tokens"], stop_strings=QA_STOP_STRINGS)
    by_set = {name: [r for (n, _), r in zip(order, replies) if n == name] for name in QA_SETS.values()}
    out |= knowledge_metrics(data, by_set, params)

    try:
        scores = membership_scores(model, data)
        retain = None if refs.retain is None else refs.memo.get_or_compute(
            "membership-scores", {"retain": refs.retain}, params, lambda: membership_scores(refs.retain, data))
    except MissingCapability as exc:  # Min-K%++ needs the full next-token distribution
        return out | {name: Unavailable(name, str(exc)) for name in MEMBERSHIP_METRICS}
    return out | membership_metrics(scores, retain, params)
