"""TOFU's statistics as OpenUnlearning computes them (docs/suites/tofu.md), over
per-item values the scoring and generation passes produce.

Each statistic is tested against a hand-worked value or scipy
(tests/unit/test_tofu_statistics.py); `evaluate` feeds them from one teacher-forced
pass (probabilities, truth ratios, memorization, Min-K%++) and one greedy pass
(ROUGE).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy.stats import hmean, ks_2samp

from unlearnbench.data.openunlearning import floor_count
from unlearnbench.errors import MissingCapability
from unlearnbench.metrics import mia, openunlearning
from unlearnbench.metrics.core import MetricResult, References, Unavailable, bootstrap_indices, mean_result, replicated
from unlearnbench.metrics.dialogue import STOP_STRINGS, first_turn_prompt
from unlearnbench.metrics.memorization import exact_memorization, extraction_strength
from unlearnbench.metrics.text import rouge
from unlearnbench.models.interface import LanguageModel
from unlearnbench.suites.tofu.data import TofuData


def answer_probability(mean_nll: float) -> float:
    """exp(-mean token NLL): the length-normalised probability of an answer."""
    return float(np.exp(-mean_nll))


def truth_ratio(paraphrased_mean_nll: float, perturbed_mean_nlls: Sequence[float], epsilon: float = 0.0) -> float:
    """tr = P(perturbed) / P(paraphrased). Several perturbed answers enter as
    exp(-mean of their mean NLLs), as OpenUnlearning averages the losses
    before the exponential (a geometric mean of their probabilities).
    OpenUnlearning adds `epsilon` = 1e-10 to the denominator."""
    wrong = np.exp(-float(np.mean(perturbed_mean_nlls)))
    return float(wrong / (np.exp(-paraphrased_mean_nll) + epsilon))


def truth_ratio_prob_mean(correct_mean_nll: float, wrong_mean_nlls: Sequence[float], epsilon: float = 0.0) -> float:
    """The meta-evaluation's truth ratio (OpenUnlearning's `prob_mean`
    aggregator): P(correct) / (P(correct) + P(wrong)), with P(wrong) the
    geometric mean of the wrong answers' probabilities as in `truth_ratio`;
    1 = only the true answer is likely, 0.5 = no preference. Its mean over the
    forget set is the "extent of knowledge" left (higher = more)."""
    correct = np.exp(-correct_mean_nll)
    wrong = np.exp(-float(np.mean(wrong_mean_nlls)))
    return float(correct / (correct + wrong + epsilon))


def closer_to_one(tr: float, epsilon: float = 0.0) -> float:
    """One forget item's min(tr, 1/tr): 1 when paraphrased and perturbed
    answers are equally likely (no knowledge either way)."""
    return float(min(tr, 1 / (tr + epsilon)))


def forget_truth_ratio(ratios: Sequence[float]) -> float:
    """The forget-set aggregate: mean(min(tr, 1/tr))."""
    return float(np.mean([closer_to_one(tr) for tr in ratios]))


def retained_truth_ratio(ratios: Sequence[float]) -> float:
    """The retain-side aggregate: mean(max(0, 1 - tr)); higher = the true
    answer is preferred to the perturbed ones."""
    tr = np.asarray(ratios, dtype=np.float64)
    return float(np.mean(np.maximum(0.0, 1 - tr)))


def forget_quality(model_ratios: Sequence[float], retain_ratios: Sequence[float]) -> float:
    """The two-sample Kolmogorov-Smirnov p-value between the checkpoint's and
    the retain model's forget truth ratios (scipy's `ks_2samp`, two-sided)."""
    return float(
        ks_2samp(np.asarray(model_ratios, dtype=np.float64), np.asarray(retain_ratios, dtype=np.float64)).pvalue
    )


def ks_distance_replicates(model_ratios: Sequence[float], retain_ratios: Sequence[float]) -> list[float]:
    """The reflected bootstrap replicates 2 D - D*_k of the two-sample KS
    distance D between the checkpoint's and the retain model's forget truth
    ratios, over the same forget items (replicate k resamples items once and
    takes both models' ratios of those items, drawn by `bootstrap_indices`).
    A supremum over a resample sits above the sample's own (ties and noise
    only add to it), so the percentile interval of the D*_k lies wholly above
    a true distance on the bound in every simulated case
    (benchmarks/calibration.py); their percentile interval reflected, the
    basic bootstrap interval, is centred on D."""
    own = np.asarray(model_ratios, dtype=np.float64)
    ret = np.asarray(retain_ratios, dtype=np.float64)
    distance = float(ks_2samp(own, ret).statistic)
    [rows] = bootstrap_indices([own.size])
    first, second = np.sort(own[rows], axis=1), np.sort(ret[rows], axis=1)
    pooled = np.concatenate([first, second], axis=1)
    out = np.empty(rows.shape[0])
    for k in range(rows.shape[0]):  # sup |F1 - F2| over the pooled points: both ECDFs at each
        gap = np.searchsorted(first[k], pooled[k], "right") - np.searchsorted(second[k], pooled[k], "right")
        out[k] = np.abs(gap).max() / own.size
    return (2 * distance - out).tolist()


def model_utility_replicates(parts: Sequence[Sequence[Mapping[str, float]]]) -> list[float]:
    """The bootstrap replicates of model utility: per set (a list of its
    three per-item value maps over the same items), one resample of its items
    per replicate, the three means of those items, and the harmonic mean of
    all nine means. Drawn by `bootstrap_indices`, so a checkpoint's and its
    reference's replicate k resample the same items (a paired difference)."""
    arrays = [np.array([[m[item] for item in metrics[0]] for m in metrics]) for metrics in parts]  # [3, n] per set
    rows = bootstrap_indices([a.shape[1] for a in arrays])
    means = np.concatenate([a[:, r].mean(axis=2) for a, r in zip(arrays, rows)])  # [9, B]
    safe = np.where(means > 0, means, 1.0)
    utility = means.shape[0] / (1.0 / safe).sum(axis=0)
    return np.where((means > 0).all(axis=0), utility, 0.0).tolist()


def normalised_probability(correct_mean_nll: float, wrong_mean_nlls: Sequence[float], epsilon: float = 0.0) -> float:
    """P(correct) / (P(correct) + sum of P(wrong)), each exp(-mean NLL): real
    authors and world facts, where the options are other valid-looking answers."""
    correct = np.exp(-correct_mean_nll)
    return float(correct / (correct + np.sum(np.exp(-np.asarray(wrong_mean_nlls, dtype=np.float64))) + epsilon))


def model_utility(values: Sequence[float]) -> float:
    """The harmonic mean of {Prob, ROUGE, Truth Ratio} x {retain, real
    authors, world facts} (scipy's `hmean`); 0 if any of them is 0."""
    array = np.asarray(values, dtype=np.float64)
    return 0.0 if np.any(array == 0) else float(hmean(array))


# ---------------------------------------------------------------- the suite
SHORT = {"retain": "retain", "real_authors": "ra", "world_facts": "wf"}


def is_reference(data) -> bool:
    return data.params["convention"] == "reference"


def teacher_forced(model, data, sets) -> tuple[dict, bool]:
    """ONE teacher-forced pass over every answer, paraphrase and perturbed
    answer of `sets`: {(set, i, kind, k): TokenScores}, and whether
    privleak's membership score can be computed from it: Min-K%++ (the
    default) needs the vocabulary statistics, which an endpoint backend does
    not give (the pass then runs without them).

    `convention=spec` scores the answer after the question's chat prompt
    (`encode_pair`); `convention=reference` scores what OpenUnlearning's
    dataset labels: the answer, the template's closing tokens and EOS, after
    its templated prompt, with pad-id tokens out of attention.
    """
    keys, pairs, contexts, continuations = [], [], [], []
    template = (
        openunlearning.template_for(model, data.params["reference_system_prompt"]) if is_reference(data) else None
    )
    for name in sets:
        for i, item in enumerate(data.sets[name]):
            prompt = first_turn_prompt(model, item.question)
            texts = [("answer", 0, item.answer)] + ([("paraphrased", 0, item.paraphrased)] if item.paraphrased else [])
            texts += [("perturbed", k, text) for k, text in enumerate(item.perturbed)]
            for kind, k, text in texts:
                keys.append((name, i, kind, k))
                if template:
                    encoded = openunlearning.encode_qa(model, template, [item.question], [text])
                    pairs.append((encoded.ids, encoded.start))
                else:
                    contexts.append(prompt)
                    continuations.append(text)
    if not template:
        pairs = model.encode_pairs(contexts, continuations)
    masked = {openunlearning.pad_id(model)} if template else ()

    def run(vocab_stats: bool) -> list:
        return model.token_logprobs(
            [ids for ids, _ in pairs], [start for _, start in pairs], vocab_stats=vocab_stats, masked_ids=masked
        )

    try:
        scores, membership = run(data.params["privleak_score"] == "minkpp"), True
    except MissingCapability:
        scores, membership = run(False), False
    return dict(zip(keys, scores)), membership


def _nll(scores) -> float:
    return float(-np.mean(scores.logprobs))


def _memorization_positions(scores, data):
    """The positions ES, EM and Min-K% read: under the reference convention
    every label but the last, as OpenUnlearning's tokenwise log-probs give them."""
    return openunlearning.labels_but_last(scores) if is_reference(data) else scores


def _epsilon(data) -> float:
    return openunlearning.EPSILON if is_reference(data) else 0.0


def truth_ratios(scored: dict, data, name: str, definition=truth_ratio) -> dict[str, float]:
    """Per item: perturbed vs paraphrased (forget, retain) or vs the answer
    (real authors, world facts), by `definition` (`truth_ratio`, TOFU's, or
    `truth_ratio_prob_mean`)."""
    out = {}
    for i, item in enumerate(data.sets[name]):
        base = scored[(name, i, "paraphrased" if item.paraphrased else "answer", 0)]
        out[item.id] = definition(
            _nll(base), [_nll(scored[(name, i, "perturbed", k)]) for k in range(len(item.perturbed))], _epsilon(data)
        )
    return out


def membership_auc(scored: dict, data) -> float:
    """AUC(forget answers above holdout answers) of the `privleak_score`
    (Min-K%++ by default): 1 = the forget answers look trained on."""
    k, score, floor = data.params["mink_k"], data.params["privleak_score"], floor_count(data.params)

    def scores(name: str) -> list[float]:
        return [
            mia.chunk_scores(
                s.logprobs, s.vocab_mean, s.vocab_var, item.answer, k, floor=floor, variance_floor=is_reference(data)
            )[score]
            for i, item in enumerate(data.sets[name])
            for s in [_memorization_positions(scored[(name, i, "answer", 0)], data)]
        ]

    return mia.auc(scores("forget"), scores("holdout"))


def reference_statistics(model, data) -> dict:
    """What the relative metrics need from the retain model: its forget truth ratios and membership AUC."""
    scored, membership = teacher_forced(model, data, ("forget", "holdout"))
    return {
        "forget_truth_ratios": truth_ratios(scored, data, "forget"),
        "membership_auc": membership_auc(scored, data) if membership else None,
    }


def replies_and_references(model, data, asked) -> tuple[list[str], list[str]]:
    """Greedy replies to the questions of `asked` and what ROUGE compares
    them with. `spec`: after the question's chat prompt, cut where the next
    turn would begin, against the answer. `reference`: OpenUnlearning's
    templated prompt, no stop strings, and its decoded label text."""
    if is_reference(data):
        template = openunlearning.template_for(model, data.params["reference_system_prompt"])
        encoded = [openunlearning.encode_qa(model, template, [item.question], [item.answer]) for _, _, item in asked]
        replies = openunlearning.generate(
            model,
            [openunlearning.qa_prompt(model, template, [item.question], [item.answer]) for _, _, item in asked],
            max_new_tokens=data.params["max_new_tokens"],
        )
        return replies, [openunlearning.reference_text(model, e, whole=True) for e in encoded]
    replies = model.generate(
        [first_turn_prompt(model, item.question) for _, _, item in asked],
        max_new_tokens=data.params["max_new_tokens"],
        stop_strings=STOP_STRINGS,
    )
    return replies, [item.answer for _, _, item in asked]


def evaluate(
    model: LanguageModel, data: TofuData, refs: References | None = None
) -> dict[str, MetricResult | Unavailable]:
    refs = refs or References()
    params = dict(data.params)
    epsilon = _epsilon(data)
    if is_reference(data):
        params["reference_template"] = openunlearning.template_for(model, params["reference_system_prompt"]).family
    scored, membership = teacher_forced(model, data, ("forget", "retain", "real_authors", "world_facts", "holdout"))
    asked = [
        (name, i, item)
        for name in ("forget", "retain", "real_authors", "world_facts")
        for i, item in enumerate(data.sets[name])
    ]
    replies, references = replies_and_references(model, data, asked)
    rouges: dict[str, dict[str, float]] = {}
    details: dict[str, dict] = {}
    for (name, _, item), reply, reference in zip(asked, replies, references):
        rouges.setdefault(name, {})[item.id] = rouge(reference, reply, stemmed=True)["rougeL_recall"]
        details.setdefault(name, {})[item.id] = {"question": item.question, "answer": reference, "reply": reply}

    out: dict[str, Any] = {}
    forget = data.sets["forget"]
    answer = {name: [scored[(name, i, "answer", 0)] for i in range(len(data.sets[name]))] for name in data.sets}
    out["forget_prob"] = mean_result(
        "forget_prob",
        {q.id: answer_probability(_nll(s)) for q, s in zip(forget, answer["forget"])},
        higher_is_better=False,
        params=params,
        ideal="retain",
    )
    out["forget_rouge"] = mean_result(
        "forget_rouge",
        rouges["forget"],
        higher_is_better=False,
        params=params,
        details={"items": details["forget"]},
        ideal="retain",
    )
    forget_tr = truth_ratios(scored, data, "forget")
    out["forget_truth_ratio"] = mean_result(
        "forget_truth_ratio",
        {i: closer_to_one(tr, epsilon) for i, tr in forget_tr.items()},
        higher_is_better=True,
        params=params,
        details={"truth_ratios": forget_tr, "aggregate": "mean(min(tr, 1/tr))"},
    )
    out["forget_truth_ratio_prob_mean"] = mean_result(
        "forget_truth_ratio_prob_mean",
        truth_ratios(scored, data, "forget", truth_ratio_prob_mean),
        higher_is_better=False,
        params=params,
        ideal="retain",
        details={"aggregate": "mean(P(paraphrased) / (P(paraphrased) + P(perturbed)))"},
    )
    if answer["forget"][0].argmax is None:
        reason = f"{model.name}: the backend gives no teacher-forced argmax"
        out["extraction_strength"] = Unavailable("extraction_strength", reason)
        out["exact_memorization"] = Unavailable("exact_memorization", reason)
    else:
        positions = [_memorization_positions(s, data) for s in answer["forget"]]
        for name, function in (
            ("extraction_strength", extraction_strength),
            ("exact_memorization", exact_memorization),
        ):
            out[name] = mean_result(
                name,
                {q.id: function(s.argmax, s.token_ids) for q, s in zip(forget, positions)},
                higher_is_better=False,
                params=params,
                ideal="retain",
            )
    for name, short in SHORT.items():
        items = data.sets[name]
        if name == "retain":
            probs = {q.id: answer_probability(_nll(s)) for q, s in zip(items, answer[name])}
        else:  # normalised over the options, as OpenUnlearning does for real authors and world facts
            probs = {
                q.id: normalised_probability(
                    _nll(scored[(name, i, "answer", 0)]),
                    [_nll(scored[(name, i, "perturbed", k)]) for k in range(len(q.perturbed))],
                    epsilon,
                )
                for i, q in enumerate(items)
            }
        ratios = truth_ratios(scored, data, name)
        out[f"{short}_prob"] = mean_result(f"{short}_prob", probs, higher_is_better=True, params=params)
        out[f"{short}_rouge"] = mean_result(
            f"{short}_rouge", rouges[name], higher_is_better=True, params=params, details={"items": details[name]}
        )
        out[f"{short}_truth_ratio"] = mean_result(
            f"{short}_truth_ratio",
            {i: max(0.0, 1 - tr) for i, tr in ratios.items()},
            higher_is_better=True,
            params=params,
            details={"aggregate": "mean(max(0, 1 - tr))"},
        )
    parts = [out[f"{short}_{m}"].value for short in SHORT.values() for m in ("prob", "rouge", "truth_ratio")]
    utility = model_utility(parts)
    per_item = [[out[f"{short}_{m}"].per_item for m in ("prob", "rouge", "truth_ratio")] for short in SHORT.values()]
    out["model_utility"] = MetricResult(
        "model_utility",
        utility,
        sum(len(i[0]) for i in per_item),
        **replicated(model_utility_replicates(per_item)),
        higher_is_better=True,
        params=params,
        details={
            "harmonic_mean_of": dict(
                zip([f"{s}_{m}" for s in SHORT.values() for m in ("prob", "rouge", "truth_ratio")], parts)
            )
        },
    )
    retain = (
        None
        if refs.retain is None
        else refs.memo.get_or_compute(
            "retain-statistics", {"retain": refs.retain}, params, lambda: reference_statistics(refs.retain, data)
        )
    )
    if retain is None:
        reason = "needs --retain-model (forget quality and privleak compare with the retain model)"
        for name in ("forget_quality", "forget_ks_distance", "privleak"):
            out[name] = Unavailable(name, reason)
        return out
    model_ratios = list(forget_tr.values())
    retain_ratios = [retain["forget_truth_ratios"][item] for item in forget_tr]
    quality = forget_quality(model_ratios, retain_ratios)
    out["forget_quality"] = MetricResult(
        "forget_quality",
        quality,
        len(forget_tr),
        (quality, quality),
        higher_is_better=True,
        params={**params, "test": "scipy ks_2samp"},
    )
    distance = float(ks_2samp(np.asarray(model_ratios), np.asarray(retain_ratios)).statistic)
    out["forget_ks_distance"] = MetricResult(
        "forget_ks_distance",
        distance,
        len(forget_tr),
        **replicated(ks_distance_replicates(model_ratios, retain_ratios)),
        higher_is_better=False,
        params={**params, "test": "two-sample KS distance, paired bootstrap over forget items"},
        ideal=0.0,
    )
    if not membership or retain["membership_auc"] is None:
        out["privleak"] = Unavailable(
            "privleak",
            f"Min-K%++ needs the full next-token distribution, which the "
            f"backend of {model.name} or the retain model does not give",
        )
        return out
    auc_m, auc_r = 1 - membership_auc(scored, data), 1 - retain["membership_auc"]
    if auc_r == 0 and not epsilon:
        out["privleak"] = Unavailable("privleak", "undefined: the retain model's 1 - AUC(forget vs holdout) is 0")
    else:
        value = (auc_m - auc_r) / (auc_r + epsilon) * 100
        out["privleak"] = MetricResult(
            "privleak",
            value,
            len(forget),
            (value, value),
            higher_is_better=False,
            params=params,
            ideal=0.0,
            details={
                "auc_prime": {"model": auc_m, "retain": auc_r},
                "formula": "(AUC'_m - AUC'_r) / AUC'_r x 100, AUC' = 1 - "
                f"AUC(forget vs holdout, {params['privleak_score']})",
            },
        )
    return out
