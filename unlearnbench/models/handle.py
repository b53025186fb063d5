"""`ModelHandle`: the Hugging Face backend, weights in this process.

This module loads (HF directory, Hub id, GGUF file), checks every forward
pass for non-finite logits and frees the weights; the other concerns are
mixins in their own modules: tokenization (tokenization.py, shared with the
endpoint backend), batching (batching.py), scoring (scoring.py), generation
(generation.py), activation patching (patching.py).
"""

from __future__ import annotations

import inspect
import re
import shutil
import tempfile
import time
from pathlib import Path

import torch

from unlearnbench import progress
from unlearnbench.errors import CheckpointError, NonFiniteOutputError
from unlearnbench.models.batching import MAX_AUTO_BATCH, Batching
from unlearnbench.models.checkpoint import ResolvedCheckpoint, fingerprint, resolve
from unlearnbench.models.device import device_map_kind, resolve_device, resolve_dtype
from unlearnbench.models.generation import Generation
from unlearnbench.models.patching import Patching, find_decoder_blocks
from unlearnbench.models.scoring import Scoring
from unlearnbench.models.tokenization import Tokenization


class ModelHandle(Tokenization, Batching, Scoring, Generation, Patching):
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
        self.reuse_prefix_cache = True  # generate(): run a shared prompt prefix once (off only to measure it)
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
        fingerprint_secret: bytes | None = None,
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
            fingerprint=fingerprint(resolved.files, fingerprint_memo, fingerprint_secret),
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

    @property
    def context_length(self) -> int:
        """The longest sequence the model's positions cover."""
        config = self.model.config
        return int(getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", 1024))

    @property
    def architecture(self) -> str:
        return type(self.model).__name__



def _load_failure(exc: Exception) -> str:
    """One line for a failed weights load (torch's own messages run to a page)."""
    text = str(exc)
    if "Weights only load failed" in text:
        found = re.search(r"Unsupported global: GLOBAL ([\w.]+)", text)
        what = f" (it needs {found.group(1)})" if found else ""
        return (f"its .bin pickle holds objects that torch.load(weights_only=True) refuses to run{what}; "
                "load it only if you trust it, and save it as safetensors")
    return f"{type(exc).__name__}: {text.strip().splitlines()[0] if text.strip() else ''}"




def load_backend(source: str, *, name: str, settings) -> ModelHandle:
    """The Hugging Face backend's loader (backends.py)."""
    return ModelHandle.load(source, name=name, device=settings.device, device_map=settings.device_map,
                            dtype=settings.dtype, batch_size=settings.batch_size,
                            fingerprint_memo=settings.fingerprint_memo, fingerprint_secret=settings.cache_secret)
