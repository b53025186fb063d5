"""`ModelHandle`: the Hugging Face backend, weights in this process.

A composition of parts, each constructed with what it needs and tested
alone: the weights come from `loading.load_weights`; `Batcher` (batching.py)
sizes and runs batches; `Scorer` (scoring.py) computes teacher-forced and
next-token log-probs; `Generator` (generation.py) decodes greedily;
`Patcher` (patching.py) reads and replaces decoder-block outputs. The handle
encodes prompts (`Tokenization`, shared with the endpoint backend), checks
every forward pass for non-finite logits, implements the model protocol
(models/interface.py) by handing token ids to its parts, and frees the
weights.
"""

from __future__ import annotations

import inspect
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

import torch

from unlearnbench.errors import NonFiniteOutputError
from unlearnbench.models.batching import Batcher
from unlearnbench.models.checkpoint import ResolvedCheckpoint, resolve
from unlearnbench.models.generation import Generator
from unlearnbench.models.interface import NextToken, Sampling, SpanScores, TokenScores
from unlearnbench.models.loading import free_weights, load_weights
from unlearnbench.models.patching import Patcher
from unlearnbench.models.scoring import Scorer
from unlearnbench.models.tokenization import Tokenization


class FiniteLogitsCheck:
    """A forward hook raising NonFiniteOutputError when a real (unpadded)
    position's logits hold NaN or inf: broken weights fail the checkpoint at
    once, where the logits are computed anyway, before any score. One float32
    sum per position: a NaN or inf anywhere in the vocabulary makes it
    non-finite."""

    def __init__(self, name: str):
        self.name, self.finite_forwards = name, 0

    def __call__(self, _module, _args, kwargs, output) -> None:
        logits = getattr(output, "logits", None)
        if logits is None:
            return
        per_position = torch.sum(logits.detach(), dim=-1, dtype=torch.float32)
        mask = kwargs.get("attention_mask")
        if mask is not None and mask.dim() == 2 and mask.shape[-1] >= per_position.shape[-1]:
            real = mask[:, mask.shape[-1] - per_position.shape[-1] :].bool()
            per_position = per_position[real.to(per_position.device)]
        self._judge(per_position)

    def check(self, logits: torch.Tensor) -> None:
        """The same check of logits computed outside the model's forward (the
        scorer's head over scored positions only: every row is real)."""
        self._judge(torch.sum(logits.detach(), dim=-1, dtype=torch.float32))

    def _judge(self, per_position: torch.Tensor) -> None:
        if bool(torch.isfinite(per_position).all()):
            self.finite_forwards += 1
            return
        kind = "NaN" if bool(torch.isnan(per_position).any()) else "inf"
        where = (
            "the first forward pass"
            if self.finite_forwards == 0
            else f"forward pass {self.finite_forwards + 1} (the earlier ones were finite)"
        )
        raise NonFiniteOutputError(self.name, f"non-finite logits ({kind}) in {where}: the weights are broken")


class ModelHandle(Tokenization):
    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer,
        *,
        name: str,
        source: str,
        fingerprint: str,
        batch_size: int | None = None,
        memory_budget: int | None = None,
        load_seconds: float = 0.0,
        offload_folder: str | None = None,
        detach=None,
    ):
        self.model: Any = model.eval()  # a Hugging Face model: attributes torch's stubs cannot type
        self.tokenizer = tokenizer
        self.name, self.source, self.fingerprint = name, source, fingerprint
        self.load_seconds, self.offload_folder = load_seconds, offload_folder
        self._detach = detach  # an adapter's: takes it off its base instead of freeing the base (loading.SharedBase)
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        forward = inspect.signature(model.forward).parameters
        cache_kwarg = "cache" if "cache" in forward else "past_key_values"
        keeps_logits = "logits_to_keep" in forward
        self.batcher = Batcher(
            device=self.device,
            vocab_size=self.vocab_size,
            fixed_batch_size=batch_size,
            memory_budget=memory_budget,
            kv_bytes_per_token=self.kv_bytes_per_token,
            activation_bytes_per_token=self.activation_bytes_per_token,
        )
        self.finite_check = FiniteLogitsCheck(name)
        self.scorer = Scorer(
            model,
            self.batcher,
            pad_id=tokenizer.pad_token_id,
            name=name,
            keeps_logits=keeps_logits,
            finite_check=self.finite_check.check,
        )
        self.generator = Generator(
            model, tokenizer, self.batcher, name=name, cache_kwarg=cache_kwarg, keeps_logits=keeps_logits
        )
        self.patcher = Patcher(
            model,
            self.batcher,
            pad_id=tokenizer.pad_token_id,
            name=name,
            cache_kwarg=cache_kwarg,
            keeps_logits=keeps_logits,
        )
        self._finite_hook = model.register_forward_hook(self.finite_check, with_kwargs=True)

    @classmethod
    def load(
        cls,
        source: str | ResolvedCheckpoint,
        *,
        name: str | None = None,
        device: str = "auto",
        dtype: str = "auto",
        batch_size: int | None = None,
        memory_budget: int | None = None,
        fingerprint_memo: Path | None = None,
        fingerprint_secret: bytes | None = None,
        device_map: str | dict | None = None,
    ) -> ModelHandle:
        """The checkpoint at `source`, loaded (loading.load_weights)."""
        w = load_weights(
            source,
            name=name,
            device=device,
            dtype=dtype,
            fingerprint_memo=fingerprint_memo,
            fingerprint_secret=fingerprint_secret,
            device_map=device_map,
        )
        return cls(
            w.model,
            w.tokenizer,
            name=w.name,
            source=w.source,
            fingerprint=w.fingerprint,
            batch_size=batch_size,
            memory_budget=memory_budget,
            load_seconds=w.load_seconds,
            offload_folder=w.offload_folder,
            detach=w.detach,
        )

    def release(self) -> None:
        """Free the weights now (also on the GPU), even if something still holds
        this handle: the model's parameters move to the meta device. An
        adapter's base is kept instead, the adapter taken off (loading.SharedBase)."""
        self._finite_hook.remove()  # a shared base's next handle checks its logits under its own name
        if self._detach is not None:
            self._detach()
        else:
            free_weights(self.model, self.offload_folder)

    # ------------------------------------------------------------- the protocol
    def token_logprobs(
        self,
        sequences: Sequence[Sequence[int]],
        target_starts: Sequence[int],
        *,
        vocab_stats: bool = False,
        masked_ids: Collection[int] = (),
    ) -> list[TokenScores]:
        return self.scorer.token_logprobs(sequences, target_starts, vocab_stats=vocab_stats, masked_ids=masked_ids)

    def next_token(self, prompts: Sequence[str], columns: Sequence[Sequence[int]] | None = None) -> NextToken:
        """The distribution of a reply's first token: prompts are encoded as `generate` encodes them."""
        return self.scorer.next_token(self.encode_prompts(prompts), columns)

    def generate(
        self,
        prompts: Sequence[str],
        *,
        max_new_tokens: int,
        stop_strings: Sequence[str] = (),
        prefix: str = "",
        masked_ids: Collection[int] = (),
        sampling: Sampling | None = None,
    ) -> list[str]:
        """Greedy (or `sampling`) continuations of encode_prompt(prefix + prompt);
        `prefix`, text every prompt shares, is run once where its tokens are
        shared (`encode_shared_prefix`, `Generator.reuse_prefix_cache`)."""
        if prefix and prompts:
            head, rests = self.encode_shared_prefix(prefix, prompts)
        else:
            head, rests = [], self.encode_prompts([prefix + p for p in prompts])
        return self.generator.generate(
            head,
            rests,
            max_new_tokens=max_new_tokens,
            stop_strings=stop_strings,
            masked_ids=masked_ids,
            sampling=sampling,
        )

    def span_scores(
        self,
        sequences: Sequence[Sequence[int]],
        spans: Sequence[tuple[int, int]],
        *,
        patch_source: ModelHandle | None = None,
        exact: bool = False,
        post_norm_last: bool = False,
    ) -> SpanScores:
        return self.patcher.span_scores(
            sequences,
            spans,
            exact=exact,
            post_norm_last=post_norm_last,
            patch_source=patch_source.patcher if patch_source is not None else None,
        )

    @property
    def drives_blocks(self) -> bool:
        return self.patcher.drives_blocks

    @property
    def blocks(self) -> torch.nn.ModuleList:
        return self.patcher.blocks

    def block_outputs(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, *, post_norm_last: bool = False
    ) -> torch.Tensor:
        return self.patcher.block_outputs(input_ids, attention_mask, post_norm_last=post_norm_last)

    def forward_with_patch(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        *,
        layer: int,
        positions: torch.Tensor,
        replacement: torch.Tensor,
    ) -> torch.Tensor:
        return self.patcher.forward_with_patch(
            input_ids, attention_mask, layer=layer, positions=positions, replacement=replacement
        )

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
        return self.patcher.num_layers

    @property
    def vocab_size(self) -> int:
        return self.model.get_output_embeddings().weight.shape[0]

    @property
    def kv_bytes_per_token(self) -> int:
        """The KV cache's bytes per token of one sequence, from the config
        (0 where it does not say)."""
        config = getattr(self.model, "config", None)
        layers = getattr(config, "num_hidden_layers", 0)
        heads = getattr(config, "num_attention_heads", 0)
        kv_heads = getattr(config, "num_key_value_heads", None) or heads
        head_dim = getattr(config, "head_dim", None) or (getattr(config, "hidden_size", 0) // max(heads, 1))
        return 2 * layers * kv_heads * head_dim * self.dtype.itemsize

    @property
    def activation_bytes_per_token(self) -> int:
        """What one layer's forward holds per token at once, from the config:
        the residual stream and its normed copy, the attention's query, key,
        value and output, and the MLP's up, gate and activated projections
        (in float32 at most: 0 where the config does not say)."""
        config = getattr(self.model, "config", None)
        hidden = getattr(config, "hidden_size", 0) or 0
        intermediate = getattr(config, "intermediate_size", None) or 4 * hidden
        return (6 * hidden + 3 * intermediate) * max(self.dtype.itemsize, 4)

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

    @property
    def context_length(self) -> int:
        """The longest sequence the model's positions cover."""
        config = self.model.config
        return int(getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None) or 1024)

    @property
    def architecture(self) -> str:
        return type(self.model).__name__


def load_backend(source: str, *, name: str, settings) -> ModelHandle:
    """The Hugging Face backend's loader (backends.py)."""
    return ModelHandle.load(
        resolve(source, base_model=settings.base_model),
        name=name,
        device=settings.device,
        device_map=settings.device_map,
        dtype=settings.dtype,
        batch_size=settings.batch_size,
        memory_budget=settings.memory_budget,
        fingerprint_memo=settings.fingerprint_memo,
        fingerprint_secret=settings.cache_secret,
    )
