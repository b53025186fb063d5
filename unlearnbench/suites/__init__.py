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

Loaders, evaluators and hooks are named as "module:function" strings and
imported on first use, so reading the registry costs one small module per
suite.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

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
    name: str
    metrics: tuple[Metric | str, ...]  # every metric the evaluator returns (a bare name: unbounded, not utility)
    loader: str  # (source: str | None, options: dict) -> dataset with .fingerprint and .source
    evaluator: str  # (model, dataset, refs: metrics.core.References) -> dict[str, MetricResult | Unavailable]
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
    # (run: session.Preflight, suite) -> {checkpoint name: why this suite cannot run on it}: cheap checks
    # after the data loaded and before any weights load; raising UnlearnbenchError stops the run.
    preflight: str | None = None
    # (view: report.view.SuiteView) -> list of SVG figures for the suite's section of the HTML report.
    plots: str | None = None
    # (view: report.view.SuiteView) -> lines the console prints after the verdicts and report.md keeps:
    # what a suite's checks alone do not say (the elicitation suite's worst way of asking per checkpoint).
    notes: str | None = None
    # (probe, "module:function"): (model, data, refs) -> one MetricResult of forget knowledge, cheap enough
    # to repeat on each attacked copy of a model (the robustness suite asks for them by name).
    probes: tuple[tuple[str, str], ...] = ()
    # (directory, fixtures.corpus.Corpus) -> None: writes the suite's data for the fixture zoo's corpus
    # in the suite's own format (the zoo's data folder has one subfolder per suite).
    zoo_data: str | None = None
    # (metric, metric whose per-item values explain it): the report's drill-down shows the latter's items.
    per_item_source: tuple[tuple[str, str], ...] = ()
    # (axis, metric): the one value per axis a leaderboard shows for the suite (forget quality and model
    # utility, as OpenUnlearning's leaderboard reads TOFU); an axis without one falls back to its first
    # check's metric (report/leaderboard.py).
    headline: tuple[tuple[str, str], ...] = ()
    # A suite whose metrics its gate names (the utility suite: any lm-eval task's metric): "module:function",
    # (metric name) -> what is wrong with it, or None. Its loader then receives the gate's metric names as a
    # third argument, and `metrics` stays empty.
    open_metrics: str | None = None
    # With `open_metrics`: "module:function", (metric name) -> its kind (rule.METRIC_KINDS), which picks the
    # interval its checks are decided by, as `Metric.kind` does for a declared metric.
    open_kind: str | None = None
    # The module whose folder holds the suite's defaults, as files: the gate
    # `thresholds/<name>.yaml` and the thin test file `suites/<name>/test_<name>.py`,
    # in the folder's `defaults/` (a wheel's package data) or beside it (a
    # checkout): what a run without a thresholds/ folder of its own judges by,
    # and what `unlearnbench init` writes. A third-party suite names its own.
    defaults: str = "unlearnbench"

    def __post_init__(self):
        object.__setattr__(self, "metrics", tuple(m if isinstance(m, Metric) else Metric(m) for m in self.metrics))

    @property
    def metric_names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.metrics)

    @property
    def scale_of(self) -> dict[str, tuple[float, float]]:
        return {m.name: m.scale for m in self.metrics if m.scale is not None}

    @property
    def kind_of(self) -> dict[str, str] | Callable[[str], str]:
        """{metric: kind}, or (an open suite) the kind of a metric's name."""
        return resolve(self.open_kind) if self.open_kind else {m.name: m.kind for m in self.metrics}

    @property
    def measured_against(self) -> dict[str, str]:
        return {m.name: m.measured_against for m in self.metrics if m.measured_against}

    @property
    def utility_metrics(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.metrics if m.utility)

    @property
    def known_metrics(self) -> tuple[str, ...] | Callable[[str], str | None]:
        """What a gate of this suite may name: its metrics, or (an open suite) a check of a name."""
        return resolve(self.open_metrics) if self.open_metrics else self.metric_names

    def load_data(self, source, options: dict, gated: tuple[str, ...] = ()) -> object:
        """The suite's data; an open suite's loader also gets the metrics its gate names."""
        if self.open_metrics:
            return resolve(self.loader)(source, options, gated)
        return resolve(self.loader)(source, options)

    @property
    def evaluate(self) -> Callable:
        return resolve(self.evaluator)

    def probe(self, name: str) -> Callable:
        return resolve(dict(self.probes)[name])


def on_zoo_family(**spec) -> SuiteSpec:
    """A suite that runs on the zoo's unlearning family by default, with the
    zoo's full and retain models as references, on the zoo's data."""
    return SuiteSpec(default_checkpoints=FAMILY, default_references=ZOO_REFERENCES, default_data="zoo", **spec)


def metric_set(names, *, scale: tuple[float, float] | None = None, utility=(), kind: str | None = None
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
    folder = Path(importlib.import_module(SUITES[suite].defaults).__file__).resolve().parent
    for root in (folder / "defaults", folder.parent):
        if (root / relative).is_file():
            return root / relative
    return None


def zoo_checkpoints(names) -> list:
    from unlearnbench.models.checkpoint import CheckpointSpec

    return [CheckpointSpec(name=n, source=f"zoo:{n}", zoo=n) for n in names]


def resolve(target: str) -> Callable:
    """The function a "module:function" string names."""
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


SUITES: Registry[SuiteSpec] = Registry(ENTRY_POINT_GROUP, SuiteSpec, {})
