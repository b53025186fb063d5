"""Teacher-forced scoring for the Hugging Face backend: token log-probs in
float32 (with the vocabulary statistics Min-K%++ needs) and next-token
distributions, over token ids (the handle encodes prompts)."""

from __future__ import annotations

import functools
import inspect
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from typing import Any

import numpy as np
import torch

from unlearnbench import progress
from unlearnbench.models.batching import Batcher, pad
from unlearnbench.models.interface import NextToken, TokenScores

# What one chunk of scored positions may hold of float32 logits over the
# vocabulary (with their log-softmax and probabilities beside them): at a
# 128k vocabulary 43 positions, whatever the batch and its lengths.
LOGITS_CHUNK_BYTES = 64 << 20


class Scorer:
    """Scores token ids with `model` (a causal LM), in batches (`batcher`)."""

    def __init__(
        self,
        model: torch.nn.Module,
        batcher: Batcher,
        *,
        pad_id: int,
        name: str,
        keeps_logits: bool,
        finite_check: Callable[[torch.Tensor], None] | None = None,
    ):
        # A Hugging Face model: its config and submodules are attributes torch's stubs cannot type.
        self.model: Any = model
        self.batcher, self.pad_id, self.name = batcher, pad_id, name
        self.keeps_logits = keeps_logits  # the forward takes `logits_to_keep`: only the last position's logits
        self.finite_check = finite_check  # raises on NaN / inf logits (the forward hook sees no logits here)
        self.share_prefixes = True  # run a context several sequences share once (off only to measure what it saves)

    @torch.inference_mode()
    def token_logprobs(
        self,
        sequences: Sequence[Sequence[int]],
        target_starts: Sequence[int],
        *,
        vocab_stats: bool = False,
        masked_ids: Collection[int] = (),
    ) -> list[TokenScores]:
        """Float32 log p(x_t | x_<t) for t in [start, len) of each sequence.

        Tokens whose id is in `masked_ids` are kept out of attention wherever
        they occur (they are still scored): OpenUnlearning's collator does
        this to every pad-id token, and its configs make pad = EOS.

        Where the model's logits are its output embedding of its body's last
        hidden state (`_split`), the body runs over the batch and the
        head only over the scored positions, LOGITS_CHUNK_BYTES at a time:
        what leaves a chunk is a gather, an argmax and two moments per
        position, never the [batch, length, vocab] logits. There, too,
        sequences that share their context (a question's answer, paraphrase
        and perturbed answers; a multiple-choice question's options) run the
        context once (`_shared_prefix_hidden`).
        """
        for seq, start in zip(sequences, target_starts):
            if not 1 <= start <= len(seq):
                raise ValueError(f"target start {start} outside 1..{len(seq)} (the first token has no prediction)")
        split = self._split if sequences else None
        masked = torch.tensor(sorted(masked_ids), dtype=torch.long) if masked_ids else None

        def attended(ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            return mask * ~torch.isin(ids, masked.to(ids.device)) if masked is not None else mask

        def scores_of(
            batch: list[int],
            ids: torch.Tensor,
            starts: list[int],
            *,
            hidden: torch.Tensor | None = None,
            logits: torch.Tensor | None = None,
        ) -> list[TokenScores]:
            """The scores of `batch`'s rows of `ids`, row r predicting its
            targets from position starts[r] - 1 on, from the body's last
            `hidden` states (the head applied in chunks) or the whole `logits`."""
            rows = torch.cat(
                [
                    torch.full((len(sequences[i]) - target_starts[i],), row, dtype=torch.long)
                    for row, i in enumerate(batch)
                ]
            ).to(ids.device)
            positions = torch.cat(
                [
                    torch.arange(start - 1, start - 1 + len(sequences[i]) - target_starts[i])
                    for start, i in zip(starts, batch)
                ]
            ).to(ids.device)
            if hidden is not None:
                assert split is not None  # hidden states come from the body of a split model
                predicting, head = hidden[rows.to(hidden.device), positions.to(hidden.device)], split[1]
                del hidden  # only the predicting positions' states stay while the head runs

                def logits_of(a: int, b: int) -> torch.Tensor:
                    return head(predicting[a:b])
            else:
                assert logits is not None  # one of the two is given
                whole = logits

                def logits_of(a: int, b: int) -> torch.Tensor:
                    return whole[rows[a:b], positions[a:b]]

            reduced = _reduce_chunks(
                logits_of,
                ids[rows, positions + 1],
                self.batcher.vocab_size,
                vocab_stats,
                self.finite_check if split else None,
            )
            out, offset = [], 0
            for i in batch:
                end = offset + len(sequences[i]) - target_starts[i]
                part = {key: values[offset:end] for key, values in reduced.items()}
                scores = TokenScores(token_ids=part["token_ids"], logprobs=part["logprobs"], argmax=part["argmax"])
                if vocab_stats:
                    scores.vocab_mean, scores.vocab_var = part["vocab_mean"], part["vocab_var"]
                out.append(scores)
                offset = end
            return out

        def run(batch: list[int]) -> list[TokenScores]:
            ids, mask = (t.to(self.batcher.device) for t in pad([sequences[i] for i in batch], self.pad_id))
            mask = attended(ids, mask)
            starts = [target_starts[i] for i in batch]
            if split:
                return scores_of(
                    batch,
                    ids,
                    starts,
                    hidden=split[0](input_ids=ids, attention_mask=mask, use_cache=False).last_hidden_state,
                )
            return scores_of(batch, ids, starts, logits=self.model(input_ids=ids, attention_mask=mask).logits)

        def run_shared(batch: list[int]) -> list[TokenScores]:
            assert split is not None  # contexts are shared only where the model splits into body and head
            heads = {c: k for k, c in enumerate(dict.fromkeys(prefix_of[i] for i in batch))}
            group = torch.tensor([heads[prefix_of[i]] for i in batch], dtype=torch.long)
            # Each row from its context's last token on: that token predicts the first target.
            tails = [list(sequences[i][target_starts[i] - 1 :]) for i in batch]
            return scores_of(
                batch,
                pad(tails, self.pad_id)[0].to(self.batcher.device),
                [1] * len(batch),
                hidden=self._shared_prefix_hidden(split[0], [list(h) for h in heads], group, tails, attended),
            )

        # A context (all but its last token: that one predicts the first
        # target) shared by several sequences is run once for them.
        contexts = [tuple(seq[: start - 1]) for seq, start in zip(sequences, target_starts)]
        sharers = Counter(contexts)
        prefix_of = (
            {i: c for i, c in enumerate(contexts) if c and sharers[c] > 1} if split and self.share_prefixes else {}
        )
        alone = [i for i in range(len(sequences)) if i not in prefix_of]
        shared = list(prefix_of)
        results: list = [None] * len(sequences)
        for i, scores in zip(
            alone,
            self.batcher.map(
                [len(sequences[i]) for i in alone], lambda b: run([alone[k] for k in b]), full_vocab_logits=not split
            ),
        ):
            results[i] = scores
        longest: dict[tuple, int] = {}
        for i in shared:
            longest[prefix_of[i]] = max(longest.get(prefix_of[i], 0), len(sequences[i]))
        order = {c: k for k, c in enumerate(longest)}
        # A context's sequences run together, sized by its longest; the longest first.
        for i, scores in zip(
            shared,
            self.batcher.map(
                [longest[prefix_of[i]] for i in shared],
                lambda b: run_shared([shared[k] for k in b]),
                full_vocab_logits=False,
                priority=[(longest[prefix_of[i]], -order[prefix_of[i]]) for i in shared],
            ),
        ):
            results[i] = scores
        return results

    def _shared_prefix_hidden(
        self,
        body: torch.nn.Module,
        heads: list[list[int]],
        group: torch.Tensor,
        tails: list[list[int]],
        attended: Callable,
    ) -> torch.Tensor:
        """The body's last hidden states over `tails[r]`, each row continuing
        the context `heads[group[r]]`: every context is run once (right-padded,
        the padding masked out of what follows it), its KV cache copied to
        its rows, and the rows run from their context's length on, so the
        positions, the attention and the masked tokens are those of the
        whole sequence run at once."""
        device = self.batcher.device
        head_ids, head_mask = (t.to(device) for t in pad(heads, self.pad_id))
        head_mask = attended(head_ids, head_mask)
        # The forward's KV-cache argument and output: `cache` in recent transformers, `past_key_values` before.
        cache_kwarg = "cache" if "cache" in inspect.signature(body.forward).parameters else "past_key_values"
        cache = getattr(body(input_ids=head_ids, attention_mask=head_mask, use_cache=True), cache_kwarg)
        group = group.to(device)
        cache.batch_select_indices(group)
        ids, mask = (t.to(device) for t in pad(tails, self.pad_id))
        lengths = torch.tensor([len(h) for h in heads], dtype=torch.long, device=device)[group]
        positions = lengths[:, None] + torch.arange(ids.shape[1], device=device)[None]
        full_mask = torch.cat([head_mask[group], attended(ids, mask)], dim=1)
        return body(
            input_ids=ids, attention_mask=full_mask, position_ids=positions, use_cache=True, **{cache_kwarg: cache}
        ).last_hidden_state

    @functools.cached_property
    def _split(self) -> tuple | None:
        """(body, head) where the model's logits are `head(body(...).last_hidden_state)`;
        None where something else happens between them (Gemma 2's soft-capping,
        Cohere's logit scale) or the model has no such parts. Checked once, on
        the model's own forward of 16 token ids, not assumed from the
        architecture."""
        body, head = getattr(self.model, "base_model", None), self.model.get_output_embeddings()
        if body is None or body is self.model or head is None:
            return None
        ids = torch.arange(1, 17, dtype=torch.long, device=self.batcher.device)[None] % self.batcher.vocab_size
        mask = torch.ones_like(ids)
        whole = self.model(input_ids=ids, attention_mask=mask).logits.float()
        try:
            parts = head(body(input_ids=ids, attention_mask=mask, use_cache=False).last_hidden_state).float()
        except TypeError:  # a body that takes other arguments
            return None
        same = parts.shape == whole.shape and torch.allclose(parts, whole.to(parts.device), rtol=1e-4, atol=1e-4)
        return (body, head) if same else None

    @torch.inference_mode()
    def next_token(
        self, sequences: Sequence[Sequence[int]], columns: Sequence[Sequence[int]] | None = None
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


def _reduce_chunks(
    logits_of: Callable[[int, int], torch.Tensor],
    targets: torch.Tensor,
    vocab_size: int,
    vocab_stats: bool,
    finite_check: Callable[[torch.Tensor], None] | None,
) -> dict[str, np.ndarray]:
    """Per scored position, from its logits taken LOGITS_CHUNK_BYTES at a time
    (`logits_of(a, b)`: positions a..b): the target's float32 log-prob, the
    argmax and, with `vocab_stats`, the mean and variance of log p under p
    (Min-K%++)."""
    n = targets.shape[0]
    step = max(1, LOGITS_CHUNK_BYTES // (max(vocab_size, 1) * 4 * 3))
    parts: dict[str, list[np.ndarray]] = {"token_ids": [targets.cpu().numpy()], "logprobs": [], "argmax": []}
    if vocab_stats:
        parts.update(vocab_mean=[], vocab_var=[])
    for a in range(0, n, step):
        b = min(n, a + step)
        logits = logits_of(a, b)
        if finite_check is not None:
            finite_check(logits)
        logp = torch.log_softmax(logits.float(), dim=-1)
        chunk_targets = targets[a:b].to(logp.device)
        parts["logprobs"].append(logp.gather(-1, chunk_targets[:, None])[:, 0].cpu().numpy())
        parts["argmax"].append(logp.argmax(-1).cpu().numpy())
        if vocab_stats:
            p = logp.exp()
            mean = (p * logp).sum(-1)
            # Centred form of E[(log p)^2] - mean^2: same value, no float32 cancellation.
            parts["vocab_mean"].append(mean.cpu().numpy())
            parts["vocab_var"].append((p * (logp - mean[:, None]).square()).sum(-1).cpu().numpy())
    empty = {"logprobs": np.float32, "argmax": np.int64, "vocab_mean": np.float32, "vocab_var": np.float32}
    return {key: np.concatenate(values) if values else np.zeros(0, empty[key]) for key, values in parts.items()}
