"""Batching for the Hugging Face backend: the one padding helper, and the
`Batcher` that runs work over length-sorted batches with a batch size that
is fixed, budgeted (CPU: the logits' and the KV cache's memory), or halved
on a CUDA out-of-memory error."""

from __future__ import annotations

from typing import Callable, Sequence

import torch

from unlearnbench import cancel

# CPU has no OOM signal we can catch, so auto batching there budgets the
# float32 logits (+ log-softmax + probabilities) and the KV cache of one
# batch up front.
CPU_LOGITS_BUDGET_BYTES = 1 << 30
MAX_AUTO_BATCH = 64  # CUDA's first try
# On CPU a small model's step costs about the same for 1 row as for hundreds
# (per-call overhead): the budget, not a fixed cap, limits its batches.
MAX_CPU_BATCH = 256
# Generation runs a prompt's uncached tokens through the model this many
# positions at a time (its KV cache growing between chunks): a long prompt's
# activations are then a chunk's, while its batch is sized by the KV cache.
PREFILL_CHUNK_TOKENS = 256


def pad(sequences: Sequence[Sequence[int]], pad_id: int, *, left: bool = False,
        head: Sequence[int] = ()) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, attention mask), CPU tensors of [len(sequences), len(head) + the
    longest]: each row is `head`, then its sequence padded with `pad_id` on
    the right (or, `left`, on the left: between the head and the sequence,
    where a reused prompt-prefix cache puts it), padding masked out."""
    width = len(head) + max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    if head:
        ids[:, : len(head)] = torch.tensor(list(head), dtype=torch.long)
        mask[:, : len(head)] = 1
    for row, seq in enumerate(sequences):
        start = width - len(seq) if left else len(head)
        ids[row, start : start + len(seq)] = torch.tensor(list(seq), dtype=torch.long)
        mask[row, start : start + len(seq)] = 1
    return ids, mask


class Batcher:
    """Runs a model's work in batches. On CPU a batch is sized by the memory
    one row takes: the logits of every position over the whole vocabulary
    (`vocab_size`) where the whole forward's logits are kept, or one logit
    row per sequence (generation, scoring that reduces them in chunks), plus
    the KV cache and one layer's activations; at most MAX_CPU_BATCH rows. On CUDA the size starts at MAX_AUTO_BATCH and halves
    on out-of-memory, and the smaller size is kept for the rest of the
    model's life."""

    def __init__(self, *, device: torch.device, vocab_size: int, fixed_batch_size: int | None = None,
                 kv_bytes_per_token: int = 0, activation_bytes_per_token: int = 0):
        self.device, self.vocab_size, self.fixed_batch_size = device, vocab_size, fixed_batch_size
        self.kv_bytes_per_token = kv_bytes_per_token
        # One layer's transient activations per token: with the float32
        # [length, length] attention mask of each row, what a forward holds
        # besides the logits once they are reduced in chunks
        # (scoring.LOGITS_CHUNK_BYTES); scaled dot-product attention does not
        # hold the scores of every head.
        self.activation_bytes_per_token = activation_bytes_per_token
        self.cap = MAX_AUTO_BATCH if device.type == "cuda" else MAX_CPU_BATCH

    def size(self, seq_len: int, full_vocab_logits: bool, *, chunked_prefill: bool = False) -> int:
        """Rows per batch for sequences of `seq_len` tokens; `chunked_prefill`:
        a forward sees at most PREFILL_CHUNK_TOKENS of them at once."""
        if self.fixed_batch_size:
            return self.fixed_batch_size
        if self.device.type == "cuda":
            return self.cap
        logits = seq_len * self.vocab_size * 4 * 3 if full_vocab_logits else self.vocab_size * 4 * 3
        at_once = min(seq_len, PREFILL_CHUNK_TOKENS) if chunked_prefill else seq_len
        per_row = (logits + seq_len * self.kv_bytes_per_token + at_once * self.activation_bytes_per_token
                   + at_once * seq_len * 4)
        return int(max(1, min(self.cap, CPU_LOGITS_BUDGET_BYTES // max(per_row, 1))))

    def map(self, lengths: Sequence[int], run: Callable[[list[int]], list], *, full_vocab_logits: bool,
            extra: int = 0, cap: int | None = None, priority: Sequence | None = None,
            chunked_prefill: bool = False) -> list:
        """Run `run(indices)` over length-sorted batches (or sorted by
        `priority`, largest first); results in input order. `extra` tokens
        are added to each row's length when sizing (generated tokens)."""
        order = sorted(range(len(lengths)), key=lambda i: priority[i] if priority is not None else lengths[i],
                       reverse=True)
        results: list = [None] * len(lengths)
        pos = 0
        while pos < len(order):
            cancel.check()  # Ctrl-C or the checkpoint's deadline: stop between batches
            size = min(self.size(lengths[order[pos]] + extra, full_vocab_logits, chunked_prefill=chunked_prefill),
                       cap or self.cap)
            batch = order[pos : pos + size]
            try:
                outputs = run(batch)
            except torch.cuda.OutOfMemoryError:
                if len(batch) == 1 or self.fixed_batch_size:
                    raise
                torch.cuda.empty_cache()
                self.cap = max(1, len(batch) // 2)
                continue
            for i, out in zip(batch, outputs):
                results[i] = out
            pos += len(batch)
        return results
