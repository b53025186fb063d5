"""Loading a checkpoint into the Hugging Face backend: an HF directory, a
Hub id or a GGUF file, its tokenizer checked against its embeddings, the
weights placed on a device or spread by a device map; any failure is one
line naming the checkpoint."""

from __future__ import annotations

import contextlib
import functools
import os
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from unlearnbench import progress
from unlearnbench.errors import CheckpointError
from unlearnbench.models.checkpoint import TOKENIZER_VOCAB_FILES, ResolvedCheckpoint, fingerprint, resolve
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


def load_weights(source: str | ResolvedCheckpoint, *, name: str | None = None, device: str = "auto",
                 dtype: str = "auto", fingerprint_memo: Path | None = None, fingerprint_secret: bytes | None = None,
                 device_map: str | dict | None = None) -> LoadedWeights:
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
    # An adapter's weights and config are its base's; its tokenizer its own where it saved one.
    weights_dir = resolved.base.directory if resolved.kind == "adapter" else resolved.directory
    tokenizer_dir = resolved.directory if resolved.kind != "adapter" or any(
        (resolved.directory / f).is_file() for f in TOKENIZER_VOCAB_FILES) else weights_dir
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
        with progress.step(f"loading {name or Path(where).name} on {placement}"):
            try:
                model = AutoModelForCausalLM.from_pretrained(str(weights_dir), dtype=torch_dtype, **kwargs)
            except Exception as exc:  # noqa: BLE001
                raise CheckpointError(label, f"cannot load weights: {_load_failure(exc)}") from None
            if resolved.kind == "adapter":
                model = _with_adapter(model, resolved.directory, label)
            if device_map is None:
                model.to(device=torch_device, dtype=torch_dtype)
        return LoadedWeights(model, tokenizer, name=name or Path(where).name, source=where,
                             fingerprint=fingerprint(resolved.files, fingerprint_memo, fingerprint_secret),
                             load_seconds=time.perf_counter() - started, offload_folder=kwargs.get("offload_folder"))


def _with_adapter(model, adapter_dir: Path, label: str):
    """The base model with the PEFT adapter applied, not merged. peft injects
    the adapter's layers into the base model's own modules, so the base model
    itself (`get_base_model()`) runs with them: every metric, the decoder
    blocks activation patching drives included, sees the adapted model."""
    from peft import PeftModel

    try:
        adapted = PeftModel.from_pretrained(model, str(adapter_dir), is_trainable=False)
    except Exception as exc:  # noqa: BLE001 - an adapter that does not fit its base: one line
        raise CheckpointError(label, f"cannot apply the adapter to its base model ({type(exc).__name__}: {exc})") from None
    return adapted.get_base_model().eval()


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


def _load_failure(exc: Exception) -> str:
    """One line for a failed weights load (torch's own messages run to a page)."""
    text = str(exc)
    if "Weights only load failed" in text:
        found = re.search(r"Unsupported global: GLOBAL ([\w.]+)", text)
        what = f" (it needs {found.group(1)})" if found else ""
        return (f"its .bin pickle holds objects that torch.load(weights_only=True) refuses to run{what}; "
                "load it only if you trust it, and save it as safetensors")
    return f"{type(exc).__name__}: {text.strip().splitlines()[0] if text.strip() else ''}"
