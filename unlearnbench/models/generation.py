"""Greedy generation for the Hugging Face backend: left-padded batches, stop
strings, a KV cache that drops finished rows and a reusable prompt-prefix
cache. A mixin of `ModelHandle`."""

from __future__ import annotations

import copy
from typing import Collection, Sequence

import torch

from unlearnbench import progress
from unlearnbench.models.interface import cut_at_stop


class Generation:
    @torch.inference_mode()
    def generate(
        self,
        prompts: Sequence[str],
        *,
        max_new_tokens: int,
        stop_strings: Sequence[str] = (),
        prefix: str = "",
        masked_ids: Collection[int] = (),
    ) -> list[str]:
        """Greedy continuations, batched with left padding, cut at the first stop string.

        `prefix` is text shared by every prompt (few-shot examples, a system
        turn). The model sees encode_prompt(prefix + prompt) either way; with
        `self.reuse_prefix_cache` (on unless a benchmark measures without it)
        the longest common token prefix of those encodings is run once and its
        KV cache is copied into every batch instead of being recomputed per
        row (`encode_shared_prefix`).

        Prompt tokens whose id is in `masked_ids` are kept out of attention,
        as OpenUnlearning's collator does to every pad-id token (its configs
        make pad = EOS); positions then count attended tokens only, as
        `model.generate` computes them from the mask. No prefix cache then:
        it would have attended to them.
        """
        reuse_prefix_cache = self.reuse_prefix_cache and not masked_ids
        if prefix and prompts:
            head, rests = self.encode_shared_prefix(prefix, prompts)
        else:
            head, rests = [], [self.encode_prompt(prefix + p) for p in prompts]
        prefix_cache = self._prefix_cache(head) if head and reuse_prefix_cache else None
        shared = head if prefix_cache is not None else []
        rows_of = [r if prefix_cache is not None else head + r for r in rests]
        stops = tuple(s for s in stop_strings if s)

        def run(batch: list[int]) -> list[str]:
            rows = [rows_of[i] for i in batch]
            width = len(shared) + max(len(r) for r in rows)
            ids = torch.full((len(rows), width), self.tokenizer.pad_token_id, dtype=torch.long)
            mask = torch.zeros_like(ids)
            ids[:, : len(shared)] = torch.tensor(shared, dtype=torch.long)
            mask[:, : len(shared)] = 1
            for row, seq in enumerate(rows):
                # Left padding of the per-prompt part: with a reused prefix the
                # padding sits between prefix and prompt, masked out of attention.
                ids[row, width - len(seq) :] = torch.tensor(seq, dtype=torch.long)
                mask[row, width - len(seq) :] = 1
            if masked_ids:
                mask[torch.isin(ids, torch.tensor(sorted(masked_ids)))] = 0
            cache = None
            if prefix_cache is not None:
                cache = copy.deepcopy(prefix_cache)
                cache.batch_repeat_interleave(len(rows))
            tokens = self._greedy(ids.to(self.device), mask.to(self.device), cache, len(shared), max_new_tokens, stops)
            texts = self.tokenizer.batch_decode(tokens, skip_special_tokens=True)
            return [cut_at_stop(t, stops) for t in texts]

        with progress.step(f"{self.name}: generating {len(prompts)} replies (up to {max_new_tokens} tokens)"):
            return self._map_batches(
                [len(r) for r in rows_of], run, full_vocab_logits=False, extra=len(shared) + max_new_tokens
            )

    def _greedy(self, ids, mask, cache, cached: int, max_new_tokens: int, stops: tuple[str, ...]) -> list[list[int]]:
        """Greedy decoding with a KV cache that drops finished rows.

        Equivalent to `model.generate(do_sample=False)` with EOS and stop
        strings, but a row that has finished (short answers usually do) stops
        costing compute: its KV cache rows are removed from the batch.
        `cached` leading positions of `ids` are already in `cache`.
        """
        eos = set(self._eos_ids())
        positions = (mask.cumsum(-1) - 1).clamp_min(0)
        kwargs = {"use_cache": True}
        if self._keeps_logits:
            kwargs["logits_to_keep"] = 1
        if cache is not None:
            kwargs[self._cache_kwarg] = cache
        out = self.model(input_ids=ids[:, cached:], attention_mask=mask, position_ids=positions[:, cached:], **kwargs)
        generated: list[list[int]] = [[] for _ in range(ids.shape[0])]
        alive = torch.arange(ids.shape[0], device=ids.device)
        next_position = positions[:, -1] + 1
        for step in range(max_new_tokens):
            tokens = out.logits[:, -1].argmax(-1).to(ids.device)
            done = []
            for row, token in zip(alive.tolist(), tokens.tolist()):
                generated[row].append(token)
                finished = token in eos or (stops and any(
                    s in self.tokenizer.decode(generated[row][-self._stop_window(stops):], skip_special_tokens=True)
                    for s in stops))
                done.append(finished)
            if all(done) or step == max_new_tokens - 1:
                break
            if any(done):
                keep = torch.tensor([not d for d in done], device=ids.device)
                cache = getattr(out, self._cache_kwarg)
                cache.batch_select_indices(keep.nonzero()[:, 0])
                alive, tokens, mask, next_position = alive[keep], tokens[keep], mask[keep], next_position[keep]
            else:
                cache = getattr(out, self._cache_kwarg)
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
            kwargs[self._cache_kwarg] = cache
            out = self.model(input_ids=tokens[:, None], attention_mask=mask, position_ids=next_position[:, None],
                             **kwargs)
            next_position = next_position + 1
        return generated

    @staticmethod
    def _stop_window(stops: tuple[str, ...]) -> int:
        # A stop string of n characters spans at most n tokens, plus partial
        # byte tokens on either side.
        return max(len(s) for s in stops) + 4

    def _prefix_cache(self, prefix_ids: list[int]):
        ids = torch.tensor([prefix_ids], dtype=torch.long, device=self.device)
        out = self.model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=True)
        return getattr(out, self._cache_kwarg)

    def _eos_ids(self) -> list[int]:
        ids = set()
        gen_eos = getattr(self.model.generation_config, "eos_token_id", None)
        for value in (gen_eos, self.tokenizer.eos_token_id):
            if isinstance(value, int):
                ids.add(value)
            elif value:
                ids.update(value)
        return sorted(ids)
