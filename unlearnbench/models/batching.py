"""Batching for the Hugging Face backend: length-sorted batches, padding, and
the batch size (a fixed one, a CPU memory budget for the logits, or halving
on a CUDA out-of-memory error). A mixin of `ModelHandle`."""

from __future__ import annotations

from typing import Callable, Sequence

import torch

from unlearnbench import cancel

# CPU has no OOM signal we can catch, so auto batching there budgets the
# float32 logits (+ log-softmax + probabilities) of one batch up front.
CPU_LOGITS_BUDGET_BYTES = 1 << 30
MAX_AUTO_BATCH = 64


class Batching:
    def _batch_size(self, seq_len: int, full_vocab_logits: bool) -> int:
        if self.fixed_batch_size:
            return self.fixed_batch_size
        if self.device.type == "cuda":
            return self._batch_cap
        per_row = seq_len * (self.vocab_size if full_vocab_logits else 1) * 4 * 3
        return int(max(1, min(self._batch_cap, CPU_LOGITS_BUDGET_BYTES // max(per_row, 1))))

    def _map_batches(
        self,
        lengths: Sequence[int],
        run: Callable[[list[int]], list],
        *,
        full_vocab_logits: bool,
        extra: int = 0,
        cap: int | None = None,
        priority: Sequence | None = None,
    ) -> list:
        """Run `run(indices)` over length-sorted batches (or sorted by
        `priority`, largest first); results in input order.

        On a CUDA out-of-memory error the batch is halved and retried, and the
        smaller size is kept for the rest of this handle's life.
        """
        order = sorted(range(len(lengths)), key=lambda i: priority[i] if priority is not None else lengths[i],
                       reverse=True)
        results: list = [None] * len(lengths)
        pos = 0
        while pos < len(order):
            cancel.check()  # Ctrl-C or the checkpoint's deadline: stop between batches
            size = min(self._batch_size(lengths[order[pos]] + extra, full_vocab_logits), cap or MAX_AUTO_BATCH)
            batch = order[pos : pos + size]
            try:
                outputs = run(batch)
            except torch.cuda.OutOfMemoryError:
                if len(batch) == 1 or self.fixed_batch_size:
                    raise
                torch.cuda.empty_cache()
                self._batch_cap = max(1, len(batch) // 2)
                continue
            for i, out in zip(batch, outputs):
                results[i] = out
            pos += len(batch)
        return results

    def _pad_right(self, sequences: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        width = max(len(s) for s in sequences)
        ids = torch.full((len(sequences), width), self.tokenizer.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(sequences), width), dtype=torch.long)
        for row, seq in enumerate(sequences):
            ids[row, : len(seq)] = torch.tensor(seq, dtype=torch.long)
            mask[row, : len(seq)] = 1
        return ids.to(self.device), mask.to(self.device)

    def _pad_left(self, sequences: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        width = max(len(s) for s in sequences)
        ids = torch.full((len(sequences), width), self.tokenizer.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(sequences), width), dtype=torch.long)
        for row, seq in enumerate(sequences):
            ids[row, width - len(seq) :] = torch.tensor(seq, dtype=torch.long)
            mask[row, width - len(seq) :] = 1
        return ids.to(self.device), mask.to(self.device)

