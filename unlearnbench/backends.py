"""The registry of backends: where a model under test runs.

A checkpoint's source selects its backend by prefix: `openai:URL#MODEL` is
served by an OpenAI-compatible endpoint; anything else (a directory, a
.gguf file, `hf:ORG/NAME`, a fixture-zoo recipe) is loaded with Hugging Face
transformers in this process. Other packages add backends through the
entry-point group `unlearnbench.backends`: each entry point names a
`Backend` whose `name` is the prefix it serves (`mine = "pkg.mod:BACKEND"`
serves `--model NAME=mine:...`).

Functions are named as "module:function" strings, imported on first use, so
importing the registry costs nothing (torch is not imported for it).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from unlearnbench.registry import Registry

ENTRY_POINT_GROUP = "unlearnbench.backends"
DEFAULT_BACKEND = "hf"


@dataclass(frozen=True)
class LoadSettings:
    """The run's settings every backend receives (each uses what applies to it)."""

    device: str = "auto"
    device_map: str | dict | None = None
    dtype: str = "auto"
    batch_size: int | None = None
    memory_budget: int | None = None  # bytes a batch's working memory may take (None: the device's default)
    fingerprint_memo: Path | None = None
    cache_secret: bytes | None = None  # --cache-key-file: memo entries are signed and checked with it
    tokenizers: dict[str, str] = field(default_factory=dict)  # model name -> tokenizer directory (--tokenizer)
    concurrency: int = 8  # requests in flight per endpoint model
    endpoint_timeout: float = 120.0  # seconds one endpoint request may wait for its reply
    base_model: str | None = None  # --base-model: the base of every PEFT adapter checkpoint


@dataclass(frozen=True)
class Backend:
    name: str  # the source prefix it serves ("hf": every source no other backend claims)
    # (source, *, name, settings) -> LanguageModel
    load: str
    # (source, *, name, settings) -> None: cheap checks before any model loads; raises CheckpointError
    check: str
    # (source, *, name, settings) -> str: the model's identity for cache keys, without loading it
    fingerprint: str
    # Whether the weights are in this process: tokenizer-file checks and activation patching need them.
    local_weights: bool = True

    def _call(self, target: str, source: str, name: str, settings: LoadSettings):
        module, _, attr = target.partition(":")
        function: Callable = getattr(importlib.import_module(module), attr)
        return function(source, name=name, settings=settings)

    def load_model(self, source: str, *, name: str, settings: LoadSettings):
        return self._call(self.load, source, name, settings)

    def check_source(self, source: str, *, name: str, settings: LoadSettings) -> None:
        self._call(self.check, source, name, settings)

    def fingerprint_of(self, source: str, *, name: str, settings: LoadSettings) -> str:
        return self._call(self.fingerprint, source, name, settings)


BUILTIN_BACKENDS: dict[str, Backend] = {
    backend.name: backend
    for backend in (
        Backend(
            "hf",
            load="unlearnbench.models.handle:load_backend",
            check="unlearnbench.models.checkpoint:check_source",
            fingerprint="unlearnbench.models.checkpoint:source_fingerprint",
        ),
        Backend(
            "openai",
            load="unlearnbench.models.endpoint:load_backend",
            check="unlearnbench.models.endpoint:check_source",
            fingerprint="unlearnbench.models.endpoint:source_fingerprint",
            local_weights=False,
        ),
    )
}

BACKENDS: Registry[Backend] = Registry(ENTRY_POINT_GROUP, Backend, BUILTIN_BACKENDS)


def backend_for(source: str) -> Backend:
    """The backend whose prefix `source` starts with (`NAME:`), else Hugging Face."""
    prefix, sep, _ = source.partition(":")
    if sep and prefix in BACKENDS and prefix != DEFAULT_BACKEND:
        return BACKENDS[prefix]
    return BACKENDS[DEFAULT_BACKEND]
