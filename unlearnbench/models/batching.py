"""Batching for the Hugging Face backend: the one padding helper, and the
`Batcher` that runs work over length-sorted batches with a batch size that
is fixed or sized by a memory budget (what one row's logits, KV cache and
activations take), halved on a CUDA out-of-memory error should the
estimate fall short."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from unlearnbench import cancel

# What one batch's working memory (beside the weights) may take on CPU by
# default. A fixed amount, not a share of the free memory: batch shapes, and
# so the float rounding of every score, are then the same from run to run.
CPU_BUDGET_BYTES = 1 << 30
# On CUDA the default budget is this share of the memory free before each
# batch (the device's free memory and what torch's allocator holds unused):
# the rest is left to helper models (a sentence embedder, a judge) and to
# fragmentation.
CUDA_FREE_SHARE = 0.8
# A small model's step costs about the same for 1 row as for hundreds
# (per-call overhead): the budget, not a small cap, limits its batches.
MAX_BATCH = 256
# Generation runs a prompt's uncached tokens through the model this many
# positions at a time (its KV cache growing between chunks): a long prompt's
# activations are then a chunk's, while its batch is sized by the KV cache.
PREFILL_CHUNK_TOKENS = 256


def pad(
    sequences: Sequence[Sequence[int]], pad_id: int, *, left: bool = False, head: Sequence[int] = ()
) -> tuple[torch.Tensor, torch.Tensor]:
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
    """Runs a model's work in batches. A batch is sized by the memory one row
    takes against `memory_budget` (bytes; None: CPU_BUDGET_BYTES on CPU,
    CUDA_FREE_SHARE of the free memory on CUDA): the logits of every position
    over the whole vocabulary (`vocab_size`) where the whole forward's logits
    are kept, or one logit row per sequence (generation, scoring that reduces
    them in chunks), plus the KV cache and one layer's activations; at most
    MAX_BATCH rows. Should a CUDA batch still run out of memory, the size
    halves, and the smaller size is kept for the rest of the model's life."""

    def __init__(
        self,
        *,
        device: torch.device,
        vocab_size: int,
        fixed_batch_size: int | None = None,
        memory_budget: int | None = None,
        kv_bytes_per_token: int = 0,
        activation_bytes_per_token: int = 0,
    ):
        self.device, self.vocab_size, self.fixed_batch_size = device, vocab_size, fixed_batch_size
        self.memory_budget = memory_budget
        self.kv_bytes_per_token = kv_bytes_per_token
        # One layer's transient activations per token: with the float32
        # [length, length] attention mask of each row, what a forward holds
        # besides the logits once they are reduced in chunks
        # (scoring.LOGITS_CHUNK_BYTES); scaled dot-product attention does not
        # hold the scores of every head.
        self.activation_bytes_per_token = activation_bytes_per_token
        self.cap = MAX_BATCH

    def budget(self) -> int:
        """The bytes one batch's working memory may take now."""
        if self.memory_budget is not None:
            return self.memory_budget
        if self.device.type == "cuda":
            free, _total = torch.cuda.mem_get_info(self.device)
            idle = torch.cuda.memory_reserved(self.device) - torch.cuda.memory_allocated(self.device)
            return int(CUDA_FREE_SHARE * (free + idle))
        return CPU_BUDGET_BYTES

    def size(self, seq_len: int, full_vocab_logits: bool, *, chunked_prefill: bool = False) -> int:
        """Rows per batch for sequences of `seq_len` tokens; `chunked_prefill`:
        a forward sees at most PREFILL_CHUNK_TOKENS of them at once."""
        if self.fixed_batch_size:
            return self.fixed_batch_size
        logits = seq_len * self.vocab_size * 4 * 3 if full_vocab_logits else self.vocab_size * 4 * 3
        at_once = min(seq_len, PREFILL_CHUNK_TOKENS) if chunked_prefill else seq_len
        per_row = (
            logits
            + seq_len * self.kv_bytes_per_token
            + at_once * self.activation_bytes_per_token
            + at_once * seq_len * 4
        )
        return int(max(1, min(self.cap, self.budget() // max(per_row, 1))))

    def map(
        self,
        lengths: Sequence[int],
        run: Callable[[list[int]], list],
        *,
        full_vocab_logits: bool,
        extra: int = 0,
        cap: int | None = None,
        priority: Sequence | None = None,
        chunked_prefill: bool = False,
    ) -> list:
        """Run `run(indices)` over length-sorted batches (or sorted by
        `priority`, largest first); results in input order. `extra` tokens
        are added to each row's length when sizing (generated tokens)."""
        order = sorted(
            range(len(lengths)), key=lambda i: priority[i] if priority is not None else lengths[i], reverse=True
        )
        results: list = [None] * len(lengths)
        pos = 0
        while pos < len(order):
            cancel.check()  # Ctrl-C or the checkpoint's deadline: stop between batches
            size = min(
                self.size(lengths[order[pos]] + extra, full_vocab_logits, chunked_prefill=chunked_prefill),
                cap or self.cap,
            )
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
