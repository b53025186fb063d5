"""`Bench`: one evaluation session — checkpoints, reference models, data,
gates and memoised metric results. The pytest plugin drives it; a notebook
or the CLI can too (nothing here imports pytest).
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from unlearnbench import cancel, progress
from unlearnbench.backends import LoadSettings, backend_for
from unlearnbench.cache import DiskCache, SuiteMemo, cache_key
from unlearnbench.cancel import Cancelled
from unlearnbench.contracts import ClusteredData, OptionalData, SuiteData
from unlearnbench.errors import CheckpointError, MissingCapability, NonFiniteOutputError, UnlearnbenchError
from unlearnbench.evidence import holm_adjusted, value_estimate
from unlearnbench.metrics.core import (
    BOOTSTRAP_RESAMPLES,
    Deferred,
    MetricResult,
    References,
    Unavailable,
    metric_from_dict,
    seeded,
)
from unlearnbench.models.checkpoint import CheckpointSpec, judge_source
from unlearnbench.models.interface import LanguageModel
from unlearnbench.openai_api import EndpointError
from unlearnbench.options import BenchOptions
from unlearnbench.outcome import Code, Outcome
from unlearnbench.suites import SUITES, sweep_checkpoints, zoo_checkpoints
from unlearnbench.thresholds import Check, apply_overrides, load_suite_thresholds, power_line

REFERENCE_ROLES = ("full", "retain")


@dataclass
class SuiteRun:
    """One suite evaluated on one checkpoint."""

    metrics: dict[str, MetricResult | Unavailable]
    data: dict
    seconds: float
    checkpoint: dict = field(default_factory=dict)  # the evaluated model's description (handle.describe())
    cached: bool = False  # read from the result cache (an earlier run computed it)


class Bench:
    def __init__(self, options: BenchOptions):
        self.options = options
        self.cache = DiskCache(options.cache_dir, secret=options.cache_secret)
        self.gates: dict[str, dict[str, Check]] = {}
        self._handles: dict[str, LanguageModel] = {}
        self._data: dict[str, SuiteData] = {}
        self._runs: dict[tuple[str, str], SuiteRun] = {}
        self._failures: dict[tuple[str, str], str] = {}
        self._broken: dict[str, Exception] = {}  # checkpoint name -> why it cannot be evaluated
        self._refused: dict[tuple[str, str], CheckpointError] = {}  # (checkpoint, suite) found unfit before loading
        self._fingerprints: dict[str, str] = {}  # checkpoint path -> fingerprint
        self._started: dict[str, float] = {}  # checkpoint name -> time.monotonic() of its first evaluation
        self.powers: dict[str, list[dict]] = {}  # suite -> its checks' power (Check.power), once per suite
        self._holm: dict[str, dict[tuple[str, str], float]] = {}  # checkpoint -> {(suite, check): Holm-adjusted p}

    # ------------------------------------------------------------ validation
    def validate_checkpoints(self) -> None:
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

    def checkpoints(self, suite: str) -> list[CheckpointSpec]:
        return sweep_checkpoints(suite, self.options.models, self.options.shard, self.options.zoo_extra)

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

    def prepare_suites(self, suites: list[str], thresholds_files: dict[str, Path], *, build_zoo: bool = True) -> None:
        """Load and validate every collected suite's gate and data, before any model
        runs; then build the fixture-zoo checkpoints the run needs (cached) and
        run each suite's preflight check. `build_zoo=False` (pytest --collect-only) stops
        before the zoo: listing tests never trains a model."""
        for suite in suites:
            if suite not in SUITES:
                raise UnlearnbenchError(f"unknown suite '{suite}' (known: {', '.join(SUITES)})")
            self.gates[suite] = load_suite_thresholds(
                thresholds_files[suite],
                suite,
                SUITES[suite].known_metrics,
                SUITES[suite].scale_of,
                SUITES[suite].kind_of,
            )
        if self.options.thresholds_override:
            apply_overrides(
                self.options.thresholds_override,
                self.gates,
                {name: spec.known_metrics for name, spec in SUITES.items()},
            )
        for suite in suites:
            if self.checkpoints(suite):  # a suite with nothing to run (utility on the zoo) reads no data
                self.data(suite)
        zoo_names = [
            spec.zoo
            for suite in suites
            for spec in [*self.checkpoints(suite), *(self.reference_spec(r, suite) for r in REFERENCE_ROLES)]
            if spec is not None and spec.zoo
        ]
        if not build_zoo:
            return
        if zoo_names:
            from unlearnbench.fixtures import zoo

            missing = zoo.missing(zoo_names, self.options.cache_dir)
            if missing:
                # One line per recipe as it is built: two build at a time, so no single step line fits.
                progress.note(f"training the fixture zoo: {', '.join(missing)} (once; cached after)")
                started = time.perf_counter()
                zoo.build_many(
                    zoo_names,
                    self.options.cache_dir,
                    on_built=lambda name, seconds, done, total: progress.note(
                        f"zoo {done}/{total}: {name} trained in {seconds:.1f} s"
                    ),
                )
                progress.note(f"fixture zoo trained: {time.perf_counter() - started:.1f} s")
        self._preflight(suites)

    def _preflight(self, suites: list[str]) -> None:
        """Each suite's own cheap checks (its spec's `preflight` hook), after the
        data and the zoo, before any weights load: a checkpoint it refuses fails
        that suite's checks in one line; an error stops the run."""
        for suite in suites:
            preflight = SUITES[suite].hook("preflight")
            if preflight is not None:
                for name, problem in preflight(self, suite).items():
                    self._refused[(name, suite)] = CheckpointError(name, problem)

    # ------------------------------------------------------------------ models
    def spec_path(self, spec: CheckpointSpec) -> str:
        if spec.zoo is None:
            return spec.source
        from unlearnbench.fixtures import zoo

        return str(zoo.build(spec.zoo, self.options.cache_dir))

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

    def attach(self, spec: CheckpointSpec, handle) -> None:
        """Evaluate `spec` on a model already in memory (a model under
        training: callbacks.py) instead of loading its source."""
        self._handles[self.spec_path(spec)] = handle

    def handle(self, spec: CheckpointSpec):
        """The loaded model for `spec` (through its backend), loaded once per process."""
        path = self.spec_path(spec)
        if path not in self._handles:
            self._handles[path] = backend_for(path).load_model(path, name=spec.name, settings=self.load_settings)
        return self._handles[path]

    @contextlib.contextmanager
    def attacked(self, model, attack) -> Iterator:
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

    def helper_model(self, source: str):
        """A model a metric uses as a tool (an `hf:` judge), loaded once per process."""
        return self.handle(CheckpointSpec(name="judge", source=judge_source(source)))

    @staticmethod
    def judge_endpoint(url: str, model: str):
        """A judge at an OpenAI-compatible chat server (an `openai:` judge)."""
        from unlearnbench.judge_endpoint import OpenAIJudge

        return OpenAIJudge(url, model)

    def release(self, spec: CheckpointSpec) -> None:
        """Free a checkpoint's model after its last test (reference models stay):
        a sweep holds the references and one checkpoint per process. Its
        results stay; a later test of it would load it again."""
        path = self.spec_path(spec)
        pinned = {
            self.spec_path(ref)
            for suite in self.gates
            for role in REFERENCE_ROLES
            if (ref := self.reference_spec(role, suite)) is not None
        }
        if path in pinned or path not in self._handles:
            return
        handle = self._handles.pop(path)
        handle.release()

    def reference(self, role: str, suite: str):
        spec = self.reference_spec(role, suite)
        return None if spec is None else self.handle(spec)

    # -------------------------------------------------------------------- data
    def data(self, suite: str) -> SuiteData:
        if suite not in self._data:
            SUITES[suite].check_functions()  # a wrong hook is one message now, not after the models load
            source = self.options.data_dirs.get(suite) or self.options.data_dirs.get("*")
            if source is None and not self.options.models and SUITES[suite].default_data == "zoo":
                from unlearnbench.fixtures import zoo

                source = str(zoo.data_dir(self.options.cache_dir))
            self._data[suite] = SUITES[suite].load_data(
                source, self.options.suite_options.get(suite, {}), self.metric_names(suite)
            )
        return self._data[suite]

    def metric_names(self, suite: str) -> tuple[str, ...]:
        """The suite's metrics: declared, or (an open suite) those its gate names."""
        spec = SUITES[suite]
        if spec.open_metrics:
            return tuple(dict.fromkeys(check.metric for check in self.gates.get(suite, {}).values()))
        return spec.metric_names

    # ----------------------------------------------------------------- metrics
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

    def data_key(self, suite: str) -> dict:
        """What a suite's results depend on besides the models and the code:
        its data files, every parameter as resolved (defaults, the data
        folder's suite.json, --suite-option), and the options as given (for a
        third-party loader that does not report its parameters). The one place
        every cache key of a suite, results and reference work, takes them from."""
        data = self.data(suite)
        return {
            "files": data.fingerprint,
            "params": data.params or None,  # None: keys from before smoke had params
            "options": self.options.suite_options.get(suite, {}),
        }

    def memo(self, suite: str) -> SuiteMemo:
        """The disk memo of reference-model work for `suite` (metrics.core.ReferenceMemo)."""
        return SuiteMemo(self.cache, suite, cache_key(self.data_key(suite)), SUITES[suite].version)

    def _run_parts(self, spec: CheckpointSpec, suite: str) -> dict:
        """Cache key of a suite's results on a checkpoint: its weights, the data
        (with the suite's parameters), the suite's code version, the run's
        reference models (relative metrics and UDS depend on them), dtype,
        device kind, seed and the bootstrap's resample count. Known before any
        model loads."""
        from unlearnbench.models.device import device_map_kind, resolve_device

        references = {
            role: self.fingerprint_of(ref)
            for role in REFERENCE_ROLES
            if (ref := self.reference_spec(role, suite)) is not None
        }
        return {
            "op": f"suite:{suite}",
            "model": self.fingerprint_of(spec),
            "data": self.data_key(suite),
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
        data = self.data(suite)
        if isinstance(data, OptionalData) and data.unavailable:  # a missing extra: no model loads
            return SuiteRun(
                metrics={n: Unavailable(n, data.unavailable) for n in self.metric_names(suite)},
                data=run_data(data),
                seconds=0.0,
            )

        def compute() -> dict:
            cancel.check()  # after Ctrl-C or past its deadline: no new work starts
            handle = self.handle(spec)
            run = self._evaluate(handle, suite)
            run.checkpoint = handle.describe()
            computed.append(run)
            return _to_plain(run)

        stored = self.cache.get_or_compute(self._run_parts(spec, suite), compute)
        run = computed[0] if computed else dataclasses.replace(_from_plain(stored), cached=True)
        attach_clusters(run.metrics, data.clusters if isinstance(data, ClusteredData) else {})
        restate_intervals(run.metrics, SUITES[suite].kind_of, SUITES[suite].scale_of)
        return run

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
                loaded = self._handles.get(self.spec_path(spec))
                if loaded is None or exc.path != loaded.name:  # a reference model's: not this checkpoint's fault
                    self._failures[key] = str(exc)
                    raise
                self._broken[spec.name] = exc
                self._handles.pop(self.spec_path(spec), None)
                raise
            except (CheckpointError, EndpointError) as exc:  # its files, weights or server: broken for every suite
                self._broken[spec.name] = exc
                raise
            except Exception as exc:
                self._failures[key] = f"{type(exc).__name__}: {exc}"
                raise
        return self._runs[key]

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

    def reference_run(self, role: str, suite: str) -> SuiteRun | None:
        """The suite on a reference model (cached on disk across sessions, as every run)."""
        spec = self.reference_spec(role, suite)
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

    def _evaluate(self, handle, suite: str) -> SuiteRun:
        import torch

        spec = SUITES[suite]
        data = self.data(suite)
        torch.manual_seed(self.options.seed)
        started = time.perf_counter()
        refs = References(
            full=Deferred(lambda: self.reference("full", suite)),
            retain=Deferred(lambda: self.reference("retain", suite)),
            memo=self.memo(suite),
            load_model=self.helper_model,
            connect_judge=self.judge_endpoint,
            attacked=self.attacked,
        )
        with progress.step(f"{handle.name}: {suite} suite"), seeded(self.options.seed):
            try:
                metrics = spec.evaluate(handle, data, refs)
            except MissingCapability as exc:  # the backend cannot serve this suite at all
                metrics = {name: Unavailable(name, str(exc)) for name in self.metric_names(suite)}
        missing = set(self.metric_names(suite)) - set(metrics)
        if missing:
            raise UnlearnbenchError(f"suite {suite} did not compute {', '.join(sorted(missing))}")
        return SuiteRun(metrics=metrics, data=run_data(data), seconds=time.perf_counter() - started)

    def judge(self, spec: CheckpointSpec, suite: str, check_name: str):
        """(verdict, SuiteRun) of one check on one checkpoint; under --correction
        holm the check is decided within its family, every enabled check of the
        suite on this checkpoint."""
        check = self.gates[suite].get(check_name)
        if check is None:
            raise UnlearnbenchError(
                f"suite {suite} has no check '{check_name}' in its thresholds (it has: {', '.join(self.gates[suite])})"
            )
        if check.relative_to and check.or_bound is None and self.reference_spec(check.relative_to, suite) is None:
            return check.judge({}, None, rule=self.options.rule), None  # skipped, naming the missing option
        # The references first: their runs, and the preflight they allow, come before the candidate's.
        reference, others = self._judge_inputs(check, suite)
        self.power(suite)
        run = self.run(spec, suite)
        rule = self.options.rule
        roles = self._roles_of(spec, suite)
        if check.relative_to in roles and check.or_bound is None:  # with an or_bound it may be judged absolutely
            return check.on_its_reference(check.relative_to, rule), run
        against = SUITES[suite].measured_against.get(check.metric)
        if against in roles:  # PL, RD, forget quality: the model against itself, 0 by construction
            return check.on_its_reference(against, rule, f"which {check.metric} measures it against"), run
        with seeded(self.options.seed):  # the decision's bootstrap resamples are the metrics' own
            verdict = check.judge(run.metrics, reference, others=others, rule=rule)
            if rule.correction == "holm" and verdict.outcome is Outcome.FAIL and verdict.code is Code.DECIDED:
                adjusted = self._holm_adjusted(spec, suite)
                verdict = check.judge(
                    run.metrics, reference, others=others, rule=rule, p_adjusted=adjusted[(suite, check.name)]
                )
        return verdict, run

    def _roles_of(self, spec: CheckpointSpec, suite: str) -> tuple[str, ...]:
        """The reference roles (full, retain) whose model `spec` is in this suite's run."""
        return tuple(
            role
            for role in REFERENCE_ROLES
            if (ref := self.reference_spec(role, suite)) is not None and ref.source == spec.source
        )

    def _holm_adjusted(self, spec: CheckpointSpec, asking: str) -> dict[tuple[str, str], float]:
        """Holm-adjusted p-values of every tested check of the checkpoint in
        the run, all suites together (its family: a checkpoint's FAIL is
        controlled at alpha across all of its checks), keyed (suite, check);
        computed once per checkpoint. A suite that cannot evaluate on it
        (its checks fail with their own reason) adds nothing to the family;
        one that does not run on it (smoke on an unlearned model) is not in
        it; `asking`, the suite of the check being judged, always is (a
        training run's step is no listed checkpoint of any suite)."""
        cached = self._holm.get(spec.name)
        if cached is None or not any(suite == asking for suite, _ in cached):  # a suite evaluated since
            family = {}
            for suite, gate in self.gates.items():
                if (
                    suite != asking
                    and spec.name not in {s.name for s in self.checkpoints(suite)}
                    and (spec.name, suite) not in self._runs
                ):
                    continue
                try:
                    run = self.run(spec, suite)
                except UnlearnbenchError:
                    continue
                roles = self._roles_of(spec, suite)
                against = SUITES[suite].measured_against
                for check in gate.values():
                    if (
                        not check.enabled
                        or (check.relative_to in roles and check.or_bound is None)
                        or against.get(check.metric) in roles
                        or (
                            check.relative_to
                            and check.or_bound is None
                            and self.reference_spec(check.relative_to, suite) is None
                        )
                    ):
                        continue
                    try:
                        reference, others = self._judge_inputs(check, suite)
                    except UnlearnbenchError:
                        continue
                    judged = check.judge(run.metrics, reference, others=others, rule=self.options.rule)
                    if _tested(judged) and judged.p_value is not None:
                        family[(suite, check.name)] = judged.p_value
            self._holm[spec.name] = holm_adjusted(family, self.options.rule.alpha)
        return self._holm[spec.name]

    def power(self, suite: str) -> list[dict]:
        """Each check's power from the suite's reference models (Check.power),
        computed once, its underpowered checks printed as they are found."""
        if suite not in self.powers:
            roles = {role for check in self.gates[suite].values() for role in check.reference_roles}
            references = {}
            for role in sorted(roles):
                try:
                    run = self.reference_run(role, suite)
                except UnlearnbenchError:  # a broken reference fails the checks relative to it, with its reason
                    run = None
                references[role] = run.metrics if run else None
            with seeded(self.options.seed):
                found = [p for check in self.gates[suite].values() if (p := check.power(references, self.options.rule))]
            self.powers[suite] = found
            for power in found:
                if power["underpowered"]:
                    progress.note(power_line(power))
        return self.powers[suite]

    def _judge_inputs(self, check: Check, suite: str) -> tuple:
        """(reference metrics, other reference models' metrics) a check's judgement reads."""
        reference = self.reference_run(check.relative_to, suite) if check.relative_to else None
        others = {}
        for role in check.reference_roles:
            if role != check.relative_to and (reference is not None or role == "full"):
                other = self.reference_run(role, suite)
                others[role] = other.metrics if other else None
        return reference.metrics if reference else None, others


def _tested(verdict) -> bool:
    """Whether the interval rule tested this verdict (a member of its Holm family)."""
    return verdict.p_value is not None and (verdict.decided_by == "interval" or verdict.underpowered)


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
