"""`Bench`: one evaluation session — checkpoints, reference models, data,
gates and memoised metric results. The pytest plugin drives it; a notebook
or the CLI can too (nothing here imports pytest).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from unlearnbench import progress
from unlearnbench.cache import DEFAULT_CACHE_DIR, DiskCache
from unlearnbench.errors import CheckpointError, NonFiniteOutputError, UnlearnbenchError
from unlearnbench.metrics.core import MetricResult, Unavailable, metric_from_dict, seeded
from unlearnbench.models.checkpoint import CheckpointSpec, resolve
from unlearnbench.suites import SUITES, sweep_checkpoints, zoo_checkpoints
from unlearnbench.thresholds import Check, apply_overrides, load_suite_thresholds

REFERENCE_ROLES = ("full", "retain")


@dataclass
class BenchOptions:
    models: list[CheckpointSpec]  # empty: each suite's default fixture-zoo checkpoints
    full: CheckpointSpec | None = None
    retain: CheckpointSpec | None = None
    thresholds_override: Path | None = None
    data_dirs: dict[str, str] = field(default_factory=dict)  # suite -> dir or hf:ID ("*" = every suite)
    suite_options: dict[str, dict[str, str]] = field(default_factory=dict)  # suite -> key -> value
    device: str = "auto"
    dtype: str = "auto"
    batch_size: int | None = None
    cache_dir: Path = DEFAULT_CACHE_DIR
    strict_ci: bool = False
    seed: int = 0
    shard: object | None = None  # shard.Shard: evaluate only this shard's checkpoints


@dataclass
class SuiteRun:
    """One suite evaluated on one checkpoint."""

    metrics: dict[str, MetricResult | Unavailable]
    data: dict
    seconds: float
    checkpoint: dict = field(default_factory=dict)  # the evaluated model's description (handle.describe())


class Bench:
    def __init__(self, options: BenchOptions):
        self.options = options
        self.cache = DiskCache(options.cache_dir)
        self.gates: dict[str, dict[str, Check]] = {}
        self._handles: dict[str, object] = {}
        self._data: dict[str, object] = {}
        self._runs: dict[tuple[str, str], SuiteRun] = {}
        self._failures: dict[tuple[str, str], str] = {}
        self._broken: dict[str, CheckpointError] = {}  # checkpoint name -> why it cannot be evaluated
        self._refused: dict[tuple[str, str], CheckpointError] = {}  # (checkpoint, suite) found unfit before loading

    # ------------------------------------------------------------ validation
    def validate_checkpoints(self) -> None:
        """Cheap checks of every named checkpoint (paths, files, headers)."""
        names = [spec.name for spec in self.options.models]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise CheckpointError(", ".join(dupes), "two --model entries share this name; name them with NAME=PATH")
        for spec in [*self.options.models, self.options.full, self.options.retain]:
            if spec is not None and spec.zoo is None:
                resolve(spec.source)

    def checkpoints(self, suite: str) -> list[CheckpointSpec]:
        return sweep_checkpoints(suite, self.options.models, self.options.shard)

    def reference_spec(self, role: str, suite: str) -> CheckpointSpec | None:
        """--full-model / --retain-model; on the default zoo, the suite's zoo references."""
        spec = getattr(self.options, role)
        if spec is None and not self.options.models:
            zoo_name = dict(SUITES[suite].default_references).get(role)
            spec = zoo_checkpoints([zoo_name])[0] if zoo_name else None
        return spec

    def session_reference(self, role: str):
        """The reference model of the run, whichever collected suite asks."""
        specs = {spec.source: spec for suite in self.gates if (spec := self.reference_spec(role, suite))}
        if len(specs) > 1:
            raise UnlearnbenchError(f"collected suites default to different {role} models: {', '.join(specs)}")
        return self.handle(next(iter(specs.values()))) if specs else None

    def prepare_suites(self, suites: list[str], thresholds_files: dict[str, Path]) -> None:
        """Load and validate every collected suite's gate and data, before any model
        runs; then build the fixture-zoo checkpoints the run needs (cached)."""
        for suite in suites:
            if suite not in SUITES:
                raise UnlearnbenchError(f"unknown suite '{suite}' (known: {', '.join(SUITES)})")
            self.gates[suite] = load_suite_thresholds(thresholds_files[suite], suite, SUITES[suite].metrics,
                                                      SUITES[suite].scale_of)
        if self.options.thresholds_override:
            apply_overrides(
                self.options.thresholds_override, self.gates, {name: spec.metrics for name, spec in SUITES.items()}
            )
        for suite in suites:
            self.data(suite)
        zoo_names = [
            spec.zoo
            for suite in suites
            for spec in [*self.checkpoints(suite), *(self.reference_spec(r, suite) for r in REFERENCE_ROLES)]
            if spec is not None and spec.zoo
        ]
        if zoo_names:
            from unlearnbench.fixtures import zoo

            zoo.build_many(zoo_names, self.options.cache_dir)
        if "uds" in suites:
            self._check_patching_tokenizers()

    def _check_patching_tokenizers(self) -> None:
        """UDS patches activations between models, so they must share the full
        model's tokenizer: checked from the tokenizer files before any weights
        load. A retain model that differs stops the run; a checkpoint that
        differs fails its own UDS checks in one line."""
        from unlearnbench.models.checkpoint import tokenizer_signature

        full = self.reference_spec("full", "uds")
        expected = full and tokenizer_signature(self._spec_path(full))
        if expected is None:
            return  # no full model (UDS is unavailable) or a GGUF one (checked at run time)
        retain = self.reference_spec("retain", "uds")
        if retain is not None and tokenizer_signature(self._spec_path(retain)) not in (None, expected):
            raise CheckpointError(retain.source, f"--retain-model: its tokenizer differs from the full model's "
                                  f"({full.source}); UDS patches activations between them and needs one tokenizer")
        for spec in self.checkpoints("uds"):
            if tokenizer_signature(self._spec_path(spec)) not in (None, expected):
                self._refused[(spec.name, "uds")] = CheckpointError(
                    spec.name, f"its tokenizer differs from the full model's ({full.source}): activation patching "
                               "needs one tokenizer, so UDS cannot be computed for it")

    # ------------------------------------------------------------------ models
    def _spec_path(self, spec: CheckpointSpec) -> str:
        if spec.zoo is None:
            return spec.source
        from unlearnbench.fixtures import zoo

        return str(zoo.build(spec.zoo, self.options.cache_dir))

    def handle(self, spec: CheckpointSpec):
        """The loaded model for `spec`, loaded once per process."""
        path = self._spec_path(spec)
        if path not in self._handles:
            from unlearnbench.models.handle import ModelHandle

            self._handles[path] = ModelHandle.load(
                path,
                name=spec.name,
                device=self.options.device,
                dtype=self.options.dtype,
                batch_size=self.options.batch_size,
                fingerprint_memo=self.options.cache_dir / "fingerprints.json",
            )
        return self._handles[path]

    def release(self, spec: CheckpointSpec) -> None:
        """Free a checkpoint's model after its last test (reference models stay):
        a sweep holds the references and one checkpoint per process. Its
        results stay; a later test of it would load it again."""
        path = self._spec_path(spec)
        pinned = {self._spec_path(ref) for suite in self.gates for role in REFERENCE_ROLES
                  if (ref := self.reference_spec(role, suite)) is not None}
        if path in pinned or path not in self._handles:
            return
        handle = self._handles.pop(path)
        handle.release()

    def reference(self, role: str, suite: str):
        spec = self.reference_spec(role, suite)
        return None if spec is None else self.handle(spec)

    # -------------------------------------------------------------------- data
    def data(self, suite: str):
        if suite not in self._data:
            source = self.options.data_dirs.get(suite) or self.options.data_dirs.get("*")
            if source is None and not self.options.models and SUITES[suite].default_data == "zoo":
                from unlearnbench.fixtures import zoo

                source = str(zoo.data_dir(self.options.cache_dir))
            self._data[suite] = SUITES[suite].load_data(source, self.options.suite_options.get(suite, {}))
        return self._data[suite]

    def reference_op(self, role: str, suite: str, op: str, params: dict, compute):
        """`compute(reference handle)` for the run's `role` model, cached on disk
        (key: its fingerprint, the data's, op, params, suite code version);
        None when there is no such reference model."""
        handle = self.reference(role, suite)
        if handle is None:
            return None
        parts = {
            "op": f"{suite}:{op}",
            "model": handle.fingerprint,
            "data": self.data(suite).fingerprint,
            "version": SUITES[suite].version,
            "params": {**params, "dtype": str(handle.dtype)},
        }
        return self.cache.get_or_compute(parts, lambda: compute(handle))

    # ----------------------------------------------------------------- metrics
    def run(self, spec: CheckpointSpec, suite: str) -> SuiteRun:
        """The suite's metrics on a checkpoint, computed once per session.

        A checkpoint that cannot load or computes non-finite logits is broken
        for every suite: its later checks fail at once with the same one-line
        CheckpointError, and its model is released."""
        key = (spec.name, suite)
        if spec.name in self._broken:
            raise self._broken[spec.name]
        if key in self._refused:
            raise self._refused[key]
        if key in self._failures:  # one failed evaluation fails its other checks at once
            raise UnlearnbenchError(f"evaluating {suite} on {spec.name} failed earlier: {self._failures[key]}")
        if key not in self._runs:
            try:
                handle = self.handle(spec)
            except CheckpointError as exc:
                self._broken[spec.name] = exc
                raise
            try:
                self._runs[key] = self._evaluate(handle, suite)
                self._runs[key].checkpoint = handle.describe()
            except NonFiniteOutputError as exc:
                if exc.path != handle.name:  # a reference model's: not this checkpoint's fault
                    self._failures[key] = str(exc)
                    raise
                self._broken[spec.name] = exc
                self._handles.pop(self._spec_path(spec), None)
                raise
            except Exception as exc:
                self._failures[key] = f"{type(exc).__name__}: {exc}"
                raise
        return self._runs[key]

    def reference_run(self, role: str, suite: str) -> SuiteRun | None:
        """The suite on a reference model, cached on disk across sessions."""
        handle = self.reference(role, suite)
        if handle is None:
            return None
        key = (f"<{role}>", suite)
        if key[0] in self._broken:
            raise self._broken[key[0]]
        if key not in self._runs:
            data = self.data(suite)
            parts = {
                "op": f"suite:{suite}",
                "model": handle.fingerprint,
                "data": data.fingerprint,
                "version": SUITES[suite].version,
                "params": {"dtype": str(handle.dtype), "seed": self.options.seed},
            }
            try:
                stored = self.cache.get_or_compute(parts, lambda: _to_plain(self._evaluate(handle, suite)))
            except NonFiniteOutputError as exc:
                self._broken[key[0]] = exc  # every check relative to it fails with this line
                raise
            self._runs[key] = _from_plain(stored)
        return self._runs[key]

    def _evaluate(self, handle, suite: str) -> SuiteRun:
        import torch

        spec = SUITES[suite]
        data = self.data(suite)
        torch.manual_seed(self.options.seed)
        started = time.perf_counter()
        with progress.step(f"{handle.name}: {suite} suite"), seeded(self.options.seed):
            metrics = spec.evaluate(handle, data, self)
        missing = set(spec.metrics) - set(metrics)
        if missing:
            raise UnlearnbenchError(f"suite {suite} did not compute {', '.join(sorted(missing))}")
        return SuiteRun(
            metrics=metrics,
            data={"fingerprint": data.fingerprint, "source": data.source},
            seconds=time.perf_counter() - started,
        )

    def judge(self, spec: CheckpointSpec, suite: str, check_name: str):
        check = self.gates[suite].get(check_name)
        if check is None:
            raise UnlearnbenchError(
                f"suite {suite} has no check '{check_name}' in its thresholds (it has: {', '.join(self.gates[suite])})"
            )
        if check.relative_to and self.reference_spec(check.relative_to, suite) is None:
            return check.judge({}, None), None  # skipped, naming the missing option: nothing to evaluate
        run = self.run(spec, suite)
        reference = self.reference_run(check.relative_to, suite) if check.relative_to else None
        others = {}
        if check.requires.get("separated_from") and reference is not None:
            other = self.reference_run(check.requires["separated_from"], suite)
            others[check.requires["separated_from"]] = other.metrics if other else None
        verdict = check.judge(
            run.metrics, reference.metrics if reference else None, strict_ci=self.options.strict_ci, others=others
        )
        return verdict, run


def _to_plain(run: SuiteRun) -> dict:
    return {"metrics": {k: m.to_dict() for k, m in run.metrics.items()}, "data": run.data, "seconds": run.seconds}


def _from_plain(plain: dict) -> SuiteRun:
    return SuiteRun(
        metrics={k: metric_from_dict(m) for k, m in plain["metrics"].items()},
        data=plain["data"],
        seconds=plain["seconds"],
    )
