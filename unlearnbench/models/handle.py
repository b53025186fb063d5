"""`ModelHandle`: the one place that owns torch.

Loading (HF directory, Hub id, GGUF file), batching with memory back-off,
teacher-forced scoring in float32, greedy generation with stop strings and a
reusable prompt-prefix KV cache, and capture / patching of decoder-block
outputs (the residual stream before the final norm).
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np
import torch

from unlearnbench import progress
from unlearnbench.errors import CheckpointError, NonFiniteOutputError
from unlearnbench.models.checkpoint import ResolvedCheckpoint, fingerprint, resolve
from unlearnbench.models.device import device_map_kind, resolve_device, resolve_dtype

# Layer containers of the architectures we know by name; anything else is
# found by shape (a ModuleList with one entry per hidden layer).
BLOCK_PATHS = ("model.layers", "transformer.h", "gpt_neox.layers", "model.decoder.layers", "transformer.blocks")
# CPU has no OOM signal we can catch, so auto batching there budgets the
# float32 logits (+ log-softmax + probabilities) of one batch up front.
CPU_LOGITS_BUDGET_BYTES = 1 << 30
MAX_AUTO_BATCH = 64
# Decoder stacks whose upper blocks `span_scores` can rerun alone (tested).
DRIVABLE_MODEL_TYPES = ("llama", "qwen2", "mistral")
FAST_PATCH_BATCH = 8


@dataclass
class TokenScores:
    """Teacher-forced scores of the target tokens of one sequence.

    `vocab_mean[t]` = sum_v p_v log p_v and `vocab_var[t]` = sum_v p_v (log p_v)^2
    - vocab_mean[t]^2 at the position that predicts target t (Min-K%++ needs both).
    """

    token_ids: np.ndarray
    logprobs: np.ndarray
    vocab_mean: np.ndarray | None = None
    vocab_var: np.ndarray | None = None


@dataclass
class NextToken:
    """The next-token distribution after each of n prompts, reduced."""

    logprobs: list[np.ndarray]  # per prompt: log-probs at the requested columns
    entropy: np.ndarray  # (n,) nats
    argmax: np.ndarray  # (n,) token id of the most likely token over the whole vocabulary


class ModelHandle:
    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer,
        *,
        name: str,
        source: str,
        fingerprint: str,
        batch_size: int | None = None,
        load_seconds: float = 0.0,
    ):
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.name = name
        self.source = source
        self.fingerprint = fingerprint
        self.load_seconds = load_seconds
        self.offload_folder: str | None = None  # weights of modules a device map puts on "disk"
        self.fixed_batch_size = batch_size
        self._batch_cap = MAX_AUTO_BATCH
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        self.blocks = find_decoder_blocks(model)
        forward_params = inspect.signature(model.forward).parameters
        self._cache_kwarg = "cache" if "cache" in forward_params else "past_key_values"
        self._keeps_logits = "logits_to_keep" in forward_params
        # Every forward pass's logits are checked where they are computed anyway,
        # so broken weights fail the checkpoint at once, before any score.
        self._finite_forwards = 0
        model.register_forward_hook(self._check_finite_logits, with_kwargs=True)

    def _check_finite_logits(self, _module, _args, kwargs, output) -> None:
        """Raise NonFiniteOutputError when a real (unpadded) position's logits
        hold NaN or inf. One float32 sum per position: a NaN or inf anywhere in
        the vocabulary makes it non-finite."""
        logits = getattr(output, "logits", None)
        if logits is None:
            return
        per_position = torch.sum(logits.detach(), dim=-1, dtype=torch.float32)
        mask = kwargs.get("attention_mask")
        if mask is not None and mask.dim() == 2 and mask.shape[-1] >= per_position.shape[-1]:
            real = mask[:, mask.shape[-1] - per_position.shape[-1]:].bool()
            per_position = per_position[real.to(per_position.device)]
        if bool(torch.isfinite(per_position).all()):
            self._finite_forwards += 1
            return
        kind = "NaN" if bool(torch.isnan(per_position).any()) else "inf"
        where = "the first forward pass" if self._finite_forwards == 0 else \
            f"forward pass {self._finite_forwards + 1} (the earlier ones were finite)"
        raise NonFiniteOutputError(self.name, f"non-finite logits ({kind}) in {where}: the weights are broken")

    def release(self) -> None:
        """Free the weights now (also on the GPU), even if something still holds
        this handle: the model's parameters move to the meta device."""
        import gc

        on_gpu = any(p.device.type == "cuda" for p in self.model.parameters())
        if getattr(self.model, "hf_device_map", None) is not None:
            from accelerate.hooks import remove_hook_from_submodules

            remove_hook_from_submodules(self.model)  # dispatched models refuse .to() while hooked
        self.model.to("meta")
        if self.offload_folder:
            shutil.rmtree(self.offload_folder, ignore_errors=True)
        gc.collect()
        if on_gpu:
            torch.cuda.empty_cache()

    # ------------------------------------------------------------------ loading
    @classmethod
    def load(
        cls,
        source: str | ResolvedCheckpoint,
        *,
        name: str | None = None,
        device: str = "auto",
        dtype: str = "auto",
        batch_size: int | None = None,
        fingerprint_memo: Path | None = None,
        device_map: str | dict | None = None,
    ) -> "ModelHandle":
        """`device_map` (accelerate's: a strategy such as "auto", or {module:
        device}) spreads the model over several devices instead of `device`;
        inputs go to the embedding's device, and every tensor a hook captures
        or patches follows its block's own device."""
        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # pytest output is for verdicts, not load bars
        resolved = source if isinstance(source, ResolvedCheckpoint) else resolve(source)
        started = time.perf_counter()
        kwargs = {"gguf_file": resolved.gguf_file} if resolved.gguf_file else {}
        where = resolved.display
        # In a sweep the user knows a checkpoint by its name: errors lead with it.
        label = f"{name} ({where})" if name else where
        try:
            tokenizer = AutoTokenizer.from_pretrained(str(resolved.directory), **kwargs)
            config = AutoConfig.from_pretrained(str(resolved.directory), **kwargs)
        except Exception as exc:  # noqa: BLE001 - report any loader failure as one line
            raise CheckpointError(label, f"cannot load tokenizer/config ({type(exc).__name__}: {exc})") from None
        vocab = getattr(config, "vocab_size", None)
        if vocab is not None and len(tokenizer) > vocab:
            raise CheckpointError(
                label, f"tokenizer mismatch: tokenizer has {len(tokenizer)} tokens, model embeds only {vocab}"
            )
        torch_device = resolve_device(device) if device_map is None else torch.device(device_map_kind(device_map))
        torch_dtype = resolve_dtype(dtype, torch_device, getattr(config, "dtype", None))
        placement = torch_device if device_map is None else "a device map"
        if device_map is not None:
            kwargs["device_map"] = device_map
            if isinstance(device_map, dict) and "disk" in device_map.values():
                # Modules mapped to "disk" are read from here at each use.
                kwargs["offload_folder"] = tempfile.mkdtemp(prefix="unlearnbench-offload-")
        with progress.step(f"loading {name or Path(where).name} on {placement}"):
            try:
                model = AutoModelForCausalLM.from_pretrained(str(resolved.directory), dtype=torch_dtype, **kwargs)
            except Exception as exc:  # noqa: BLE001
                raise CheckpointError(label, f"cannot load weights: {_load_failure(exc)}") from None
            if device_map is None:
                model.to(device=torch_device, dtype=torch_dtype)
        handle = cls(
            model,
            tokenizer,
            name=name or Path(where).name,
            source=where,
            fingerprint=fingerprint(resolved.files, fingerprint_memo),
            batch_size=batch_size,
            load_seconds=time.perf_counter() - started,
        )
        handle.offload_folder = kwargs.get("offload_folder")
        return handle

    # --------------------------------------------------------------- properties
    @property
    def device(self) -> torch.device:
        """Where inputs go: the embedding's device (under a device map, each
        block's hook moves its inputs on to its own)."""
        return self.model.get_input_embeddings().weight.device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype

    @property
    def num_layers(self) -> int:
        return len(self.blocks)

    @property
    def vocab_size(self) -> int:
        return self.model.get_output_embeddings().weight.shape[0]

    def describe(self) -> dict:
        return {
            "name": self.name,
            "source": self.source,
            "fingerprint": self.fingerprint,
            "architecture": self.architecture,
            "num_layers": self.num_layers,
            "device": str(self.device),
            "device_map": {k: str(v) for k, v in getattr(self.model, "hf_device_map", {}).items()} or None,
            "device_name": torch.cuda.get_device_name(self.device) if self.device.type == "cuda" else "cpu",
            "dtype": str(self.dtype).removeprefix("torch."),
            "load_seconds": round(self.load_seconds, 3),
        }

    # ----------------------------------------------------------------- tokenize
    def encode(self, text: str, *, add_special_tokens: bool) -> list[int]:
        return self.tokenizer(text, add_special_tokens=add_special_tokens)["input_ids"]

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """Token ids of `text` (no special tokens) and each token's character
        span in it (the fast tokenizer's offset mapping)."""
        encoded = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        return list(encoded["input_ids"]), [tuple(span) for span in encoded["offset_mapping"]]

    def decode(self, ids: Sequence[int]) -> str:
        """Text of `ids` without special tokens."""
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    @property
    def context_length(self) -> int:
        """The longest sequence the model's positions cover."""
        config = self.model.config
        return int(getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", 1024))

    @property
    def architecture(self) -> str:
        return type(self.model).__name__

    def encode_prompt(self, text: str) -> list[int]:
        """A prompt's ids with exactly one BOS where the tokenizer adds one (SPEC §8).

        Text from a chat template may already begin with the BOS the template
        writes (Llama-3.x, Mistral, Gemma); adding the tokenizer's own would
        give two. Such text is encoded without special tokens; every other
        prompt with the tokenizer's default (which adds the BOS, if any).
        """
        bos = self.tokenizer.bos_token
        written = bool(bos) and text.startswith(bos) and bool(self._bos())
        return self.encode(text, add_special_tokens=not written)

    def encode_shared_prefix(self, prefix: str, prompts: Sequence[str]) -> tuple[list[int], list[list[int]]]:
        """(shared, rests) with shared + rests[i] == encode_prompt(prefix + prompts[i]).

        Encoding the prefix and each prompt apart would change the ids where
        BPE merges across the boundary ("\n\n" + "Question" is "\n", "\n",
        "Question" joined): the model must see the joined text's own ids, so
        only their longest common *token* prefix is shared (and cached), and
        every row keeps at least one token of its own to predict from.
        """
        joined = [self.encode_prompt(prefix + p) for p in prompts]
        shared = min(len(j) for j in joined) - 1
        for ids in joined[1:]:
            shared = next((k for k in range(shared) if ids[k] != joined[0][k]), shared)
        rests = [ids[shared:] for ids in joined]
        head = joined[0][:shared]
        if any(head + rest != ids for rest, ids in zip(rests, joined)):
            raise AssertionError("shared prefix + rest differs from the joined encoding")
        return head, rests

    @property
    def has_chat_template(self) -> bool:
        from unlearnbench.models.chat import has_chat_template

        return has_chat_template(self.tokenizer)

    def format_chat(self, messages: Sequence[dict], *, add_generation_prompt: bool = True) -> str:
        from unlearnbench.models.chat import format_chat

        return format_chat(self.tokenizer, messages, add_generation_prompt=add_generation_prompt)

    # ------------------------------------------------------------------ batching
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

    # ------------------------------------------------------------------ scoring
    @torch.inference_mode()
    def token_logprobs(
        self, sequences: Sequence[Sequence[int]], target_starts: Sequence[int], *, vocab_stats: bool = False
    ) -> list[TokenScores]:
        """Float32 log p(x_t | x_<t) for t in [start, len) of each sequence."""
        for seq, start in zip(sequences, target_starts):
            if not 1 <= start <= len(seq):
                raise ValueError(f"target start {start} outside 1..{len(seq)} (the first token has no prediction)")

        def run(batch: list[int]) -> list[TokenScores]:
            ids, mask = self._pad_right([sequences[i] for i in batch])
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

        return self._map_batches([len(s) for s in sequences], run, full_vocab_logits=True)

    def score_continuations(
        self, contexts: Sequence[str], continuations: Sequence[str], *, vocab_stats: bool = False
    ) -> list[TokenScores]:
        """Scores of each continuation's tokens given its context.

        Context and continuation are tokenized separately (as lm-evaluation-
        harness does) so the scored tokens are exactly the continuation's. With
        an empty context and a tokenizer that adds no BOS, the first token has
        nothing to condition on and is not scored.
        """
        sequences, starts = [], []
        for context, continuation in zip(contexts, continuations, strict=True):
            ctx = self.encode_prompt(context) if context else self._bos()
            cont = self.encode(continuation, add_special_tokens=False)
            if not cont:
                raise ValueError(f"empty continuation for context {context[:40]!r}")
            start = max(len(ctx), 1)
            sequences.append(ctx + cont)
            starts.append(start)
        return self.token_logprobs(sequences, starts, vocab_stats=vocab_stats)

    @torch.inference_mode()
    def next_token(
        self,
        prompts: Sequence[str],
        columns: Sequence[Sequence[int]] | None = None,
        *,
        logits_processor: Callable | None = None,
    ) -> NextToken:
        """The float32 next-token distribution after each prompt, reduced to
        what callers need: its entropy (nats), its argmax over the whole
        vocabulary, and log-probs at `columns[i]` (e.g. MCQ label tokens).

        Prompts are encoded as `generate` encodes them, so this is the
        distribution of a reply's first token. `logits_processor(input_ids,
        scores)` (the transformers LogitsProcessor call) rewrites the raw
        last-position logits first.
        """
        sequences = [self.encode_prompt(p) for p in prompts]
        if columns is not None and len(columns) != len(prompts):
            raise ValueError(f"{len(columns)} column lists for {len(prompts)} prompts")

        def run(batch: list[int]) -> list[tuple]:
            # Left padding puts every prompt's last token in the last column,
            # so only that column's logits are computed (logits_to_keep).
            ids, mask = self._pad_left([sequences[i] for i in batch])
            kwargs = {"logits_to_keep": 1} if self._keeps_logits else {}
            positions = (mask.cumsum(-1) - 1).clamp_min(0)
            logits = self.model(input_ids=ids, attention_mask=mask, position_ids=positions, **kwargs).logits
            scores = logits[:, -1].float().to(ids.device)
            if logits_processor is not None:
                scores = logits_processor(ids, scores).float()
            logp = torch.log_softmax(scores, dim=-1)
            entropy = -(logp.exp() * logp).nansum(-1)
            out = []
            for row, i in enumerate(batch):
                picked = logp[row, list(columns[i])].cpu().numpy() if columns is not None else np.zeros(0, np.float32)
                out.append((picked, float(entropy[row]), int(logp[row].argmax())))
            return out

        with progress.step(f"{self.name}: scoring the next token after {len(sequences)} prompts"):
            rows = self._map_batches([len(s) for s in sequences], run, full_vocab_logits=not self._keeps_logits)
        return NextToken(
            logprobs=[r[0] for r in rows],
            entropy=np.array([r[1] for r in rows], dtype=np.float64),
            argmax=np.array([r[2] for r in rows], dtype=np.int64),
        )

    def _bos(self) -> list[int]:
        ids = self.tokenizer("", add_special_tokens=True)["input_ids"]
        return list(ids)

    # --------------------------------------------------------------- generation
    @torch.inference_mode()
    def generate(
        self,
        prompts: Sequence[str],
        *,
        max_new_tokens: int,
        stop_strings: Sequence[str] = (),
        prefix: str = "",
        reuse_prefix_cache: bool = True,
    ) -> list[str]:
        """Greedy continuations, batched with left padding, cut at the first stop string.

        `prefix` is text shared by every prompt (few-shot examples, a system
        turn). The model sees encode_prompt(prefix + prompt) either way; with
        `reuse_prefix_cache` the longest common token prefix of those encodings
        is run once and its KV cache is copied into every batch instead of
        being recomputed per row (`encode_shared_prefix`).
        """
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

    # ------------------------------------------------- residual stream access
    @contextlib.contextmanager
    def _block_hook(self, layer: int, hook) -> Iterator[None]:
        handle = self.blocks[layer].register_forward_hook(hook)
        try:
            yield
        finally:
            handle.remove()

    @torch.inference_mode()
    def block_outputs(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, *,
                      post_norm_last: bool = False) -> torch.Tensor:
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
            out = self.model(input_ids=input_ids.to(self.device), attention_mask=attention_mask.to(self.device),
                             output_hidden_states=post_norm_last)
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
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Mean teacher-forced log-prob of tokens [start, end) of each sequence.

        With `patch_source` (another handle, same tokenizer), also the same
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
            ids, mask = self._pad_right([sequences[i] for i in batch])
            if patch_source is None:
                base = mean_span_logprob(self.model(input_ids=ids, attention_mask=mask).logits, ids, batch)
                return [(b, None) for b in base]
            positions = torch.zeros_like(ids, dtype=torch.bool)
            for row, i in enumerate(batch):
                positions[row, spans[i][0] - 1 : spans[i][1] - 1] = True
            source = patch_source.block_outputs(ids, mask, post_norm_last=post_norm_last)
            if fast:
                base, patched = self._fast_patched(ids, mask, positions, source, batch, spans, mean_span_logprob)
            else:
                base = mean_span_logprob(self.model(input_ids=ids, attention_mask=mask).logits, ids, batch)
                patched = np.stack([
                    mean_span_logprob(
                        self.forward_with_patch(ids, mask, layer=layer, positions=positions,
                                                replacement=source[layer]),
                        ids, batch)
                    for layer in range(self.num_layers)
                ], axis=1)
            return list(zip(base, patched))

        # Fast path: small batches sorted by span length (then length): each
        # rerun covers a batch's longest span in every row, and the reruns, not
        # the two whole passes, are most of the cost.
        what = f"patching {self.num_layers} layers from {patch_source.name}" if patch_source is not None else "scoring"
        with progress.step(f"{self.name}: {what} over {len(sequences)} items"):
            results = self._map_batches(
                [len(s) for s in sequences], run, full_vocab_logits=True, cap=FAST_PATCH_BATCH if fast else None,
                priority=[(end - start, len(s)) for s, (start, end) in zip(sequences, spans)] if fast else None)
        base = np.array([r[0] for r in results])
        return base, (np.stack([r[1] for r in results]) if patch_source is not None else None)

    def _fast_patched(self, ids, mask, positions, source, batch, spans, mean_span_logprob):
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
            out = self.model(input_ids=ids, attention_mask=mask, use_cache=True)
        finally:
            for h in hooks:
                h.remove()
        base = mean_span_logprob(out.logits, ids, batch)
        full_cache = getattr(out, self._cache_kwarg)

        starts = torch.tensor([spans[i][0] - 1 for i in batch], device=ids.device)  # p_r
        lengths = torch.tensor([spans[i][1] - spans[i][0] for i in batch], device=ids.device)
        shift, width = int(starts.max()), int(lengths.max())
        offsets = torch.arange(width, device=ids.device)
        window = (starts[:, None] + offsets).clamp_max(ids.shape[1] - 1)  # [rows, width] positions
        scored = offsets[None] < lengths[:, None]  # the window's real (span-predicting) positions
        prefix_columns = torch.arange(shift, device=ids.device)[None] - (shift - starts[:, None])  # [rows, M]
        attention = torch.cat([(prefix_columns >= 0).long(), scored.long()], dim=1)
        targets = torch.cat([ids[row, spans[i][0]: spans[i][1]] for row, i in enumerate(batch)])
        counts = lengths.tolist()
        shifted = self._shift_cache(full_cache, prefix_columns)
        layers = inner.layers
        patched = []
        try:
            for layer in range(self.num_layers):
                block = captured[layer]  # on block `layer`'s own device under a device map
                hidden = torch.where(positions[..., None].to(block.device), source[layer].to(block.device, self.dtype),
                                     block)
                hidden = hidden.gather(1, window.to(block.device)[..., None].expand(-1, -1, hidden.shape[-1]))
                if layer + 1 < self.num_layers:
                    # Blocks layer+1.. run through the model's own forward (its
                    # mask and rotary code apply) over the shifted KV cache.
                    inner.layers = layers[layer + 1 :]
                    hidden = inner(
                        inputs_embeds=hidden, attention_mask=attention, position_ids=window, use_cache=True,
                        **{self._cache_kwarg: self._cache_of(shifted)},
                    ).last_hidden_state
                    inner.layers = layers
                else:
                    hidden = inner.norm(hidden)
                logp = torch.log_softmax(self.model.lm_head(hidden[scored.to(hidden.device)]).float(), dim=-1)
                token_logp = logp.gather(-1, targets[:, None].to(logp.device))[:, 0]
                patched.append(np.array([float(chunk.mean()) for chunk in token_logp.split(counts)]))
        finally:
            inner.layers = layers
        return base, np.stack(patched, axis=1)

    @staticmethod
    def _shift_cache(cache, prefix_columns: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Every layer's keys and values with row r's first p_r positions
        right-aligned in M columns (column c holds position c - (M - p_r);
        the columns before are masked padding)."""
        index = prefix_columns.clamp_min(0)
        shifted = []
        for layer in cache.layers:
            where = index.to(layer.keys.device)[:, None, :, None].expand(-1, layer.keys.shape[1], -1,
                                                                          layer.keys.shape[-1])
            shifted.append((layer.keys.gather(2, where), layer.values.gather(2, where)))
        return shifted

    def _cache_of(self, shifted: list[tuple[torch.Tensor, torch.Tensor]]):
        """A fresh KV cache over the shifted prefix (a rerun appends to its own
        copy; the shifted tensors are shared, never written)."""
        from transformers import DynamicCache

        prefix = DynamicCache(config=self.model.config)
        for index, (keys, values) in enumerate(shifted):
            prefix.update(keys, values, index)
        return prefix


def _block_tensor(output) -> torch.Tensor:
    return output[0] if isinstance(output, tuple) else output


def _load_failure(exc: Exception) -> str:
    """One line for a failed weights load (torch's own messages run to a page)."""
    text = str(exc)
    if "Weights only load failed" in text:
        found = re.search(r"Unsupported global: GLOBAL ([\w.]+)", text)
        what = f" (it needs {found.group(1)})" if found else ""
        return (f"its .bin pickle holds objects that torch.load(weights_only=True) refuses to run{what}; "
                "load it only if you trust it, and save it as safetensors")
    return f"{type(exc).__name__}: {text.strip().splitlines()[0] if text.strip() else ''}"


def cut_at_stop(text: str, stop_strings: Sequence[str]) -> str:
    cut = min((i for i in (text.find(s) for s in stop_strings) if i >= 0), default=len(text))
    return text[:cut]


def find_decoder_blocks(model: torch.nn.Module) -> torch.nn.ModuleList:
    """The decoder blocks, in order, for Llama/Qwen2/Mistral/GPT-2/NeoX-style models."""
    config = model.config
    n_layers = getattr(config, "num_hidden_layers", None) or getattr(config, "n_layer", None)
    for path in BLOCK_PATHS:
        module = model
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
        return model.get_submodule(candidates[0])
    raise CheckpointError(
        type(model).__name__,
        f"cannot find the decoder blocks: expected one ModuleList of {n_layers} layers, found {candidates or 'none'}",
    )
