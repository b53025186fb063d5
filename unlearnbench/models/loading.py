"""Loading a checkpoint into the Hugging Face backend: an HF directory, a
Hub id or a GGUF file, its tokenizer checked against its embeddings, the
weights placed on a device or spread by a device map; any failure is one
line naming the checkpoint."""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from unlearnbench import libraries, progress
from unlearnbench.errors import CheckpointError
from unlearnbench.models.allocator import return_freed_memory
from unlearnbench.models.checkpoint import ResolvedCheckpoint, fingerprint, resolve
from unlearnbench.models.device import device_map_kind, resolve_device, resolve_dtype


@dataclass
class LoadedWeights:
    model: torch.nn.Module
    tokenizer: object
    name: str
    source: str
    fingerprint: str
    load_seconds: float
    offload_folder: str | None = None  # weights of modules a device map puts on "disk"
    # An adapter's: takes the adapter off its base and keeps the base for the next adapter (SharedBase).
    detach: Callable[[], None] | None = None


# Releasing weights of at least this size also runs a full garbage collection.
COLLECT_AFTER_RELEASING_BYTES = 256 * 2**20


def free_weights(model: torch.nn.Module, offload_folder: str | None = None) -> None:
    """Free a model's weights now (also on the GPU), even if something still
    holds the model: its parameters move to the meta device."""
    on_gpu = any(p.device.type == "cuda" for p in model.parameters())
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    if getattr(model, "hf_device_map", None) is not None:
        from accelerate.hooks import remove_hook_from_submodules

        remove_hook_from_submodules(model)  # dispatched models refuse .to() while hooked
    model.to("meta")
    if offload_folder:
        shutil.rmtree(offload_folder, ignore_errors=True)
    # Moving to meta frees the weights at once; a full collection (~0.4 s
    # in a pytest process) only frees what reference cycles still hold,
    # worth it for weights that matter to memory, not for tiny models.
    if on_gpu or weight_bytes >= COLLECT_AFTER_RELEASING_BYTES:
        gc.collect()
    if on_gpu:
        torch.cuda.empty_cache()


class SharedBase:
    """The base model of the adapter released last in this process, kept
    (adapter taken off) for the next adapter over the same base: a sweep of
    N adapters over one base loads it once and holds one base and one
    adapter, not N bases in turn. One base is kept at most, and none while a
    full checkpoint loads, so a sweep's memory stays what it is without
    adapters. A base still under a live adapter is never shared: a second
    live adapter over it (an adapter reference model) gets its own copy."""

    def __init__(self):
        self._kept: tuple[tuple, torch.nn.Module] | None = None

    def take(self, key: tuple) -> torch.nn.Module | None:
        """The kept base if it is the one `key` names (then no longer kept), else None."""
        if self._kept is not None and self._kept[0] == key:
            model, self._kept = self._kept[1], None
            return model
        return None

    def keep(self, key: tuple, model: torch.nn.Module) -> None:
        self.drop()
        self._kept = (key, model)

    def drop(self) -> None:
        if self._kept is not None:
            model, self._kept = self._kept[1], None
            free_weights(model)


SHARED_BASE = SharedBase()


def _base_key(resolved: ResolvedCheckpoint, dtype: torch.dtype, device: torch.device) -> tuple:
    """What makes a loaded base reusable: the same base files, unchanged, in the same dtype and place."""
    files = tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in resolved.adapter_base.files)
    return files, str(dtype), str(device)


def load_weights(
    source: str | ResolvedCheckpoint,
    *,
    name: str | None = None,
    device: str = "auto",
    dtype: str = "auto",
    fingerprint_memo: Path | None = None,
    fingerprint_secret: bytes | None = None,
    device_map: str | dict | None = None,
) -> LoadedWeights:
    """`device_map` (accelerate's: a strategy such as "auto", or {module:
    device}) spreads the model over several devices instead of `device`;
    inputs go to the embedding's device, and every tensor a hook captures
    or patches follows its block's own device."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # pytest output is for verdicts, not load bars
    resolved = source if isinstance(source, ResolvedCheckpoint) else resolve(source)
    started = time.perf_counter()
    kwargs: dict[str, Any] = {"gguf_file": resolved.gguf_file} if resolved.gguf_file else {}
    where = resolved.display
    # In a sweep the user knows a checkpoint by its name: errors lead with it.
    label = f"{name} ({where})" if name else where
    weights_dir, tokenizer_dir = resolved.weights_directory, resolved.tokenizer_directory
    # One parse of a GGUF file's header for the tokenizer, config and weights.
    with _gguf_parsed_once() if resolved.gguf_file else contextlib.nullcontext():
        try:
            tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir), **kwargs)
            config = AutoConfig.from_pretrained(str(weights_dir), **kwargs)
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
        # A base under a device map is spread over devices for this one model: never shared.
        base_key = (
            _base_key(resolved, torch_dtype, torch_device)
            if resolved.kind == "adapter" and device_map is None
            else None
        )
        model = SHARED_BASE.take(base_key) if base_key is not None else None
        if resolved.kind != "adapter":
            SHARED_BASE.drop()
        detach = None
        with progress.step(
            f"loading {name or Path(where).name} on {placement}"
            + (" (its base already loaded)" if model is not None else "")
        ):
            if model is None:
                try:
                    model = AutoModelForCausalLM.from_pretrained(str(weights_dir), dtype=torch_dtype, **kwargs)
                except Exception as exc:  # noqa: BLE001
                    raise CheckpointError(label, f"cannot load weights: {_load_failure(exc)}") from None
            if device_map is None:
                model.to(device=torch_device, dtype=torch_dtype)
            if resolved.kind == "adapter":  # merged in the base's final place and dtype, as a merged checkpoint loads
                model, detach = _with_adapter(model, resolved.directory, weights_dir, label, base_key)
        if device_map is None and torch_device.type == "cpu" and _weight_bytes(model) >= RETURN_FREED_MEMORY_FROM:
            return_freed_memory()
        return LoadedWeights(
            model,
            tokenizer,
            name=name or Path(where).name,
            source=where,
            fingerprint=fingerprint(resolved.files, fingerprint_memo, fingerprint_secret),
            load_seconds=time.perf_counter() - started,
            offload_folder=kwargs.get("offload_folder"),
            detach=detach,
        )


# A model on the CPU this large (SmolLM2-135M in float32 is 0.54 GB, in
# bfloat16 0.27 GB) has the process's freed tensors returned to the system
# (models/allocator.py): what that costs in page faults is small beside its
# forward passes, and what it saves is the working set's bound (scoring 16
# texts of 128 tokens on SmolLM2 peaked 775 MiB above the loaded model
# without it, 110 MiB with it). Below it, a tiny model's many short-lived
# activations would be faulted in anew (the fixture zoo).
RETURN_FREED_MEMORY_FROM = 256 << 20


def _weight_bytes(model: torch.nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters())


def _with_adapter(base: torch.nn.Module, adapter_dir: Path, base_dir: Path, label: str, base_key: tuple | None):
    """The base model with the PEFT adapter applied, and the function that
    takes the adapter off again.

    peft injects the adapter's layers into the base model's own modules, so
    the base model itself (`get_base_model()`) runs the adapted model: every
    metric, the decoder blocks activation patching drives included, sees it.
    The adapter's weights are then merged into those layers (peft's
    `merge_adapter`: the weights a `merge_and_unload()` checkpoint holds, and
    a forward pass as fast as that checkpoint's, not one with a LoRA branch
    per layer), after keeping the layers' own weights; taking the adapter off
    (`unload()`) and putting those weights back returns the base bit for bit,
    to be kept for the next adapter (SharedBase) where `base_key` says it may
    be, else freed. An adapter that trains the base's biases changes them as
    it loads: its base is never shared."""
    PeftModel = libraries.peft().PeftModel
    from peft.tuners.tuners_utils import BaseTunerLayer

    try:
        adapted = PeftModel.from_pretrained(base, str(adapter_dir), is_trainable=False)
    except Exception as exc:  # noqa: BLE001 - an adapter that does not fit its base: one line
        free_weights(base)  # half-applied: not a base to share
        raise CheckpointError(
            label,
            f"cannot apply the adapter to its base model {base_dir}: "
            f"{_adapter_misfit(exc)}; --base-model names the model it was trained on",
        ) from None
    config = adapted.peft_config[adapted.active_adapter]
    if config.is_prompt_learning:
        free_weights(adapted.get_base_model())
        raise CheckpointError(
            label,
            f"a {config.peft_type.value} adapter adds virtual tokens to every input, which "
            "the suites' prompts do not carry: only adapters of weights (LoRA, IA3, LoHa, "
            "...) are evaluated",
        )
    if getattr(config, "bias", "none") != "none":
        base_key = None
    model = adapted.get_base_model()
    layers = {
        name: module.get_base_layer() for name, module in model.named_modules() if isinstance(module, BaseTunerLayer)
    }
    own = (
        {
            name: {k: p.detach().clone() for k, p in layer.named_parameters(recurse=False)}
            for name, layer in layers.items()
        }
        if base_key is not None
        else {}
    )
    adapted.merge_adapter()

    def detach() -> None:
        clean = adapted.unload()
        if base_key is None:
            free_weights(clean)
            return
        with torch.no_grad():
            for name, weights in own.items():
                layer = clean.get_submodule(name)
                for key, value in weights.items():
                    getattr(layer, key).copy_(value)
        SHARED_BASE.keep(base_key, clean)

    return model.eval(), detach


@contextlib.contextmanager
def _gguf_parsed_once():
    """Within the block, each GGUF file's header is parsed once and gguf's
    tensor-name table built once per architecture and depth.

    transformers parses the header (its metadata holds the whole tokenizer
    vocabulary: ~3.5 s for SmolLM2's 49k tokens) for the tokenizer, twice
    for the config and again for the weights, and builds the name table
    anew for every module of the model (~400 times for 30 blocks). Both are
    read-only once built. transformers imports both names from `gguf` at
    each call, so they are swapped there for the duration of one load (a
    process loads one checkpoint at a time) and put back after.
    """
    import gguf

    parse, name_table = gguf.GGUFReader, gguf.get_tensor_name_map
    readers: dict[tuple[str, str], object] = {}

    def parsed(path, mode="r"):
        key = (os.path.realpath(path), mode)
        if key not in readers:
            readers[key] = parse(path, mode)
        return readers[key]

    gguf.GGUFReader, gguf.get_tensor_name_map = parsed, functools.lru_cache(maxsize=None)(name_table)
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = parse, name_table


def _adapter_misfit(exc: Exception) -> str:
    """One line for an adapter that does not fit its base: the first tensor
    whose shape differs (torch lists every one, a page per adapter), or the
    first line of any other failure."""
    found = re.search(
        r"size mismatch for ([\w.]+): copying a param with shape torch\.Size\((\[[^\]]*\])\) from "
        r"checkpoint, the shape in current model is torch\.Size\((\[[^\]]*\])\)",
        str(exc),
    )
    if found:
        tensor = found.group(1).removeprefix("base_model.model.").replace(".default.", ".")
        return (
            f"it was trained for a model of another shape ({tensor} is {found.group(2)} in the adapter, "
            f"{found.group(3)} in this base)"
        )
    return _load_failure(exc)


def _load_failure(exc: Exception) -> str:
    """One line for a failed weights load (torch's own messages run to a page)."""
    text = str(exc)
    if "Weights only load failed" in text:
        found = re.search(r"Unsupported global: GLOBAL ([\w.]+)", text)
        what = f" (it needs {found.group(1)})" if found else ""
        return (
            f"its .bin pickle holds objects that torch.load(weights_only=True) refuses to run{what}; "
            "load it only if you trust it, and save it as safetensors"
        )
    return f"{type(exc).__name__}: {text.strip().splitlines()[0] if text.strip() else ''}"
