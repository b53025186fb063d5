"""The run's models: each checkpoint loaded once per process through its
backend, attacked copies built into the cache, released after its last
test; the fixture zoo's checkpoints built when a run first needs them."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Iterator

from unlearnbench import progress
from unlearnbench.backends import LoadSettings, backend_for
from unlearnbench.errors import CheckpointError, MissingCapability
from unlearnbench.models.checkpoint import CheckpointSpec, judge_source
from unlearnbench.models.interface import LanguageModel
from unlearnbench.options import BenchOptions


class ModelPool:
    def __init__(self, options: BenchOptions):
        self.options = options
        self._handles: dict[str, LanguageModel] = {}  # checkpoint path -> its loaded model
        self._fingerprints: dict[str, str] = {}  # checkpoint path -> fingerprint

    @property
    def load_settings(self) -> LoadSettings:
        options = self.options
        return LoadSettings(
            device=options.device,
            device_map=options.device_map,
            dtype=options.dtype,
            batch_size=options.batch_size,
            memory_budget=options.memory_budget,
            fingerprint_memo=options.cache_dir / "fingerprints.json",
            cache_secret=options.cache_secret,
            tokenizers=options.tokenizers,
            concurrency=options.endpoint_concurrency,
            endpoint_timeout=options.endpoint_timeout,
            base_model=options.base_model,
        )

    def validate(self) -> None:
        """Cheap checks of every named checkpoint (paths, files, headers)."""
        names = [spec.name for spec in self.options.models]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise CheckpointError(", ".join(dupes), "two --model entries share this name; name them with NAME=PATH")
        specs = [spec for spec in [*self.options.models, self.options.full, self.options.retain] if spec is not None]
        for spec in specs:
            # A training run's step saved incompletely fails its own checks when it loads; its series goes on.
            if spec.zoo is None and spec.series is None:
                backend_for(spec.source).check_source(spec.source, name=spec.name, settings=self.load_settings)
        unknown = sorted(set(self.options.tokenizers) - {spec.name for spec in specs})
        if unknown:
            raise CheckpointError(
                unknown[0],
                f"--tokenizer names a model this run does not have (models: "
                f"{', '.join(spec.name for spec in specs) or 'none'})",
            )

    def spec_path(self, spec: CheckpointSpec) -> str:
        if spec.zoo is None:
            return spec.source
        from unlearnbench.fixtures import zoo

        return str(zoo.build(spec.zoo, self.options.cache_dir))

    def attach(self, spec: CheckpointSpec, handle: LanguageModel) -> None:
        """Evaluate `spec` on a model already in memory (a model under
        training: callbacks.py) instead of loading its source."""
        self._handles[self.spec_path(spec)] = handle

    def handle(self, spec: CheckpointSpec) -> LanguageModel:
        """The loaded model for `spec` (through its backend), loaded once per process."""
        path = self.spec_path(spec)
        if path not in self._handles:
            self._handles[path] = backend_for(path).load_model(path, name=spec.name, settings=self.load_settings)
        return self._handles[path]

    def loaded(self, spec: CheckpointSpec) -> LanguageModel | None:
        """`spec`'s model if this process has loaded it, else None (nothing loads)."""
        return self._handles.get(self.spec_path(spec))

    @property
    def held(self) -> dict[str, LanguageModel]:
        """The models this process holds now, by path (a copy)."""
        return dict(self._handles)

    def forget(self, spec: CheckpointSpec) -> None:
        """Drop `spec`'s model without releasing it (its outputs were not finite: nothing reuses it)."""
        self._handles.pop(self.spec_path(spec), None)

    def release(self, spec: CheckpointSpec, pinned: Iterable[CheckpointSpec] = ()) -> None:
        """Free a checkpoint's model unless it is one of `pinned` (the reference models)."""
        path = self.spec_path(spec)
        if path in {self.spec_path(ref) for ref in pinned} or path not in self._handles:
            return
        self._handles.pop(path).release()

    @contextlib.contextmanager
    def attacked(self, model: LanguageModel, attack) -> Iterator[LanguageModel]:
        """The attacked copy of a loaded model (attacks.py), built once into
        the cache and released when the caller is done with it."""
        from unlearnbench import attacks
        from unlearnbench.cache import file_lock
        from unlearnbench.models.checkpoint import resolve

        path = next((p for p, loaded in self._handles.items() if loaded is model), None)
        if path is None or not backend_for(path).local_weights:
            raise MissingCapability(
                f"{model.name}: an attack transforms the weights, which its backend does not hold in this process"
            )
        out = attacks.attacked_dir(self.options.cache_dir, model.fingerprint, attack)
        with file_lock(out.with_name(out.name + ".lock")), progress.step(f"{model.name}: {attack.name} attack"):
            attacks.build(resolve(path, base_model=self.options.base_model), out, attack)
        spec = CheckpointSpec(name=f"{model.name}+{attack.name}", source=str(out))
        handle = self.handle(spec)
        try:
            yield handle
        finally:
            self._handles.pop(self.spec_path(spec), None)
            handle.release()

    def helper_model(self, source: str) -> LanguageModel:
        """A model a metric uses as a tool (an `hf:` judge), loaded once per process."""
        return self.handle(CheckpointSpec(name="judge", source=judge_source(source)))

    @staticmethod
    def judge_endpoint(url: str, model: str):
        """A judge at an OpenAI-compatible chat server (an `openai:` judge)."""
        from unlearnbench.judge_endpoint import OpenAIJudge

        return OpenAIJudge(url, model)

    def fingerprint_of(self, spec: CheckpointSpec) -> str:
        """The checkpoint's fingerprint from its files (memoised digests), without loading it."""
        path = self.spec_path(spec)
        if path not in self._fingerprints:
            loaded = self._handles.get(path)
            self._fingerprints[path] = (
                loaded.fingerprint
                if loaded is not None
                else backend_for(path).fingerprint_of(path, name=spec.name, settings=self.load_settings)
            )
        return self._fingerprints[path]

    def build_zoo(self, names: list[str]) -> None:
        """Train the fixture-zoo recipes among `names` that the cache lacks (once; cached after)."""
        from unlearnbench.fixtures import zoo

        missing = zoo.missing(names, self.options.cache_dir)
        if not missing:
            return
        # One line per recipe as it is built: two build at a time, so no single step line fits.
        progress.note(f"training the fixture zoo: {', '.join(missing)} (once; cached after)")
        started = time.perf_counter()
        zoo.build_many(
            names,
            self.options.cache_dir,
            on_built=lambda name, seconds, done, total: progress.note(
                f"zoo {done}/{total}: {name} trained in {seconds:.1f} s"
            ),
        )
        progress.note(f"fixture zoo trained: {time.perf_counter() - started:.1f} s")
