"""Membership-inference scores, AUC, privacy leakage and retain deviation (docs/suites/dusk.md).

Every score is "higher = more member-like":
- loss:   mean token log-prob of the chunk (= -LOSS);
- zlib:   -(mean NLL) / zlib-compressed byte length of the chunk's text;
- mink:   mean of the lowest k fraction of token log-probs (Min-K%);
- minkpp: mean of the lowest k fraction of z_t = (log p(x_t) - mu_t) / sigma_t
          with mu_t, sigma_t the mean and std of log p under p (Min-K%++).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np

from unlearnbench.metrics.core import (
    BOOTSTRAP_RESAMPLES,
    MetricResult,
    Unavailable,
    bootstrap_indices,
    replicated,
)
from unlearnbench.metrics.openunlearning import EPSILON

SCORES = ("loss", "zlib", "mink", "minkpp")
DEFAULT_SCORE = "minkpp"
SIGMA_FLOOR = 1e-6  # ours: on sigma; OpenUnlearning clamps the variance at the same 1e-6


def lowest_fraction_mean(values: np.ndarray, k: float, *, floor: bool = False) -> float:
    """Mean of the ceil(k * n) smallest values, or int(k * n) with `floor` (as
    the DUSK and OpenUnlearning codes count); at least one."""
    count = max(1, int(k * len(values)) if floor else math.ceil(k * len(values)))
    return float(np.sort(values)[:count].mean())


def chunk_scores(
    logprobs: np.ndarray,
    vocab_mean: np.ndarray | None,
    vocab_var: np.ndarray | None,
    text: str,
    k: float,
    *,
    floor: bool = False,
    variance_floor: bool = False,
) -> dict:
    """Every score of one chunk; Min-K%++ only with the vocabulary statistics
    (a backend that sees only the given tokens' log-probs has none).
    `variance_floor`: sigma = sqrt(max(var, 1e-6)) as OpenUnlearning computes
    it, rather than max(sigma, 1e-6)."""
    mean_logprob = float(np.mean(logprobs))
    scores = {
        "loss": mean_logprob,
        "zlib": mean_logprob / len(zlib.compress(text.encode("utf-8"))),
        "mink": lowest_fraction_mean(logprobs, k, floor=floor),
    }
    if vocab_mean is not None:
        assert vocab_var is not None  # the statistics come in pairs
        sigma = (
            np.sqrt(np.maximum(vocab_var, SIGMA_FLOOR))
            if variance_floor
            else np.maximum(np.sqrt(vocab_var), SIGMA_FLOOR)
        )
        z = (logprobs - vocab_mean) / sigma
        scores["minkpp"] = lowest_fraction_mean(z, k, floor=floor)
    return scores


def chunk_token_ids(model, text: str, chunk_tokens: int, *, truncate: bool = False) -> list[list[int]]:
    """Non-overlapping chunks of `chunk_tokens` tokens, each with the
    tokenizer's BOS (if any) in front so its first token is scored too.

    As in the DUSK reference code (`mia_eval.trans`), a text's trailing partial
    chunk is dropped: a 154-token tail is not an AUC sample of the same weight
    as a full chunk. A text shorter than one chunk keeps its one (partial)
    chunk, where the reference would drop the text altogether.

    `truncate`: one sample per text, its first `chunk_tokens` tokens (MUSE's
    convention: each article is one member or non-member, cut at 2048 tokens).
    """
    bos = model.encode("", add_special_tokens=True)
    size = chunk_tokens - len(bos)
    ids = model.encode(text, add_special_tokens=False)
    if len(ids) < size or truncate:
        ids = ids[:size]
        return [bos + ids] if len(bos + ids) > 1 else []
    return [bos + ids[i : i + size] for i in range(0, len(ids) - size + 1, size)]


def score_texts(
    model,
    texts: dict[str, list[str]],
    chunk_tokens: int,
    k: float,
    *,
    truncate: bool = False,
    vocab_stats: bool = True,
    floor: bool = False,
) -> dict[str, dict[str, list]]:
    """{set name: {score name: [per chunk]}} from ONE teacher-forced pass per
    chunk (per text with `truncate`: see `chunk_token_ids`). Without
    `vocab_stats` the pass needs only the chunk's own log-probs (an endpoint
    gives them) and every score but Min-K%++ is there. `floor`: see
    `lowest_fraction_mean`."""
    chunk_tokens = min(chunk_tokens, model.context_length)
    chunks = [
        (name, ids)
        for name, items in texts.items()
        for text in items
        for ids in chunk_token_ids(model, text, chunk_tokens, truncate=truncate)
    ]
    bos = len(model.encode("", add_special_tokens=True))
    scored = model.token_logprobs([ids for _, ids in chunks], [max(bos, 1)] * len(chunks), vocab_stats=vocab_stats)
    out: dict[str, Any] = {name: {s: [] for s in SCORES if vocab_stats or s != "minkpp"} for name in texts}
    for (name, ids), s in zip(chunks, scored):
        text = model.decode(ids)
        for score, value in chunk_scores(s.logprobs, s.vocab_mean, s.vocab_var, text, k, floor=floor).items():
            out[name][score].append(value)
    return out


def comparison_matrix(a, b) -> np.ndarray:
    """M[i, j] = 1 if a_i > b_j, 1/2 if equal, else 0."""
    a, b = np.asarray(a, dtype=np.float64)[:, None], np.asarray(b, dtype=np.float64)[None, :]
    return (a > b) + 0.5 * (a == b)


def resampled_means(matrix: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """matrix[np.ix_(rows[k], cols[k])].mean() for every draw k, without
    building any resampled matrix: a draw's mean is its row counts @ matrix @
    its column counts over n x m. With a comparison matrix (entries 0, 1/2, 1)
    and integer counts every partial sum is exact in float64, so the result
    is bit for bit the indexed mean."""

    def counts(index: np.ndarray, size: int) -> np.ndarray:
        draws = index.shape[0]
        flat = (index + size * np.arange(draws)[:, None]).ravel()
        return np.bincount(flat, minlength=draws * size).reshape(draws, size).astype(np.float64)

    row_counts, col_counts = counts(rows, matrix.shape[0]), counts(cols, matrix.shape[1])
    return ((row_counts @ matrix) * col_counts).sum(axis=1) / (rows.shape[1] * cols.shape[1])


def auc(a, b) -> float:
    """P(a chunk of A scores higher than a chunk of B), ties counting 1/2."""
    return float(comparison_matrix(a, b).mean())


def privacy_leakage(auc_model: float, auc_retain: float, epsilon: float = 0.0) -> float:
    """PL = (H_m - H_r) / H_r x 100, H = AUC(holdout, forget).
    PL > 0: over-unlearning; PL < 0: under-unlearning; ideal 0.
    OpenUnlearning adds `epsilon` = 1e-10 to the denominator."""
    return (auc_model - auc_retain) / (auc_retain + epsilon) * 100.0


def retain_deviation(auc_model: float, auc_retain: float) -> float:
    """RD = |AUC_m(retain, holdout) - AUC_r(retain, holdout)| / AUC_r x 100."""
    return abs(auc_model - auc_retain) / auc_retain * 100.0


def bootstrap_pl_rd(model: dict, retain: dict, score: str, resamples: int = BOOTSTRAP_RESAMPLES):
    """Paired bootstrap over chunks (the same resampled chunks under both
    models): the bootstrap replicates of PL, |PL| and RD, and how many of the
    resamples of each of PL and RD are unbounded because the retain model's
    AUC, their denominator, was 0 there. Such a resample is kept, as +inf
    (the model's AUC above 0) or 0 (both AUCs 0: the model ranks as the
    retain model does): dropping it would trim the upper tail of the
    interval, which favours a pass."""
    hf_m = comparison_matrix(model["holdout"][score], model["forget"][score])
    hf_r = comparison_matrix(retain["holdout"][score], retain["forget"][score])
    rh_m = comparison_matrix(model["retain"][score], model["holdout"][score])
    rh_r = comparison_matrix(retain["retain"][score], retain["holdout"][score])
    h, f, r = bootstrap_indices([hf_m.shape[0], hf_m.shape[1], rh_m.shape[0]], resamples)
    h_m, h_r = resampled_means(hf_m, h, f).tolist(), resampled_means(hf_r, h, f).tolist()
    a_m, a_r = resampled_means(rh_m, r, h).tolist(), resampled_means(rh_r, r, h).tolist()
    pl = [_unbounded_if_zero(privacy_leakage, m, ret) for m, ret in zip(h_m, h_r)]
    rd = [_unbounded_if_zero(retain_deviation, m, ret) for m, ret in zip(a_m, a_r)]
    unbounded = {"pl": sum(ret == 0 for ret in h_r), "rd": sum(ret == 0 for ret in a_r)}
    return pl, [abs(v) for v in pl], rd, unbounded


def _unbounded_if_zero(relative: Callable[[float, float], float], model_auc: float, retain_auc: float) -> float:
    if retain_auc > 0:
        return relative(model_auc, retain_auc)
    return math.inf if model_auc > 0 else 0.0


# ---------------------------------------------- the membership metrics
# DUSK's names; MUSE reports the same metrics as OpenUnlearning names them (privleak, ...).
MEMBERSHIP_METRICS = ("mia_auc_holdout_forget", "privacy_leakage", "privacy_leakage_magnitude", "retain_deviation")
PL_SIGN = (
    "PL = (H_m - H_r) / H_r x 100, H = AUC(holdout, forget) under the model (m) and the retain "
    "model (r); PL > 0: over-unlearning (forget text looks less seen than never-seen text), "
    "PL < 0: under-unlearning; ideal 0"
)


def membership_metrics(own: dict, retain: dict | None, params: dict, score: str = DEFAULT_SCORE) -> dict:
    """AUC(holdout, forget), PL, |PL| and RD from the `score` of each chunk
    under the evaluated model (`own`) and the retain model (DUSK's membership
    metrics; MUSE's PrivLeak is the same PL)."""
    aucs = {s: auc(own["holdout"][s], own["forget"][s]) for s in own["forget"]}
    n = len(own["forget"][score]) + len(own["holdout"][score])
    out: dict[str, Any] = {
        "mia_auc_holdout_forget": MetricResult(
            "mia_auc_holdout_forget",
            aucs[score],
            n,
            **replicated(_auc_replicates(own, score)),
            higher_is_better=True,
            ideal="retain",
            params={**params, "score": score},
            details={"auc_holdout_forget_by_score": aucs, "chunks": {k: len(v[score]) for k, v in own.items()}},
        )
    }
    if retain is None:
        reason = "needs --retain-model (PL and RD compare AUCs with the retain model's)"
        for name in MEMBERSHIP_METRICS[1:]:
            out[name] = Unavailable(name, reason)
        return out
    h_m, h_r = aucs[score], auc(retain["holdout"][score], retain["forget"][score])
    a_m = auc(own["retain"][score], own["holdout"][score])
    a_r = auc(retain["retain"][score], retain["holdout"][score])
    out["mia_auc_holdout_forget"].details["retain_auc_holdout_forget"] = h_r
    pl_reps, pl_abs_reps, rd_reps, unbounded = bootstrap_pl_rd(own, retain, score)
    common = {
        "score": score,
        "auc_holdout_forget": {"model": h_m, "retain": h_r},
        "auc_retain_holdout": {"model": a_m, "retain": a_r},
    }
    pl_params = {**params, "score": score, "sign_convention": PL_SIGN}
    # MUSE under convention=reference: OpenUnlearning's privleak, 1e-10 in the denominator.
    epsilon = EPSILON if params.get("convention") == "reference" else 0.0
    if h_r == 0 and not epsilon:
        # PL divides by it: the retain model ranks every forget chunk above
        # every holdout chunk, so "relative to retain" has no scale.
        reason = (
            "PL is undefined: the retain model's AUC(holdout, forget) is 0 (every forget chunk scores above "
            "every holdout chunk under the retain model)"
        )
        out["privacy_leakage"] = Unavailable("privacy_leakage", reason)
        out["privacy_leakage_magnitude"] = Unavailable("privacy_leakage_magnitude", reason)
    else:
        pl = privacy_leakage(h_m, h_r, epsilon)
        pl_details = {**common, "bootstrap_resamples_unbounded": unbounded["pl"]}
        out["privacy_leakage"] = MetricResult(
            "privacy_leakage",
            pl,
            n,
            **replicated(pl_reps),
            higher_is_better=False,
            params=pl_params,
            details=pl_details,
            ideal=0.0,
        )
        out["privacy_leakage_magnitude"] = MetricResult(
            "privacy_leakage_magnitude",
            abs(pl),
            n,
            **replicated(pl_abs_reps),
            higher_is_better=False,
            params=pl_params,
            details=pl_details,
        )
    if a_r == 0:
        out["retain_deviation"] = Unavailable(
            "retain_deviation", "RD is undefined: the retain model's AUC(retain, holdout) is 0"
        )
    else:
        out["retain_deviation"] = MetricResult(
            "retain_deviation",
            retain_deviation(a_m, a_r),
            n,
            **replicated(rd_reps),
            higher_is_better=False,
            params={**params, "score": score},
            details={**common, "bootstrap_resamples_unbounded": unbounded["rd"]},
        )
    return out


def _auc_replicates(own: dict, score: str) -> list[float]:
    matrix = comparison_matrix(own["holdout"][score], own["forget"][score])
    holdout, forget = bootstrap_indices(matrix.shape)
    return resampled_means(matrix, holdout, forget).tolist()
