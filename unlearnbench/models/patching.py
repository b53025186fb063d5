"""Capture and patching of decoder-block outputs (the residual stream before
the final norm) for the Hugging Face backend: the `ActivationPatching`
capability UDS needs, over token ids."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch

from unlearnbench import progress
from unlearnbench.errors import CheckpointError
from unlearnbench.models.batching import Batcher, pad
from unlearnbench.models.interface import SpanScores

# Layer containers of the architectures we know by name; anything else is
# found by shape (a ModuleList with one entry per hidden layer).
BLOCK_PATHS = ("model.layers", "transformer.h", "gpt_neox.layers", "model.decoder.layers", "transformer.blocks")
# Decoder stacks whose upper blocks `span_scores` can rerun alone (tested).
DRIVABLE_MODEL_TYPES = ("llama", "qwen2", "mistral")
FAST_PATCH_BATCH = 8


class Patcher:
    """Reads and replaces the outputs of `model`'s decoder blocks."""

    def __init__(
        self, model: torch.nn.Module, batcher: Batcher, *, pad_id: int, name: str, cache_kwarg: str, keeps_logits: bool
    ):
        # A Hugging Face model: its config and submodules are attributes torch's stubs cannot type.
        self.model: Any = model
        self.batcher, self.pad_id, self.name = batcher, pad_id, name
        self.cache_kwarg = cache_kwarg  # the forward's KV-cache argument ("past_key_values" or "cache")
        # Passes read for their hidden states alone skip the output head (a vocabulary-wide
        # product at every position) where the forward takes `logits_to_keep`.
        self.head_skipped = {"logits_to_keep": 1} if keeps_logits else {}
        self.blocks = find_decoder_blocks(model)

    @property
    def num_layers(self) -> int:
        return len(self.blocks)

    @property
    def device(self) -> torch.device:
        return self.batcher.device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype

    @contextlib.contextmanager
    def _block_hook(self, layer: int, hook) -> Iterator[None]:
        handle = self.blocks[layer].register_forward_hook(hook)
        try:
            yield
        finally:
            handle.remove()

    @torch.inference_mode()
    def block_outputs(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, *, post_norm_last: bool = False
    ) -> torch.Tensor:
        """Every decoder block's output, [layers, batch, seq, hidden].

        Captured with hooks on the blocks, so the last entry is the residual
        stream *before* the final norm (unlike `hidden_states[-1]`); with
        `post_norm_last` it is `hidden_states[-1]`, after the final norm (the
        public UDS code's replacement).
        """
        captured: list[torch.Tensor] = []

        def hook(_module, _args, output):
            captured.append(_block_tensor(output))

        with contextlib.ExitStack() as stack:
            for layer in range(self.num_layers):
                stack.enter_context(self._block_hook(layer, hook))
            out = self.model(
                input_ids=input_ids.to(self.device),
                attention_mask=attention_mask.to(self.device),
                output_hidden_states=post_norm_last,
                **self.head_skipped,
            )
        if post_norm_last:
            captured[-1] = out.hidden_states[-1]
        return torch.stack([c.to(self.device) for c in captured])

    @torch.inference_mode()
    def forward_with_patch(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        *,
        layer: int,
        positions: torch.Tensor,
        replacement: torch.Tensor,
    ) -> torch.Tensor:
        """Float32 logits with block `layer`'s output replaced where `positions` is True.

        `positions` is a [batch, seq] bool mask, `replacement` a [batch, seq,
        hidden] tensor (e.g. another model's `block_outputs(...)[layer]`).
        """
        where = positions[..., None]
        source = replacement.to(dtype=self.dtype)

        def hook(_module, _args, output):
            block = _block_tensor(output)  # on this block's own device under a device map
            patched = torch.where(where.to(block.device), source.to(block.device), block)
            return (patched, *output[1:]) if isinstance(output, tuple) else patched

        with self._block_hook(layer, hook):
            logits = self.model(
                input_ids=input_ids.to(self.device), attention_mask=attention_mask.to(self.device)
            ).logits
        return logits.float()

    @property
    def drives_blocks(self) -> bool:
        """Whether the upper decoder blocks can be rerun alone over a KV cache
        (Llama-style stacks: `model.layers`, `model.norm`, rotary positions)."""
        inner = getattr(self.model, "model", None)
        return (
            self.model.config.model_type in DRIVABLE_MODEL_TYPES
            and inner is not None
            and self.blocks is getattr(inner, "layers", None)
            and hasattr(inner, "norm")
        )

    def span_scores(
        self,
        sequences: Sequence[Sequence[int]],
        spans: Sequence[tuple[int, int]],
        *,
        patch_source=None,
        exact: bool = False,
        post_norm_last: bool = False,
    ) -> SpanScores:
        """Mean teacher-forced log-prob of tokens [start, end) of each sequence.

        With `patch_source` (another model's Patcher, same tokenizer), also the same
        score after replacing this model's block-l output with the source's at
        the span-predicting positions (start-1 .. end-2), for every layer l:
        returns (scores [n], patched [n, layers]). One source pass per batch
        captures every layer's output (`post_norm_last`: see `block_outputs`).

        Fast path (`drives_blocks`, unless `exact`): layers below l are
        unchanged by a patch at l, and so is every position before the first
        patched one; so the target's own pass supplies block l's output and the
        KV cache of those positions, and only blocks l+1..L run, only on the
        positions from the first patched one on. Exact path: hook block l and
        rerun the whole model.
        """
        fast = patch_source is not None and self.drives_blocks and not exact

        def mean_span_logprob(logits: torch.Tensor, ids: torch.Tensor, batch: list[int], offset: int = 0):
            out = []
            for row, i in enumerate(batch):
                start, end = spans[i]
                logp = torch.log_softmax(logits[row, start - 1 - offset : end - 1 - offset].float(), dim=-1)
                out.append(float(logp.gather(-1, ids[row, start:end, None].to(logp.device)).mean()))
            return np.array(out)

        @torch.inference_mode()
        def run(batch: list[int]) -> list[tuple[float, np.ndarray | None]]:
            ids, mask = (t.to(self.device) for t in pad([sequences[i] for i in batch], self.pad_id))
            if patch_source is None:
                base = mean_span_logprob(self.model(input_ids=ids, attention_mask=mask).logits, ids, batch)
                return [(b, None) for b in base]
            positions = torch.zeros_like(ids, dtype=torch.bool)
            for row, i in enumerate(batch):
                positions[row, spans[i][0] - 1 : spans[i][1] - 1] = True
            source = patch_source.block_outputs(ids, mask, post_norm_last=post_norm_last)
            if fast:
                base, patched = self._fast_patched(ids, mask, positions, source, batch, spans)
            else:
                base = mean_span_logprob(self.model(input_ids=ids, attention_mask=mask).logits, ids, batch)
                patched = np.stack(
                    [
                        mean_span_logprob(
                            self.forward_with_patch(
                                ids, mask, layer=layer, positions=positions, replacement=source[layer]
                            ),
                            ids,
                            batch,
                        )
                        for layer in range(self.num_layers)
                    ],
                    axis=1,
                )
            return list(zip(base, patched))

        # Fast path: small batches sorted by span length (then length): each
        # rerun covers a batch's longest span in every row, and the reruns, not
        # the two whole passes, are most of the cost.
        what = f"patching {self.num_layers} layers from {patch_source.name}" if patch_source is not None else "scoring"
        with progress.step(f"{self.name}: {what} over {len(sequences)} items"):
            results = self.batcher.map(
                [len(s) for s in sequences],
                run,
                full_vocab_logits=True,
                cap=FAST_PATCH_BATCH if fast else None,
                priority=[(end - start, len(s)) for s, (start, end) in zip(sequences, spans)] if fast else None,
            )
        base = np.array([r[0] for r in results])
        return SpanScores(base, np.stack([r[1] for r in results]) if patch_source is not None else None)

    def _fast_patched(self, ids, mask, positions, source, batch, spans):
        """Base and per-layer patched span scores, rerunning only what a patch changes.

        Row r's patch changes nothing before its first span-predicting position
        p_r = start_r - 1, and only positions p_r .. end_r - 2 are scored. So
        each rerun covers, per row, just that window (the span's length), over
        the target's own KV cache of positions < p_r. The rows' caches are
        shifted to end at one column M = max p_r (left-padded, masked): cached
        keys carry their rotary positions already, and the window's queries get
        their true positions, so the shift changes no value; the rerun's cost
        is the spans' lengths, not the batch's longest tail.
        """
        inner = self.model.model
        captured: list[torch.Tensor] = []
        hooks = [b.register_forward_hook(lambda _m, _a, out: captured.append(_block_tensor(out))) for b in self.blocks]
        try:
            out = self.model(input_ids=ids, attention_mask=mask, use_cache=True, **self.head_skipped)
        finally:
            for h in hooks:
                h.remove()
        full_cache = getattr(out, self.cache_kwarg)

        starts = torch.tensor([spans[i][0] - 1 for i in batch], device=ids.device)  # p_r
        lengths = torch.tensor([spans[i][1] - spans[i][0] for i in batch], device=ids.device)
        shift, width = int(starts.max()), int(lengths.max())
        offsets = torch.arange(width, device=ids.device)
        window = (starts[:, None] + offsets).clamp_max(ids.shape[1] - 1)  # [rows, width] positions
        scored = offsets[None] < lengths[:, None]  # the window's real (span-predicting) positions
        prefix_columns = torch.arange(shift, device=ids.device)[None] - (shift - starts[:, None])  # [rows, M]
        attention = torch.cat([(prefix_columns >= 0).long(), scored.long()], dim=1)
        targets = torch.cat([ids[row, spans[i][0] : spans[i][1]] for row, i in enumerate(batch)])
        counts = lengths.tolist()
        shifted = self._shift_cache(full_cache, prefix_columns)
        rows = len(batch)

        def patch_input(layer: int) -> torch.Tensor:
            """Block `layer`'s output with the source's at the patched positions, over the window."""
            block = captured[layer]  # on block `layer`'s own device under a device map
            hidden = torch.where(
                positions[..., None].to(block.device), source[layer].to(block.device, self.dtype), block
            )
            return hidden.gather(1, window.to(block.device)[..., None].expand(-1, -1, hidden.shape[-1]))

        # The patch at layer 0 runs blocks 1.. through the model's own forward (its
        # masks and rotary code apply), and each block's arguments are kept. Every
        # other patch then reuses them: the patches at layers below k go through
        # block k together, stacked along the batch, so each block runs once per
        # batch rather than once per patch below it (the same sums, in far fewer
        # and larger calls).
        layers, arguments = inner.layers, {}

        def keep(index: int):
            def hook(_module, _args, kwargs):
                arguments[index] = kwargs

            return hook

        hooks = [layers[k].register_forward_pre_hook(keep(k), with_kwargs=True) for k in range(1, self.num_layers)]
        try:
            inner.layers = layers[1:]
            finals = [
                inner(
                    inputs_embeds=patch_input(0),
                    attention_mask=attention,
                    position_ids=window,
                    use_cache=True,
                    **{self.cache_kwarg: self._cache_of(shifted)},
                ).last_hidden_state
            ]
        finally:
            inner.layers = layers
            for hook in hooks:
                hook.remove()
        stack = None  # the patches at layers 1..k-1, patch by patch, each `rows` rows
        for k in range(2, self.num_layers):
            fresh = patch_input(k - 1)  # the patch at layer k-1 starts at block k
            device = captured[k].device
            stack = fresh.to(device) if stack is None else torch.cat([stack.to(device), fresh.to(device)])
            copies = stack.shape[0] // rows
            kwargs = {name: _stacked(value, rows, copies) for name, value in arguments[k].items()}
            keys, values = shifted[k]
            kwargs[self.cache_kwarg] = self._cache_of(
                {k: (keys.repeat(copies, 1, 1, 1), values.repeat(copies, 1, 1, 1))}
            )
            out = layers[k](stack, **kwargs)
            stack = out[0] if isinstance(out, tuple) else out
        if stack is not None:
            finals += [inner.norm(h) for h in stack.split(rows)]
        if self.num_layers > 1:
            finals.append(inner.norm(patch_input(self.num_layers - 1)))
        # The unpatched score from the target's own last block, through the final norm
        # and the head at the scored positions only, as the model's own pass computes it.
        last = captured[-1]
        finals.append(inner.norm(last.gather(1, window.to(last.device)[..., None].expand(-1, -1, last.shape[-1]))))
        scores = []
        for hidden in finals:
            logp = torch.log_softmax(self.model.lm_head(hidden[scored.to(hidden.device)]).float(), dim=-1)
            token_logp = logp.gather(-1, targets[:, None].to(logp.device))[:, 0]
            scores.append(np.array([float(chunk.mean()) for chunk in token_logp.split(counts)]))
        return scores[-1], np.stack(scores[:-1], axis=1)

    @staticmethod
    def _shift_cache(cache, prefix_columns: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Every layer's keys and values with row r's first p_r positions
        right-aligned in M columns (column c holds position c - (M - p_r);
        the columns before are masked padding)."""
        index = prefix_columns.clamp_min(0)
        shifted = []
        for layer in cache.layers:
            where = index.to(layer.keys.device)[:, None, :, None].expand(
                -1, layer.keys.shape[1], -1, layer.keys.shape[-1]
            )
            shifted.append((layer.keys.gather(2, where), layer.values.gather(2, where)))
        return shifted

    def _cache_of(
        self, shifted: list[tuple[torch.Tensor, torch.Tensor]] | dict[int, tuple[torch.Tensor, torch.Tensor]]
    ):
        """A fresh KV cache over the shifted prefix, of every layer (a list) or of
        the layers given (a dict by index): a rerun appends to its own copy; the
        shifted tensors are shared, never written."""
        from transformers import DynamicCache

        prefix = DynamicCache(config=self.model.config)
        for index, (keys, values) in shifted.items() if isinstance(shifted, dict) else enumerate(shifted):
            prefix.update(keys, values, index)
        return prefix


def _block_tensor(output) -> torch.Tensor:
    return output[0] if isinstance(output, tuple) else output


def _stacked(value, rows: int, copies: int):
    """A decoder block's argument for `copies` stacked copies of a batch of `rows`
    rows: per-row tensors (batch first, as masks, positions and rotary tables
    are) repeated along the batch; anything else as it is."""
    if isinstance(value, tuple):
        return tuple(_stacked(v, rows, copies) for v in value)
    if isinstance(value, torch.Tensor) and value.dim() >= 2 and value.shape[0] == rows and copies > 1:
        return value.repeat(copies, *([1] * (value.dim() - 1)))
    return value


def find_decoder_blocks(model: Any) -> torch.nn.ModuleList:
    """The decoder blocks, in order, for Llama/Qwen2/Mistral/GPT-2/NeoX-style models."""
    config = model.config
    n_layers = getattr(config, "num_hidden_layers", None) or getattr(config, "n_layer", None)
    for path in BLOCK_PATHS:
        module: Any = model
        for part in path.split("."):
            module = getattr(module, part, None)
            if module is None:
                break
        if isinstance(module, torch.nn.ModuleList) and (n_layers is None or len(module) == n_layers):
            return module
    candidates = [
        name
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.ModuleList) and n_layers is not None and len(module) == n_layers
    ]
    if len(candidates) == 1:
        blocks: torch.nn.ModuleList = model.get_submodule(candidates[0])
        return blocks
    raise CheckpointError(
        type(model).__name__,
        f"cannot find the decoder blocks: expected one ModuleList of {n_layers} layers, found {candidates or 'none'}",
    )
