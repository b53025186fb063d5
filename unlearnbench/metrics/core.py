"""`MetricResult` and the statistics every metric shares (docs/verdicts.md)."""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, Protocol

import numpy as np

# Enough that the endpoints of a percentile interval move less with --seed
# than the zoo's verdicts are from their bounds (1,000 resamples flipped the
# verdict of a skewed privacy-leakage interval between seeds; 5,000 do not).
BOOTSTRAP_RESAMPLES = 5000
# The run's --seed: everything random in a metric (bootstrap resamples, MCQ
# distractors and option positions) draws from it. The session sets it around
# each evaluation (`seeded`); a metric called directly runs with seed 0.
_RUN_SEED: contextvars.ContextVar[int] = contextvars.ContextVar("unlearnbench_run_seed", default=0)


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    token = _RUN_SEED.set(int(seed))
    try:
        yield
    finally:
        _RUN_SEED.reset(token)


def run_seed() -> int:
    return _RUN_SEED.get()


def _resampling_rng() -> np.random.Generator:
    """A fresh generator seeded by the run's seed: each CI is reproducible alone."""
    return np.random.default_rng(run_seed())


@dataclass
class MetricResult:
    """One metric on one checkpoint: JSON-serialisable as it is.

    `per_item` maps item ids to that item's value, so a report can link a
    score back to its prompt and generation (kept in `details`).
    """

    name: str
    value: float
    n: int
    ci: tuple[float, float]
    higher_is_better: bool
    params: dict[str, Any] = field(default_factory=dict)
    per_item: dict[str, float] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    # Where the metric's ideal is a value, not an end of the scale: a number
    # (signed PL: 0) or a reference role whose value is the ideal ("retain":
    # the membership AUC, first-token entropy). Regressions are then judged
    # by the distance to it, not by `higher_is_better`.
    ideal: float | str | None = None
    # How `ci` was made (docs/verdicts.md): "wilson" (a share of 0/1 items),
    # "bootstrap-percentile" (any other mean, or a set-level value with
    # `replicates`), None (a value with no interval of its own). In a run, the
    # session restates a per-item mean's `ci` and `interval` as the decision
    # interval of the metric's declared kind and clusters (`engine.results.restate_intervals`).
    interval: str | None = None
    # A set-level value's bootstrap replicates (one per resample, drawn by
    # `bootstrap_indices`): the checkpoint's and its reference's replicate k
    # resampled the same items, so their difference is a paired resample of
    # the difference (evidence.py). Kept in the result cache, not in reports.
    replicates: list[float] | None = None
    # Each item's cluster (per_item's keys -> the person, document or concept
    # it is about): items of one cluster are not independent evidence, and the
    # decision intervals count clusters (evidence.py). None: every item is its
    # own cluster. Attached by the session from the suite's data (`clusters`).
    clusters: dict[str, str] | None = None

    def to_dict(self, *, replicates: bool = True) -> dict:
        """A JSON-ready copy (without the bootstrap replicates where not
        `replicates`). Containers are copied and leaves shared: `asdict`'s
        deep copy of every number took a tenth of a main job."""
        out = {f.name: _plain(getattr(self, f.name)) for f in fields(self) if replicates or f.name != "replicates"}
        out["ci"] = list(self.ci)
        return out

    @classmethod
    def from_dict(cls, data: Mapping) -> MetricResult:
        values = dict(data)
        values["ci"] = tuple(values["ci"])
        return cls(**values)


def _plain(value: Any) -> Any:
    """`value` with its dicts, lists, tuples and dataclasses copied as
    `dataclasses.asdict` copies them, and every other value shared."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        copied = list(value) if all(type(v) in _SCALARS for v in value) else [_plain(v) for v in value]
        return type(value)(*copied) if hasattr(value, "_fields") else type(value)(copied)
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    return value


_SCALARS = frozenset({float, int, str, bool, type(None)})


def bootstrap_indices(sizes: Sequence[int], resamples: int = BOOTSTRAP_RESAMPLES) -> list[np.ndarray]:
    """The one resampler behind every CI: for each of `resamples` draws, one
    index sample with replacement per sample set (sets of `sizes[k]` items),
    so a paired statistic resamples every set in the same draw (row k of each
    array). Returns one [resamples, sizes[k]] array per set, drawn set after
    set from the run-seeded generator, one call per set."""
    rng = _resampling_rng()
    return [rng.integers(0, n, (resamples, n)) for n in sizes]


def percentile_ci(values: Sequence[float] | np.ndarray, alpha: float = 0.05) -> tuple[float, float]:
    """The (1 - alpha) percentile interval of bootstrap values (NaN, NaN when
    none): numpy's linear percentile, except that an end reaching an infinite
    value (an unbounded resample of a relative metric) is infinite, not the
    NaN of interpolating between two infinities."""
    data = np.sort(np.asarray(values, dtype=np.float64))
    if data.size == 0:
        return math.nan, math.nan

    def at(share: float) -> float:
        position = share * (data.size - 1)
        below = int(math.floor(position))
        above, fraction = min(below + 1, data.size - 1), position - below
        low, high = float(data[below]), float(data[above])
        if math.isinf(low) or (math.isinf(high) and fraction > 0):
            return low if math.isinf(low) else high
        return float(np.percentile(data[below : above + 1], 100 * fraction)) if above > below else low

    return at(alpha / 2), at(1 - alpha / 2)


def replicated(replicates: Sequence[float]) -> dict:
    """The interval fields of a set-level MetricResult from its bootstrap
    replicates: `MetricResult(name, value, n, **replicated(reps), ...)`."""
    reps = [float(v) for v in replicates]
    return {"ci": percentile_ci(reps), "interval": "bootstrap-percentile", "replicates": reps}


def bootstrap_means(values: Sequence[float]) -> np.ndarray:
    """The bootstrap replicates of a mean (seeded by the run: reproducible)."""
    data = np.asarray(values, dtype=np.float64)
    if data.size == 0:
        raise ValueError("bootstrap of an empty sample")
    if data.size == 1:
        return data.copy()
    [rows] = bootstrap_indices([data.size])
    return data[rows].mean(axis=1)


def bootstrap_ci(values: Sequence[float], alpha: float = 0.05) -> tuple[float, float]:
    """The (1 - alpha) percentile bootstrap CI of the mean."""
    return percentile_ci(bootstrap_means(values), alpha)


def is_share(values: Sequence[float]) -> bool:
    """Whether every per-item value is 0 or 1: the mean is a share of items."""
    return all(v in (0.0, 1.0) for v in values)


def wilson_ci(values: Sequence[float], alpha: float = 0.05) -> tuple[float, float]:
    """The (1 - alpha) Wilson score interval of a share of 0/1 values
    (statsmodels). A bootstrap of k = 0 or k = n has zero width; Wilson's does
    not (6 of 6 is consistent with a rate of 0.61), and it keeps its coverage
    at small n."""
    from statsmodels.stats.proportion import proportion_confint

    low, high = proportion_confint(int(sum(values)), len(values), alpha=alpha, method="wilson")
    return max(0.0, float(low)), min(1.0, float(high))  # float rounding can step past the share's range


def mean_result(
    name: str,
    per_item: Mapping[str, float],
    *,
    higher_is_better: bool,
    params: Mapping[str, Any] | None = None,
    details: Mapping[str, Any] | None = None,
    ideal: float | str | None = None,
) -> MetricResult:
    """A metric whose value is the mean of per-item values, with its 95% CI:
    Wilson's where the items are 0/1 scores, else the percentile bootstrap."""
    if not per_item:
        raise ValueError(f"metric {name}: no items to average")
    values = [float(v) for v in per_item.values()]
    if any(math.isnan(v) for v in values):
        raise ValueError(f"metric {name}: NaN among per-item values")
    share = is_share(values)
    return MetricResult(
        name=name,
        value=float(np.mean(values)),
        n=len(values),
        ci=wilson_ci(values) if share else bootstrap_ci(values),
        interval="wilson" if share else "bootstrap-percentile",
        higher_is_better=higher_is_better,
        params=dict(params or {}),
        per_item={k: float(v) for k, v in per_item.items()},
        details=dict(details or {}),
        ideal=ideal,
    )


@dataclass
class Unavailable:
    """A metric that could not be computed in this run, and why (e.g. it needs
    --retain-model). Checks on it are skipped with the reason, never passed."""

    name: str
    reason: str

    def to_dict(self, *, replicates: bool = True) -> dict:  # noqa: ARG002 - MetricResult's signature: none to drop
        return {"name": self.name, "unavailable": self.reason}


def metric_from_dict(data: Mapping) -> MetricResult | Unavailable:
    if "unavailable" in data:
        return Unavailable(data["name"], data["unavailable"])
    return MetricResult.from_dict(data)


class ReferenceMemo(Protocol):
    """Work that depends only on reference models and the data, computed once
    and kept across checkpoints and runs. Its keys are built in one place
    (`cache.SuiteMemo`) from the suite, the data, the suite's version, the
    models' fingerprints and `params`; evaluators only name the work."""

    def get_or_compute(self, op: str, models: Mapping[str, Any], params: dict, compute: Callable[[], Any]) -> Any: ...

    def lookup(self, op: str, params: dict) -> tuple[bool, Any]: ...

    def store(self, op: str, params: dict, value: Any) -> None: ...


class NoMemo:
    """Computes every time (a metric called directly, outside a session)."""

    def get_or_compute(self, op, models, params, compute):
        return compute()

    def lookup(self, op, params):
        return False, None

    def store(self, op, params, value):
        return None


@dataclass(frozen=True)
class Deferred:
    """A model loaded on first use: `load()` returns it."""

    load: Callable[[], Any]


class References:
    """What a suite's evaluator receives besides the model under test and the
    data: the run's reference models (None where the run has none; a
    `Deferred` one loads on first use, so an evaluator that needs none loads
    none), the memo for work on them, a loader of helper models (an `hf:`
    judge), a connection to a judge server and the attacked copy of a model
    (robustness), all owned by the session, so metric code loads no model and
    opens no connection itself."""

    def __init__(
        self,
        *,
        full: Any = None,
        retain: Any = None,
        memo: ReferenceMemo | None = None,
        load_model: Callable[[str], Any] | None = None,
        connect_judge: Callable[[str, str], Any] | None = None,
        attacked: Callable | None = None,
    ):
        self._models = {"full": full, "retain": retain}
        self.memo = memo if memo is not None else NoMemo()
        self.load_model = load_model  # checkpoint path or Hub id -> LanguageModel
        self.connect_judge = connect_judge  # (URL, model name) -> a judge at an OpenAI-compatible chat server
        # attacked(model, attacks.Attack) -> a context manager holding the attacked model (robustness)
        self.attacked = attacked

    def _model(self, role: str):
        if isinstance(self._models[role], Deferred):
            self._models[role] = self._models[role].load()
        return self._models[role]

    @property
    def full(self):  # LanguageModel | None
        return self._model("full")

    @property
    def retain(self):  # LanguageModel | None
        return self._model("retain")
