"""The registry of suites: every suite, ours and other packages', is a folder
(a package) whose `SPEC` is registered through the entry-point group
`unlearnbench.suites` (ours in this package's pyproject.toml:
`dusk = "unlearnbench.suites.dusk:SPEC"`). A suite's folder holds everything
of it: its spec (metrics, parameters, defaults), its data loader, its
evaluator, and the hooks the session and the report call for it (a preflight
check before any model loads, its report plots), so that nothing else in
unlearnbench names a suite. Its gate is `thresholds/<name>.yaml` and its test
module `suites/<name>/test_<name>.py` (`pytestmark =
pytest.mark.unlearnbench("<name>")`), in the user's project as in ours.

Loaders, evaluators and hooks may be named as "module:function" strings,
imported on first use, so reading the registry costs one small module per
suite; each is checked against its contract (unlearnbench.contracts) when
it resolves.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from unlearnbench.contracts import (
    Evaluator,
    FunctionRef,
    Loader,
    NameCheck,
    OpenLoader,
    Preflight,
    Probe,
    ReportHook,
    SuiteData,
    ZooWriter,
)
from unlearnbench.errors import UnlearnbenchError
from unlearnbench.registry import Registry
from unlearnbench.rule import METRIC_KINDS

ENTRY_POINT_GROUP = "unlearnbench.suites"
# The zoo's unlearning family: what most suites evaluate by default (a test
# checks it matches fixtures.zoo.FAMILY; kept literal so the registry needs no torch).
FAMILY = ("full", "retain", "ga", "graddiff", "npo", "simnpo", "rmu", "idknll", "refusal", "surface")
ZOO_REFERENCES = (("full", "full"), ("retain", "retain"))
UNIT = (0.0, 1.0)  # shares, ROUGE, similarity ratios, AUCs


@dataclass(frozen=True)
class Metric:
    """One metric a suite's evaluator returns: declared once, here."""

    name: str
    # The range of a bounded metric: a bound at or past an end of it cannot
    # separate checkpoints, so such a check is inconclusive (thresholds.py).
    scale: tuple[float, float] | None = None
    # A metric of what must be kept (retained knowledge, fluency), not of
    # forgetting: meta-evaluation does not score it as a forgetting metric.
    utility: bool = False
    # Plotted on a log axis (a p-value, spanning decades): the leaderboard's trade-off plots.
    log_scale: bool = False
    # What its items are, which picks its decision interval (evidence.KINDS, docs/verdicts.md):
    # "binary" (0/1 items), "bounded" (items on `scale`), "unbounded", or "set" (a set-level value with
    # bootstrap replicates). None: "bounded" where a scale is declared, else "unbounded".
    kind: str | None = None
    # The reference model the value measures the checkpoint against (privacy leakage, retain deviation and
    # TOFU's forget quality compare with the retain model's): on that model itself a check of it is n/a.
    measured_against: str | None = None

    def __post_init__(self):
        if self.kind is None:
            object.__setattr__(self, "kind", "bounded" if self.scale is not None else "unbounded")
        if self.kind not in METRIC_KINDS:
            raise ValueError(f"metric {self.name}: kind must be one of {', '.join(METRIC_KINDS)}, not {self.kind!r}")


@dataclass(frozen=True)
class SuiteSpec:
    """A suite: its metrics, its functions and its defaults. Each function is
    a function or a "module:function" reference (imported on first use),
    held as a `FunctionRef` checked against its contract in
    `unlearnbench.contracts` when it resolves."""

    name: str
    metrics: tuple[Metric | str, ...]  # every metric the evaluator returns (a bare name: unbounded, not utility)
    loader: FunctionRef | str | Loader | OpenLoader  # contracts.Loader (contracts.OpenLoader with open_metrics)
    evaluator: FunctionRef | str | Evaluator  # contracts.Evaluator
    version: int  # metric-code version: bump to invalidate cached results
    # What `pytest suites/<name>` evaluates when no --model is given: fixture
    # zoo recipes, and the zoo recipes that serve as reference models then.
    default_checkpoints: tuple[str, ...] = ()
    default_references: tuple[tuple[str, str], ...] = ()  # (role, zoo recipe)
    default_data: str | None = None  # "zoo": the zoo's data when running the default zoo
    options: tuple[str, ...] = ()  # keys accepted by --suite-option SUITE.KEY=VALUE
    # Command-line shortcuts for some of them: (flag, option key, metavar, help); `--judge X` is
    # `--suite-option conceptguard.judge=X`.
    flags: tuple[tuple[str, str, str, str], ...] = ()
    # contracts.Preflight: cheap checks of each checkpoint after the data loaded, before any weights load.
    preflight: FunctionRef | str | Preflight | None = None
    # contracts.ReportHook: the SVG figures of the suite's section of the HTML report.
    plots: FunctionRef | str | ReportHook | None = None
    # contracts.ReportHook: lines the console prints after the verdicts and report.md keeps: what a
    # suite's checks alone do not say (the elicitation suite's worst way of asking per checkpoint).
    notes: FunctionRef | str | ReportHook | None = None
    # The forget-knowledge probes this suite owns, which the robustness suite repeats on attacked copies.
    probes: tuple[Probe, ...] = ()
    # contracts.ZooWriter: the suite's data for the fixture zoo's corpus, in the suite's own format (the
    # zoo's data folder has one subfolder per suite).
    zoo_data: FunctionRef | str | ZooWriter | None = None
    # (metric, metric whose per-item values explain it): the report's drill-down shows the latter's items.
    per_item_source: tuple[tuple[str, str], ...] = ()
    # (axis, metric): the one value per axis a leaderboard shows for the suite (forget quality and model
    # utility, as OpenUnlearning's leaderboard reads TOFU); an axis without one falls back to its first
    # check's metric (report/leaderboard.py).
    headline: tuple[tuple[str, str], ...] = ()
    # A suite whose metrics its gate names (the utility suite: any lm-eval task's metric):
    # contracts.NameCheck, what is wrong with a metric name or None. Its loader is then a
    # contracts.OpenLoader (it receives the gate's metric names), and `metrics` stays empty.
    open_metrics: FunctionRef | str | NameCheck | None = None
    # With `open_metrics`: contracts.NameCheck, a metric name -> its kind (rule.METRIC_KINDS), which picks
    # the interval its checks are decided by, as `Metric.kind` does for a declared metric.
    open_kind: FunctionRef | str | NameCheck | None = None
    # Suites whose data this suite's loader reads (through `SUITES[name].load_data`): the honesty suite
    # asks DUSK's and UDS's forget questions, the robustness suite runs its probes on their owners' data.
    reads: tuple[str, ...] = ()
    # The module whose folder holds the suite's defaults, as files: the gate
    # `thresholds/<name>.yaml` and the thin test file `suites/<name>/test_<name>.py`,
    # in the folder's `defaults/` (a wheel's package data) or beside it (a
    # checkout): what a run without a thresholds/ folder of its own judges by,
    # and what `unlearnbench init` writes. A third-party suite names its own.
    defaults: str = "unlearnbench"

    def __post_init__(self) -> None:
        object.__setattr__(self, "metrics", tuple(m if isinstance(m, Metric) else Metric(m) for m in self.metrics))
        contracts = {
            "loader": OpenLoader if self.open_metrics else Loader,
            "evaluator": Evaluator,
            "preflight": Preflight,
            "plots": ReportHook,
            "notes": ReportHook,
            "zoo_data": ZooWriter,
            "open_metrics": NameCheck,
            "open_kind": NameCheck,
        }
        for field_name, contract in contracts.items():
            target = getattr(self, field_name)
            if target is not None and not isinstance(target, FunctionRef):
                object.__setattr__(self, field_name, FunctionRef(target, contract, f"suite {self.name}: {field_name}"))
        for probe in self.probes:
            if not isinstance(probe, Probe):
                raise UnlearnbenchError(
                    f"suite {self.name}: probes must be unlearnbench.api.Probe objects, got {probe!r}"
                )

    def functions(self) -> list[FunctionRef]:
        """Every function the spec names: `check_functions` resolves them all."""
        hooks = (
            self.loader,
            self.evaluator,
            self.preflight,
            self.plots,
            self.notes,
            self.zoo_data,
            self.open_metrics,
            self.open_kind,
        )
        probes = [p.function for p in self.probes]
        return [h for h in (*hooks, *probes) if isinstance(h, FunctionRef)]

    def check_functions(self) -> None:
        """Import every function the spec names and check its signature: a
        wrong reference is one message naming the suite and the hook, before
        any model loads."""
        for function in self.functions():
            function.resolve()

    @property
    def declared(self) -> tuple[Metric, ...]:
        """The metrics, each a `Metric` (a bare name given became one)."""
        return tuple(m for m in self.metrics if isinstance(m, Metric))

    @property
    def metric_names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.declared)

    @property
    def scale_of(self) -> dict[str, tuple[float, float]]:
        return {m.name: m.scale for m in self.declared if m.scale is not None}

    @property
    def kind_of(self) -> dict[str, str] | Callable[[str], str]:
        """{metric: kind}, or (an open suite) the kind of a metric's name."""
        if isinstance(self.open_kind, FunctionRef):
            return self.open_kind.resolve()
        return {m.name: m.kind or "unbounded" for m in self.declared}

    @property
    def measured_against(self) -> dict[str, str]:
        return {m.name: m.measured_against for m in self.declared if m.measured_against}

    @property
    def utility_metrics(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.declared if m.utility)

    @property
    def known_metrics(self) -> tuple[str, ...] | Callable[[str], str | None]:
        """What a gate of this suite may name: its metrics, or (an open suite) a check of a name."""
        return self.open_metrics.resolve() if isinstance(self.open_metrics, FunctionRef) else self.metric_names

    def load_data(self, source: str | Path | None, options: dict[str, Any], gated: tuple[str, ...] = ()) -> SuiteData:
        """The suite's data; an open suite's loader also gets the metrics its gate names."""
        loader = self._function(self.loader)
        data = loader(source, options, gated) if self.open_metrics else loader(source, options)
        if not isinstance(data, SuiteData):
            missing = [f for f in ("fingerprint", "source", "params") if not hasattr(data, f)]
            raise UnlearnbenchError(
                f"suite {self.name}: its loader ({loader.name}) returned a {type(data).__name__} without "
                f"{', '.join(missing)} (unlearnbench.api.SuiteData)"
            )
        return data

    @property
    def evaluate(self) -> Callable[..., Any]:
        return self._function(self.evaluator).resolve()

    def hook(self, name: str) -> FunctionRef | None:
        """One of the spec's optional functions ("preflight", "plots", "notes", "zoo_data"), or None."""
        value = getattr(self, name)
        return value if isinstance(value, FunctionRef) else None

    @staticmethod
    def _function(target: object) -> FunctionRef:
        """A function field, as `__post_init__` made it."""
        assert isinstance(target, FunctionRef)
        return target

    def probe(self, name: str) -> Probe:
        return next(p for p in self.probes if p.name == name)


def on_zoo_family(**spec) -> SuiteSpec:
    """A suite that runs on the zoo's unlearning family by default, with the
    zoo's full and retain models as references, on the zoo's data."""
    return SuiteSpec(default_checkpoints=FAMILY, default_references=ZOO_REFERENCES, default_data="zoo", **spec)


def metric_set(
    names, *, scale: tuple[float, float] | None = None, utility=(), kind: str | None = None
) -> tuple[Metric, ...]:
    """Metric declarations for `names`, all on `scale` and of `kind`; those in `utility` are utility metrics."""
    return tuple(Metric(n, scale=scale, utility=n in utility, kind=kind) for n in names)


def zoo_defaults(suite: str, zoo_extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The zoo recipes `suite` evaluates when no --model is given: its
    defaults, plus the `zoo_extra` recipes (--zoo-extra) where those defaults
    are the unlearning family (they include `full`)."""
    defaults = SUITES[suite].default_checkpoints
    if "full" in defaults:
        defaults = (*defaults, *(name for name in zoo_extra if name not in defaults))
    return defaults


def run_order(user_names, zoo_extra: tuple[str, ...] = ()) -> list[str]:
    """The run's ordered checkpoint names, the list `--shard` splits and the
    xdist scheduler and the Ray plan follow: the user's, else every suite's
    zoo checkpoints (with the --zoo-extra recipes) in registry order,
    duplicates dropped."""
    names = list(user_names) or [n for suite in SUITES for n in zoo_defaults(suite, zoo_extra)]
    return list(dict.fromkeys(names))


def sweep_checkpoints(suite: str, models: list, shard=None, zoo_extra: tuple[str, ...] = ()) -> list:
    """The checkpoints `suite` evaluates: the user's (`models`), else its zoo
    defaults (`zoo_defaults`); with `shard`, only that shard's (the split is
    over the whole run's order, `run_order`, the same for every suite)."""
    specs = list(models) or zoo_checkpoints(zoo_defaults(suite, zoo_extra))
    if shard is None:
        return specs
    keep = set(shard.select(run_order([s.name for s in models], zoo_extra)))
    return [s for s in specs if s.name in keep]


def default_file(suite: str, relative: str) -> Path | None:
    """A suite's default file (`thresholds/<suite>.yaml`, `suites/<suite>/test_<suite>.py`)
    where its spec's `defaults` module keeps it, else None."""
    module = importlib.import_module(SUITES[suite].defaults)
    if module.__file__ is None:  # a namespace package: no folder of its own to hold defaults
        return None
    folder = Path(module.__file__).resolve().parent
    for root in (folder / "defaults", folder.parent):
        if (root / relative).is_file():
            return root / relative
    return None


def registered_probes() -> dict[str, tuple[str, Probe]]:
    """Every probe the registered suites declare: {probe: (its owner suite, the probe)}."""
    return {probe.name: (suite, probe) for suite, spec in SUITES.items() for probe in spec.probes}


def zoo_checkpoints(names) -> list:
    from unlearnbench.models.checkpoint import CheckpointSpec

    return [CheckpointSpec(name=n, source=f"zoo:{n}", zoo=n) for n in names]


SUITES: Registry[SuiteSpec] = Registry(ENTRY_POINT_GROUP, SuiteSpec, {})
