"""Generation for the Hugging Face backend, greedy or seeded sampling:
left-padded batches, stop strings, a KV cache that drops finished rows and a
reusable prompt-prefix cache, over token ids (the handle encodes prompts)."""

from __future__ import annotations

import copy
from collections.abc import Collection, Sequence

import torch

from unlearnbench import progress
from unlearnbench.models.batching import PREFILL_CHUNK_TOKENS, Batcher, pad
from unlearnbench.models.interface import Sampling, cut_at_stop


class Generator:
    """Greedy continuations of token ids with `model`, decoded by `tokenizer`."""

    def __init__(
        self, model: torch.nn.Module, tokenizer, batcher: Batcher, *, name: str, cache_kwarg: str, keeps_logits: bool
    ):
        self.model, self.tokenizer, self.batcher, self.name = model, tokenizer, batcher, name
        self.cache_kwarg = cache_kwarg  # the forward's KV-cache argument ("past_key_values" or "cache")
        self.keeps_logits = keeps_logits  # the forward takes `logits_to_keep`
        self.reuse_prefix_cache = True  # run a shared prompt prefix once (off only to measure what it saves)

    @torch.inference_mode()
    def generate(
        self,
        head: list[int],
        rests: Sequence[list[int]],
        *,
        max_new_tokens: int,
        stop_strings: Sequence[str] = (),
        masked_ids: Collection[int] = (),
        sampling: Sampling | None = None,
    ) -> list[str]:
        """Greedy continuations of `head + rests[i]` (sampled ones with
        `sampling`: `Sampler`), batched with left padding, cut at the first
        stop string.

        `head` is the token prefix every prompt shares (few-shot examples, a
        system turn): with `reuse_prefix_cache` it is run once and its KV
        cache is copied into every batch instead of being recomputed per row.

        Prompt tokens whose id is in `masked_ids` are kept out of attention,
        as OpenUnlearning's collator does to every pad-id token (its configs
        make pad = EOS); positions then count attended tokens only, as
        `model.generate` computes them from the mask. No prefix cache then:
        it would have attended to them.
        """
        reuse_prefix_cache = self.reuse_prefix_cache and not masked_ids
        prefix_cache = self._prefix_cache(head) if head and reuse_prefix_cache else None
        shared = head if prefix_cache is not None else []
        rows_of = [r if prefix_cache is not None else head + r for r in rests]
        stops = tuple(s for s in stop_strings if s)

        def run(batch: list[int]) -> list[str]:
            rows = [rows_of[i] for i in batch]
            # Left padding of the per-prompt part: with a reused prefix the
            # padding sits between prefix and prompt, masked out of attention.
            ids, mask = pad(rows, self.tokenizer.pad_token_id, left=True, head=shared)
            if masked_ids:
                mask[torch.isin(ids, torch.tensor(sorted(masked_ids)))] = 0
            cache = None
            if prefix_cache is not None:
                cache = copy.deepcopy(prefix_cache)
                cache.batch_repeat_interleave(len(rows))
            device = self.batcher.device
            pick = Sampler(sampling, batch) if sampling else None
            tokens = self._decode_rows(ids.to(device), mask.to(device), cache, len(shared), max_new_tokens, stops, pick)
            texts = self.tokenizer.batch_decode(tokens, skip_special_tokens=True)
            return [cut_at_stop(t, stops) for t in texts]

        how = (
            f"sampling {len(rests)} replies at temperature {sampling.temperature:g}"
            if sampling
            else f"generating {len(rests)} replies"
        )
        with progress.step(f"{self.name}: {how} (up to {max_new_tokens} tokens)"):
            return self.batcher.map(
                [len(r) for r in rows_of],
                run,
                full_vocab_logits=False,
                extra=len(shared) + max_new_tokens,
                chunked_prefill=True,
            )

    def _decode_rows(
        self, ids, mask, cache, cached: int, max_new_tokens: int, stops: tuple[str, ...], pick: Sampler | None = None
    ) -> list[list[int]]:
        """Greedy decoding (each next token drawn by `pick` where given) with a KV cache that drops finished rows.

        Equivalent to `model.generate(do_sample=False)` with EOS and stop
        strings, but rows that have finished (short answers usually do) stop
        costing compute: once they are a quarter of the batch, their KV cache
        rows are removed (dropping them one step at a time would copy the
        whole cache at nearly every step of a large batch).
        `cached` leading positions of `ids` are already in `cache`.
        """
        eos = set(self._eos_ids())
        positions = (mask.cumsum(-1) - 1).clamp_min(0)
        kwargs: dict[str, bool | int] = {"use_cache": True}
        if self.keeps_logits:
            kwargs["logits_to_keep"] = 1
        # The prompt's uncached tokens, PREFILL_CHUNK_TOKENS at a time: each
        # chunk attends to the cache of those before it.
        for start in range(cached, ids.shape[1], PREFILL_CHUNK_TOKENS):
            end = min(ids.shape[1], start + PREFILL_CHUNK_TOKENS)
            if cache is not None:
                kwargs[self.cache_kwarg] = cache
            out = self.model(
                input_ids=ids[:, start:end],
                attention_mask=mask[:, :end],
                position_ids=positions[:, start:end],
                **kwargs,
            )
            cache = getattr(out, self.cache_kwarg)
        generated: list[list[int]] = [[] for _ in range(ids.shape[0])]
        finished: set[int] = set()
        alive = torch.arange(ids.shape[0], device=ids.device)  # batch row -> prompt
        next_position = positions[:, -1] + 1
        for step in range(max_new_tokens):
            rows = alive.tolist()
            logits = out.logits[:, -1]
            tokens = (pick(logits, rows, step) if pick else logits.argmax(-1)).to(ids.device)
            running = [(row, token) for row, token in zip(rows, tokens.tolist()) if row not in finished]
            for row, token in running:
                generated[row].append(token)
            tails = self._decode([generated[row][-self._stop_window(stops) :] for row, _ in running]) if stops else []
            for k, (row, token) in enumerate(running):
                if token in eos or (bool(stops) and any(s in tails[k] for s in stops)):
                    finished.add(row)
            if len(finished) == len(generated) or step == max_new_tokens - 1:
                break
            cache = getattr(out, self.cache_kwarg)
            if 4 * sum(row in finished for row in rows) >= len(rows):
                keep = torch.tensor([row not in finished for row in rows], device=ids.device)
                cache.batch_select_indices(keep.nonzero()[:, 0])
                alive, tokens, mask, next_position = alive[keep], tokens[keep], mask[keep], next_position[keep]
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
            kwargs[self.cache_kwarg] = cache
            out = self.model(
                input_ids=tokens[:, None], attention_mask=mask, position_ids=next_position[:, None], **kwargs
            )
            next_position = next_position + 1
        return generated

    def _decode(self, sequences: list[list[int]]) -> list[str]:
        """`tokenizer.decode` of each sequence (special tokens skipped): in one
        call to the Rust tokenizer where that is what `decode` does (a fast
        tokenizer that cleans up no spaces), else one call each."""
        backend = getattr(self.tokenizer, "backend_tokenizer", None)
        if backend is not None and not getattr(self.tokenizer, "clean_up_tokenization_spaces", True):
            return backend.decode_batch(sequences, skip_special_tokens=True)
        return [self.tokenizer.decode(s, skip_special_tokens=True) for s in sequences]

    @staticmethod
    def _stop_window(stops: tuple[str, ...]) -> int:
        # A stop string of n characters spans at most n tokens, plus partial
        # byte tokens on either side.
        return max(len(s) for s in stops) + 4

    def _prefix_cache(self, prefix_ids: list[int]):
        ids = torch.tensor([prefix_ids], dtype=torch.long, device=self.batcher.device)
        out = self.model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=True)
        return getattr(out, self.cache_kwarg)

    def _eos_ids(self) -> list[int]:
        ids = set()
        gen_eos = getattr(self.model.generation_config, "eos_token_id", None)
        for value in (gen_eos, self.tokenizer.eos_token_id):
            if isinstance(value, int):
                ids.add(value)
            elif value:
                ids.update(value)
        return sorted(ids)


class Sampler:
    """The next token of each row drawn from softmax(logits / temperature), by
    the Gumbel-max trick with noise from the row's own seed and the step: a
    prompt's draw is the same whatever batch, padding or row order it runs in."""

    def __init__(self, sampling: Sampling, batch: Sequence[int]):
        self.temperature = sampling.temperature
        self.seeds = [sampling.seeds[i] for i in batch]  # batch row -> its prompt's seed

    def __call__(self, logits: torch.Tensor, rows: list[int], step: int) -> torch.Tensor:
        noise = torch.stack([self._gumbel(self.seeds[row], step, logits.shape[-1]) for row in rows])
        return (logits.float().cpu() / self.temperature + noise).argmax(-1)

    @staticmethod
    def _gumbel(seed: int, step: int, size: int) -> torch.Tensor:
        generator = torch.Generator().manual_seed(seed * 1_000_003 + step)
        uniform = torch.rand(size, generator=generator, dtype=torch.float64).clamp_(1e-12, 1.0)
        return (-torch.log(-torch.log(uniform))).float()
