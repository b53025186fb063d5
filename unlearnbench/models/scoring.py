"""Teacher-forced scoring for the Hugging Face backend: token log-probs in
float32 (with the vocabulary statistics Min-K%++ needs) and next-token
distributions, over token ids (the handle encodes prompts)."""

from __future__ import annotations

from typing import Collection, Sequence

import numpy as np
import torch

from unlearnbench import progress
from unlearnbench.models.batching import Batcher, pad
from unlearnbench.models.interface import NextToken, TokenScores


class Scorer:
    """Scores token ids with `model` (a causal LM), in batches (`batcher`)."""

    def __init__(self, model: torch.nn.Module, batcher: Batcher, *, pad_id: int, name: str, keeps_logits: bool):
        self.model, self.batcher, self.pad_id, self.name = model, batcher, pad_id, name
        self.keeps_logits = keeps_logits  # the forward takes `logits_to_keep`: only the last position's logits

    @torch.inference_mode()
    def token_logprobs(
        self, sequences: Sequence[Sequence[int]], target_starts: Sequence[int], *, vocab_stats: bool = False,
        masked_ids: Collection[int] = (),
    ) -> list[TokenScores]:
        """Float32 log p(x_t | x_<t) for t in [start, len) of each sequence.

        Tokens whose id is in `masked_ids` are kept out of attention wherever
        they occur (they are still scored): OpenUnlearning's collator does
        this to every pad-id token, and its configs make pad = EOS.
        """
        for seq, start in zip(sequences, target_starts):
            if not 1 <= start <= len(seq):
                raise ValueError(f"target start {start} outside 1..{len(seq)} (the first token has no prediction)")

        def run(batch: list[int]) -> list[TokenScores]:
            ids, mask = (t.to(self.batcher.device) for t in pad([sequences[i] for i in batch], self.pad_id))
            if masked_ids:
                mask = mask * ~torch.isin(ids, torch.tensor(sorted(masked_ids), device=ids.device))
            logits = self.model(input_ids=ids, attention_mask=mask).logits
            out = []
            for row, i in enumerate(batch):
                start, end = target_starts[i], len(sequences[i])
                # Gather only this row's predicting positions before the
                # float32 log-softmax: memory stays at (targets x vocab).
                logp = torch.log_softmax(logits[row, start - 1 : end - 1].float(), dim=-1)
                targets = ids[row, start:end].to(logp.device)
                scores = TokenScores(
                    token_ids=targets.cpu().numpy(),
                    logprobs=logp.gather(-1, targets[:, None])[:, 0].cpu().numpy(),
                    argmax=logp.argmax(-1).cpu().numpy(),
                )
                if vocab_stats:
                    p = logp.exp()
                    mean = (p * logp).sum(-1)
                    # Centred form of E[(log p)^2] - mean^2: same value, no
                    # float32 cancellation.
                    var = (p * (logp - mean[:, None]).square()).sum(-1)
                    scores.vocab_mean = mean.cpu().numpy()
                    scores.vocab_var = var.cpu().numpy()
                out.append(scores)
            return out

        return self.batcher.map([len(s) for s in sequences], run, full_vocab_logits=True)

    @torch.inference_mode()
    def next_token(self, sequences: Sequence[Sequence[int]], columns: Sequence[Sequence[int]] | None = None
                   ) -> NextToken:
        """The float32 next-token distribution after each sequence, reduced to
        what callers need: its entropy (nats), its argmax over the whole
        vocabulary, and log-probs at `columns[i]` (e.g. MCQ label tokens)."""
        if columns is not None and len(columns) != len(sequences):
            raise ValueError(f"{len(columns)} column lists for {len(sequences)} prompts")

        def run(batch: list[int]) -> list[tuple]:
            # Left padding puts every prompt's last token in the last column,
            # so only that column's logits are computed (logits_to_keep).
            ids, mask = (t.to(self.batcher.device) for t in pad([sequences[i] for i in batch], self.pad_id, left=True))
            kwargs = {"logits_to_keep": 1} if self.keeps_logits else {}
            positions = (mask.cumsum(-1) - 1).clamp_min(0)
            logits = self.model(input_ids=ids, attention_mask=mask, position_ids=positions, **kwargs).logits
            logp = torch.log_softmax(logits[:, -1].float().to(ids.device), dim=-1)
            entropy = -(logp.exp() * logp).nansum(-1)
            out = []
            for row, i in enumerate(batch):
                picked = logp[row, list(columns[i])].cpu().numpy() if columns is not None else np.zeros(0, np.float32)
                out.append((picked, float(entropy[row]), int(logp[row].argmax())))
            return out

        with progress.step(f"{self.name}: scoring the next token after {len(sequences)} prompts"):
            rows = self.batcher.map([len(s) for s in sequences], run, full_vocab_logits=not self.keeps_logits)
        return NextToken(
            logprobs=[r[0] for r in rows],
            entropy=np.array([r[1] for r in rows], dtype=np.float64),
            argmax=np.array([r[2] for r in rows], dtype=np.int64),
        )
