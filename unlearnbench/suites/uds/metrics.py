"""UDS (arXiv 2605.24614): is the knowledge gone from the internals? (docs/suites/uds.md)

Target = the `full` model. Score s = mean teacher-forced log-prob of the
entity tokens. Patching block l's output at the entity-predicting positions
with a source model's output gives delta_l = s_full - s_patched(l).
Stage 1 (source = retain) picks the layers that carry the knowledge,
FT = {l : delta1_l > tau}; stage 2 (source = the unlearned model) measures how
much of that the unlearned model also lost there:

    UDS_i = sum_{l in FT} delta1_l * clip(delta2_l / delta1_l, 0, 1) / sum_{l in FT} delta1_l

undefined (excluded, counted) when FT is empty. 1 = erased as deep as retain,
0 = intact. Stage 1 depends only on (full, retain, data) and is cached on disk.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from unlearnbench.metrics.core import (
    MetricResult,
    References,
    Unavailable,
    bootstrap_ci,
)
from unlearnbench.models.interface import ActivationPatching, LanguageModel
from unlearnbench.suites.uds.data import CONVENTIONS, UDSData, UDSItem


def check_convention(convention: str) -> str:
    if convention not in CONVENTIONS:
        raise ValueError(f"UDS convention {convention!r}: expected one of {', '.join(CONVENTIONS)}")
    return convention


def reference_text(item: UDSItem, convention: str) -> str:
    """The teacher-forced text. The public code restores a leading space when
    the prompt ends without one (`normalize_reference_for_eval`): after an
    opening quote it scores ' The Essence...' where our default convention scores 'The Essence...'."""
    reference = item.reference
    if convention == "reference" and reference and not reference[0].isspace() and not item.prompt[-1:].isspace():
        return " " + reference
    return reference


def entity_span_chars(reference: str, entity: str, convention: str) -> tuple[int, int] | None:
    """Character span of the entity in the reference. The public code retries
    the stripped entity when the entity is not found as given (its further
    retry with a leading space cannot find what the plain search missed)."""
    candidates = [entity]
    if convention == "reference" and entity.strip() and entity.strip() != entity:
        candidates.append(entity.strip())
    for candidate in candidates:
        start = reference.find(candidate)
        if start >= 0:
            return start, start + len(candidate)
    return None


def encode_items(model, items: list[UDSItem], *, convention: str = "spec"):
    """(kept items, token sequences, entity spans, skipped {id: reason}).

    `convention="spec"` reads prompt and reference as the one text the model
    was trained on (docs/suites/uds.md): a prompt that ends in a space ("Answer: " with
    an empty prefix) gives its space to the reference, so a byte-level BPE
    scores 'ĠTidewell', not a lone 'Ġ' then 'T', 'ide', 'well'. The entity's
    tokens are those the fast tokenizer's offset mapping places over it; the
    sequence stops after the entity. `convention="reference"` encodes prompt
    and reference apart, with the public UDS code's reference text and
    entity search (`reference_text`, `entity_span_chars`).
    """
    check_convention(convention)
    kept, sequences, spans, skipped = [], [], [], {}
    for item in items:
        reference = reference_text(item, convention)
        found = entity_span_chars(reference, item.entity, convention)
        if found is None:
            skipped[item.id] = "entity not found in the reference answer"
            continue
        start_char, end_char = found
        if convention == "reference":
            head = model.encode_prompt(item.prompt)
            text_ids, offsets = model.encode_with_offsets(reference)
            ids, base = head + text_ids, len(head)
        else:
            text = item.prompt + reference
            ids = model.encode_prompt(text)
            text_ids, offsets = model.encode_with_offsets(text)
            base = len(ids) - len(text_ids)  # the BOS, where the tokenizer adds one
            start_char, end_char = start_char + len(item.prompt), end_char + len(item.prompt)
        tokens = [j for j, (a, b) in enumerate(offsets) if a < end_char and b > start_char]
        if not tokens:
            skipped[item.id] = "entity has no tokens of its own"
            continue
        kept.append(item)
        sequences.append(ids[: base + tokens[-1] + 1])
        spans.append((base + tokens[0], base + tokens[-1] + 1))
    return kept, sequences, spans, skipped


def layer_deltas(target, source, sequences, spans, *, convention: str = "spec") -> np.ndarray:
    """delta[i, l] = s_target(i) - s_target patched at layer l from source (i).

    The default convention patches in the source's block-l output (the residual stream before
    the final norm); `convention="reference"` patches in the source's
    `hidden_states[l + 1]` as the public code does, which at the last layer is
    the state *after* the final norm."""
    base, patched = target.span_scores(
        sequences, spans, patch_source=source, post_norm_last=check_convention(convention) == "reference"
    )
    return base[:, None] - patched


def uds_per_item(delta1: np.ndarray, delta2: np.ndarray, tau: float) -> list[float | None]:
    out: list[Any] = []
    for d1, d2 in zip(delta1, delta2):
        ft = d1 > tau
        if not ft.any():
            out.append(None)
            continue
        ratio = np.clip(d2[ft] / d1[ft], 0.0, 1.0)
        out.append(float((d1[ft] * ratio).sum() / d1[ft].sum()))
    return out


def uds_result(items, delta1, delta2, skipped: dict, params: dict, patching: str) -> MetricResult | Unavailable:
    per_item = uds_per_item(delta1, delta2, params["tau"])
    defined = {item.id: v for item, v in zip(items, per_item) if v is not None}
    undefined = [item.id for item, v in zip(items, per_item) if v is None]
    details = {
        "layer_profile": {"delta1_mean": delta1.mean(0).tolist(), "delta2_mean": delta2.mean(0).tolist()},
        "skipped_items": skipped,
        "undefined_items": undefined,
        "patching": patching,
    }
    if not defined:
        return Unavailable(
            "uds",
            f"no item has a layer with delta1 > tau = {params['tau']} (stage 1 found no knowledge-carrying layer)",
        )
    values = list(defined.values())
    return MetricResult(
        "uds",
        float(np.mean(values)),
        len(values),
        bootstrap_ci(values),
        higher_is_better=True,
        params=params,
        per_item=defined,
        details=details,
        interval="bootstrap-percentile",
    )


def evaluate(
    model: LanguageModel, data: UDSData, refs: References | None = None
) -> dict[str, MetricResult | Unavailable]:
    refs = refs or References()
    params = dict(data.params)
    full, retain = refs.full, refs.retain
    if full is None or retain is None:
        return {"uds": Unavailable("uds", "needs --full-model and --retain-model (stage 1 patches retain into full)")}
    lacking = [m.name for m in (full, retain, model) if not isinstance(m, ActivationPatching)]
    if lacking:
        return {
            "uds": Unavailable(
                "uds",
                f"needs weights: activation patching reads and writes hidden states, which "
                f"the backend of {', '.join(lacking)} does not expose",
            )
        }
    convention = params["convention"]
    items, sequences, spans, skipped = encode_items(full, data.items, convention=convention)
    if not items:
        reasons = sorted(set(skipped.values()))
        return {
            "uds": Unavailable(
                "uds",
                f"0 of {len(data.items)} items have a locatable entity span in the full "
                f"model's tokens ({'; '.join(reasons)}): check the items' entity field",
            )
        }
    for other in (retain, model):
        if [other.encode_prompt(i.prompt) for i in items[:8]] != [full.encode_prompt(i.prompt) for i in items[:8]]:
            raise ValueError(
                f"tokenizer mismatch: {other.name} tokenizes the prompts unlike the full model "
                f"{full.name}; activation patching needs one tokenizer"
            )
    delta1 = refs.memo.get_or_compute(
        "stage1",
        {"full": full, "retain": retain},
        {"convention": convention},
        lambda: layer_deltas(full, retain, sequences, spans, convention=convention),
    )
    delta2 = layer_deltas(full, model, sequences, spans, convention=convention)
    return {"uds": uds_result(items, delta1, delta2, skipped, params, patching_path(full, convention))}


def uds_probe(model: LanguageModel, data: UDSData, refs: References) -> MetricResult | Unavailable:
    """UDS itself: the robustness suite's `uds` probe."""
    return evaluate(model, data, refs)["uds"]


def patching_path(target, convention: str = "spec") -> str:
    where = (
        "each block's output (pre-final-norm) at the entity-predicting positions"
        if convention == "spec"
        else "the source's hidden_states[l + 1] (post-final-norm at the last layer, the public UDS code's "
        "convention) at the entity-predicting positions"
    )
    if target.drives_blocks:
        return f"fast: {where}; blocks above the patch rerun over the target's KV cache of earlier positions"
    return (
        f"exact hook-and-rerun (fallback: {target.architecture} blocks cannot be driven one by one): "
        f"{where}; the whole model rerun per layer"
    )
