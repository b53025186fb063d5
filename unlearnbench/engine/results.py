"""Each suite's metrics on each checkpoint: computed once per process, read
from the result cache when an earlier run computed them, and what failed:
a checkpoint broken for every suite, a suite that failed on one checkpoint,
a checkpoint a suite's preflight refused."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from unlearnbench import cancel, progress
from unlearnbench.cache import DiskCache
from unlearnbench.cancel import Cancelled
from unlearnbench.contracts import ClusteredData, OptionalData, SuiteData
from unlearnbench.engine.data import SuiteDataStore
from unlearnbench.engine.models import ModelPool
from unlearnbench.engine.roster import REFERENCE_ROLES, Roster
from unlearnbench.errors import CheckpointError, MissingCapability, NonFiniteOutputError, UnlearnbenchError
from unlearnbench.evidence import value_estimate
from unlearnbench.metrics.core import (
    BOOTSTRAP_RESAMPLES,
    Deferred,
    MetricResult,
    References,
    Unavailable,
    metric_from_dict,
    seeded,
)
from unlearnbench.models.checkpoint import CheckpointSpec
from unlearnbench.models.interface import LanguageModel
from unlearnbench.openai_api import EndpointError
from unlearnbench.options import BenchOptions
from unlearnbench.suites import SUITES


@dataclass
class SuiteRun:
    """One suite evaluated on one checkpoint."""

    metrics: dict[str, MetricResult | Unavailable]
    data: dict
    seconds: float
    checkpoint: dict = field(default_factory=dict)  # the evaluated model's description (handle.describe())
    cached: bool = False  # read from the result cache (an earlier run computed it)


class Results:
    def __init__(
        self, options: BenchOptions, cache: DiskCache, roster: Roster, models: ModelPool, store: SuiteDataStore
    ):
        self.options, self.cache, self.roster, self.models, self.store = options, cache, roster, models, store
        self._runs: dict[tuple[str, str], SuiteRun] = {}  # (checkpoint name or <role>, suite) -> its run
        self._failures: dict[tuple[str, str], str] = {}
        self._broken: dict[str, Exception] = {}  # checkpoint name -> why it cannot be evaluated
        self._refused: dict[tuple[str, str], CheckpointError] = {}  # (checkpoint, suite) found unfit before loading
        self._started: dict[str, float] = {}  # checkpoint name -> time.monotonic() of its first evaluation

    def refuse(self, name: str, suite: str, problem: str) -> None:
        """A suite's preflight found checkpoint `name` unfit: that suite's checks of it fail with `problem`."""
        self._refused[(name, suite)] = CheckpointError(name, problem)

    def has_run(self, spec: CheckpointSpec, suite: str) -> bool:
        return (spec.name, suite) in self._runs

    def run(self, spec: CheckpointSpec, suite: str) -> SuiteRun:
        """The suite's metrics on a checkpoint, computed once (see `_cached_run`).

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
                with self._deadline(spec):
                    self._runs[key] = self._cached_run(spec, suite)
            except Cancelled as exc:  # interrupted, or past its deadline: its remaining checks fail so too
                self._broken[spec.name] = exc
                raise
            except NonFiniteOutputError as exc:
                loaded = self.models.loaded(spec)
                if loaded is None or exc.path != loaded.name:  # a reference model's: not this checkpoint's fault
                    self._failures[key] = str(exc)
                    raise
                self._broken[spec.name] = exc
                self.models.forget(spec)
                raise
            except (CheckpointError, EndpointError) as exc:  # its files, weights or server: broken for every suite
                self._broken[spec.name] = exc
                raise
            except Exception as exc:
                self._failures[key] = f"{type(exc).__name__}: {exc}"
                raise
        return self._runs[key]

    def reference_run(self, role: str, suite: str) -> SuiteRun | None:
        """The suite on a reference model (cached on disk across sessions, as every run)."""
        spec = self.roster.reference_spec(role, suite)
        if spec is None:
            return None
        key = (f"<{role}>", suite)
        if key[0] in self._broken:
            raise self._broken[key[0]]
        if key not in self._runs:
            try:
                self._runs[key] = self._cached_run(spec, suite)
            except NonFiniteOutputError as exc:
                self._broken[key[0]] = exc  # every check relative to it fails with this line
                raise
        return self._runs[key]

    def reference_values(self, suite: str) -> dict[str, dict[str, float]]:
        """{role: {metric: value}} of the suite's reference models that
        evaluate (a broken one is left out): what an unlearning curve reads
        its steps against (report/curves.py)."""
        out = {}
        for role in REFERENCE_ROLES:
            try:
                run = self.reference_run(role, suite)
            except UnlearnbenchError:
                continue
            if run is not None:
                out[role] = {name: m.value for name, m in run.metrics.items() if isinstance(m, MetricResult)}
        return out

    def _deadline(self, spec: CheckpointSpec):
        """--checkpoint-deadline for `spec`, counted from its first evaluation."""
        limit = self.options.checkpoint_deadline
        if limit is None:
            return contextlib.nullcontext()
        started = self._started.setdefault(spec.name, time.monotonic())
        return cancel.deadline(
            started + limit,
            f"{spec.name}: its evaluation passed the --checkpoint-deadline of "
            f"{limit:g} s; its remaining checks are not evaluated",
        )

    def _run_parts(self, spec: CheckpointSpec, suite: str) -> dict:
        """Cache key of a suite's results on a checkpoint: its weights, the data
        (with the suite's parameters), the suite's code version, the run's
        reference models (relative metrics and UDS depend on them), dtype,
        device kind, seed and the bootstrap's resample count. Known before any
        model loads."""
        from unlearnbench.models.device import device_map_kind, resolve_device

        references = {
            role: self.models.fingerprint_of(ref)
            for role in REFERENCE_ROLES
            if (ref := self.roster.reference_spec(role, suite)) is not None
        }
        return {
            "op": f"suite:{suite}",
            "model": self.models.fingerprint_of(spec),
            "data": self.store.data_key(suite),
            "version": SUITES[suite].version,
            "params": {
                "dtype": self.options.dtype,
                "device": resolve_device(self.options.device).type
                if self.options.device_map is None
                else device_map_kind(self.options.device_map),
                "seed": self.options.seed,
                "references": references,
                "bootstrap_resamples": BOOTSTRAP_RESAMPLES,
            },
        }

    def _cached_run(self, spec: CheckpointSpec, suite: str) -> SuiteRun:
        """The suite's results on `spec` from the result cache, else computed
        (loading the model only then) and stored: an interrupted sweep, rerun,
        loads none of the checkpoints it finished."""
        computed = []
        data = self.store.data(suite)
        if isinstance(data, OptionalData) and data.unavailable:  # a missing extra: no model loads
            return SuiteRun(
                metrics={n: Unavailable(n, data.unavailable) for n in self.store.metric_names(suite)},
                data=run_data(data),
                seconds=0.0,
            )

        def compute() -> dict:
            cancel.check()  # after Ctrl-C or past its deadline: no new work starts
            handle = self.models.handle(spec)
            run = self._evaluate(handle, suite)
            run.checkpoint = handle.describe()
            computed.append(run)
            return _to_plain(run)

        stored = self.cache.get_or_compute(self._run_parts(spec, suite), compute)
        run = computed[0] if computed else dataclasses.replace(_from_plain(stored), cached=True)
        attach_clusters(run.metrics, data.clusters if isinstance(data, ClusteredData) else {})
        restate_intervals(run.metrics, SUITES[suite].kind_of, SUITES[suite].scale_of)
        return run

    def _reference_model(self, role: str, suite: str) -> LanguageModel | None:
        spec = self.roster.reference_spec(role, suite)
        return None if spec is None else self.models.handle(spec)

    def _evaluate(self, handle: LanguageModel, suite: str) -> SuiteRun:
        import torch

        spec = SUITES[suite]
        data = self.store.data(suite)
        torch.manual_seed(self.options.seed)
        started = time.perf_counter()
        refs = References(
            full=Deferred(lambda: self._reference_model("full", suite)),
            retain=Deferred(lambda: self._reference_model("retain", suite)),
            memo=self.store.memo(suite),
            load_model=self.models.helper_model,
            connect_judge=self.models.judge_endpoint,
            attacked=self.models.attacked,
        )
        with progress.step(f"{handle.name}: {suite} suite"), seeded(self.options.seed):
            try:
                metrics = spec.evaluate(handle, data, refs)
            except MissingCapability as exc:  # the backend cannot serve this suite at all
                metrics = {name: Unavailable(name, str(exc)) for name in self.store.metric_names(suite)}
        missing = set(self.store.metric_names(suite)) - set(metrics)
        if missing:
            raise UnlearnbenchError(f"suite {suite} did not compute {', '.join(sorted(missing))}")
        return SuiteRun(metrics=metrics, data=run_data(data), seconds=time.perf_counter() - started)


def attach_clusters(metrics: dict, clusters: Mapping[str, str]) -> None:
    """Give each per-item result the clusters of its items, from the suite's
    data (item id -> cluster), in place: the decision intervals count them
    (evidence.py). Read from the data on every run, cached or not, so that a
    result cached before its data named clusters is judged with them."""
    for result in metrics.values():
        if isinstance(result, MetricResult) and result.per_item:
            named = {item: clusters[item] for item in result.per_item if item in clusters}
            result.clusters = named or None


def restate_intervals(metrics: dict, kinds, scales: dict) -> None:
    """Each per-item result's 95% CI and its kind, in place, as the decision
    intervals make them (the metric's declared kind, its clusters): the
    interval a report shows beside a value is the one an absolute check
    decides on, not one that assumed independent items."""
    for name, result in metrics.items():
        if not isinstance(result, MetricResult) or not result.per_item:
            continue
        kind = kinds(name) if callable(kinds) else kinds.get(name, "unbounded")
        estimate = value_estimate(result, kind, scales.get(name))
        interval = estimate.interval(0.05)
        if interval is not None and estimate.method.startswith(("wilson", "t-clustered")):
            result.ci, result.interval = interval, estimate.method


def run_data(data: SuiteData) -> dict:
    """What the report records of a suite's data: its fingerprint and source,
    and the reference code a `convention=reference` run reproduces."""
    params = data.params
    code = {"reference_code": params["reference_code"]} if params.get("reference_code") else {}
    return {"fingerprint": data.fingerprint, "source": data.source, **code}


def _to_plain(run: SuiteRun) -> dict:
    return {
        "metrics": {k: m.to_dict() for k, m in run.metrics.items()},
        "data": run.data,
        "seconds": run.seconds,
        "checkpoint": run.checkpoint,
    }


def _from_plain(plain: dict) -> SuiteRun:
    return SuiteRun(
        metrics={k: metric_from_dict(m) for k, m in plain["metrics"].items()},
        data=plain["data"],
        seconds=plain["seconds"],
        checkpoint=plain.get("checkpoint", {}),
    )
