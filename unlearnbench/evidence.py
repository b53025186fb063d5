"""The quantity a check decides on, its interval at any level, and what
follows from it: a p-value, Holm's correction, the smallest effect and the
items a decision needs at a given power (docs/verdicts.md).

The interval's family follows the metric's declared kind (`rule.METRIC_KINDS`, from the
suite registry), never the values a checkpoint happened to score, and every
interval over items counts their clusters (a person, a document, a concept:
`MetricResult.clusters`; without them each item is its own cluster):

- binary (0/1 items): Wilson's interval on the effective sample size
  (Korn & Graubard: n over the design effect, and scaled by (z / t(G-1))^2
  when items share clusters);
- bounded (items on the declared scale): Wilson's interval on the
  quasi-binomial effective n (`wilson_effective`), its spread padded by one
  pseudo-item at each end of the scale and never wider than 0/1 items';
- unbounded: a studentized interval, cluster-robust (CR1) standard errors
  and t(G-1) critical values;
- a paired difference of binary or bounded means: the studentized interval
  of the per-item differences, computed with one pseudo-item at each end of
  the difference's scale (Newcombe's paired interval undercovers when the
  discordant pairs all go one way: 9.5% false passes at n = 24 against 2.5%);
  of unbounded means, without pseudo-items;
- set-level (an AUC, a KS statistic, a spread: `MetricResult.replicates`):
  the percentile interval of the bootstrap replicates, of their paired
  differences for a relative check.

Two values that share no items are compared by MOVER (Zou & Donner's
square-and-add) from their own intervals. A value with nothing to remake an
interval from keeps its reported 95% CI (lm-eval's stderr interval), or has
none, and is not decided. `benchmarks/calibration.py` measures the false-pass
and false-fail rates of each family.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from unlearnbench.metrics.core import MetricResult, percentile_ci
from unlearnbench.rule import DEFAULT_POWER

K = TypeVar("K")  # what names a check in a family (its name, or (suite, check))
# The smallest p-value an interval found by bisection tells apart from 0.
P_RESOLUTION = 1e-12
# The weight of the two pseudo-items at the ends of the scale with which a
# bounded mean's spread is estimated (`wilson_effective`): one item each; half
# an item each lets sparse clustered scores (85% zeros, 16 clusters, ICC 0.5)
# fail 5.0% of checkpoints on the bound against 2.5% (benchmarks/calibration.py).
DISPERSION_PSEUDO_WEIGHT = 1.0
# The weight of each of the two pseudo-items at the ends of a paired
# difference's scale: one item each. Half an item each (Agresti & Min's half
# pair per cell) passes 11% of checkpoints on the bound where all discordant
# pairs go one way at n = 24 (benchmarks/calibration.py, docs/verdicts.md).
PSEUDO_WEIGHT = 1.0


@dataclass(frozen=True)
class Estimate:
    """A decision quantity: its point value, its item count, how its interval
    is made (`method`) and the interval at any level (None: it has none).
    `clusters` (G) and `n_effective` (n over the design effect) say how much
    independent evidence the n items hold. `interval_at_size(alpha, n)`, where
    given, is the interval the same observed shares would have at n items
    (Wilson's): what `needed` solves exactly; other intervals shrink as
    1/sqrt(n). `p_floor` is the smallest p-value the interval can tell:
    1/B for B bootstrap replicates."""

    value: float
    n: int
    method: str
    interval_at: Callable[[float], tuple[float, float]] | None
    interval_at_size: Callable[[float, float], tuple[float, float]] | None = None
    clusters: int | None = None
    n_effective: float | None = None
    p_floor: float = P_RESOLUTION

    def interval(self, alpha: float) -> tuple[float, float] | None:
        return self.interval_at(alpha) if self.interval_at else None

    def mde(self, alpha: float, power: float = DEFAULT_POWER) -> float | None:
        """The smallest distance from the bound that this n tells with
        probability `power` at level alpha: the longer of the interval's two
        arms at the level whose critical value is z(1 - alpha/2) + z(power)."""
        interval = self.interval(powered_alpha(alpha, power))
        return max(self.value - interval[0], interval[1] - self.value) if interval else None

    def needed(self, threshold: float, alpha: float, power: float = DEFAULT_POWER) -> int | None:
        """About how many items would decide the point's side of `threshold`
        with probability `power` (None: the point sits on it, or no interval):
        the n at which the interval at the powered level clears the bound."""
        level = powered_alpha(alpha, power)
        interval = self.interval(level)
        if interval is None or self.value == threshold:
            return None
        if self.interval_at_size is None:
            edge = interval[0] if self.value > threshold else interval[1]
            return items_needed(self.n, abs(self.value - edge), abs(self.value - threshold))

        at_size = self.interval_at_size

        def clear(size: float) -> bool:
            low, high = at_size(level, size)
            return low > threshold if self.value > threshold else high < threshold

        high = self.n + 1
        while not clear(high):
            high *= 2
            if high > 10**9:
                return None
        low = max(self.n, high // 2)  # not clear at `low` (or it is n itself)
        while high - low > 1:
            mid = (low + high) // 2
            low, high = (low, mid) if clear(mid) else (mid, high)
        return high

    def p_value(self, bound: float) -> float | None:
        """The smallest alpha whose (1 - alpha) interval excludes `bound`: the
        two-sided p-value of 'the quantity equals the bound', by inverting the
        interval (bisection; intervals shrink as alpha grows), never below
        `p_floor` (a bootstrap of B replicates tells no p-value under 1/B). None
        without an interval."""
        if self.interval_at is None:
            return None
        if _inside(self.interval_at(1.0 - 1e-9), bound):
            return 1.0
        if not _inside(self.interval_at(self.p_floor), bound):
            return self.p_floor
        low, high = self.p_floor, 1.0 - 1e-9  # bound inside at `low`, outside at `high`
        for _ in range(50):
            mid = (low + high) / 2
            low, high = (mid, high) if _inside(self.interval_at(mid), bound) else (low, mid)
        return high


def powered_alpha(alpha: float, power: float) -> float:
    """The level whose two-sided critical value is z(1 - alpha/2) + z(power):
    an interval at it touches the bound where a true value that far from the
    bound is decided with probability `power`."""
    from scipy.stats import norm

    return float(2 * norm.sf(norm.isf(alpha / 2) + norm.ppf(power)))


def _inside(interval: tuple[float, float], x: float) -> bool:
    return interval[0] <= x <= interval[1]


def _mean_scores(result: MetricResult) -> np.ndarray | None:
    """The per-item scores whose mean the value is, or None (a set-level value)."""
    scores = np.fromiter(result.per_item.values(), dtype=np.float64, count=len(result.per_item))
    if (
        scores.size == 0
        or scores.size != result.n
        or not math.isclose(float(scores.mean()), result.value, rel_tol=1e-9, abs_tol=1e-12)
    ):
        return None
    return scores


def cluster_codes(result: MetricResult) -> np.ndarray:
    """One integer per item (in `per_item` order) naming its cluster; an item
    without a cluster is its own."""
    clusters = result.clusters or {}
    names = [clusters.get(item, f"\0{item}") for item in result.per_item]
    _, codes = np.unique(np.asarray(names, dtype=object).astype(str), return_inverse=True)
    return codes


def cluster_robust_se(
    values: np.ndarray, codes: np.ndarray, weights: np.ndarray | None = None
) -> tuple[float, int, float]:
    """(standard error of the (weighted) mean, G, design effect) of `values` in
    clusters `codes`: the CR1 sandwich estimator (G/(G-1) times the sum over
    clusters of the squared sum of weighted residuals, over the total weight
    squared), statsmodels' cluster-robust covariance of an intercept-only
    regression. The design effect is the sum of squared cluster sums of
    residuals over the sum of squared residuals (1 when every item is its own
    cluster, or when there is no spread)."""
    weights = np.ones(values.size) if weights is None else weights
    total = float(weights.sum())
    residuals = weights * (values - float((weights * values).sum()) / total)
    sums = np.bincount(codes, weights=residuals)
    groups = int(sums.size)
    if groups < 2:
        return math.nan, groups, math.nan
    squares = float(np.square(residuals).sum())
    between = float(np.square(sums).sum())
    variance = groups / (groups - 1) * between / total**2
    return math.sqrt(variance), groups, (between / squares if squares > 0 else 1.0)


def _t_critical(alpha: float, groups: int) -> float:
    """t(G - 1)'s two-sided critical value (scipy.special: t.isf's quantile without its overhead)."""
    from scipy.special import stdtrit

    return float(stdtrit(groups - 1, 1 - alpha / 2))


def studentized(
    values: np.ndarray, codes: np.ndarray, scale: tuple[float, float] | None, method: str
) -> Estimate | None:
    """The mean of `values` with its cluster-robust t(G-1) interval; with a
    `scale`, computed with a pseudo-item of weight PSEUDO_WEIGHT (its own
    cluster) at each end of the scale, and kept within it (module doc). None
    with fewer than 2 clusters."""
    observed = float(values.mean())
    groups = int(codes.max()) + 1 if codes.size else 0
    if groups < 2:
        return None
    se, _, deff = cluster_robust_se(values, codes)
    center = observed
    if scale is not None:
        augmented = np.concatenate([values, scale])
        weights = np.concatenate([np.ones(values.size), [PSEUDO_WEIGHT, PSEUDO_WEIGHT]])
        center = float((weights * augmented).sum() / weights.sum())
        se = cluster_robust_se(augmented, np.concatenate([codes, [groups, groups + 1]]), weights)[0]

    def interval(alpha: float) -> tuple[float, float]:
        half = _t_critical(alpha, groups) * se
        low, high = center - half, center + half
        if scale is not None:
            low, high = max(scale[0], low), min(scale[1], high)
        return low, high

    return Estimate(
        observed, int(values.size), method, interval, clusters=groups, n_effective=values.size / max(deff, 1.0)
    )


def wilson_effective(values: np.ndarray, codes: np.ndarray, scale: tuple[float, float], binary: bool) -> Estimate:
    """The mean of items on `scale` with Wilson's interval on its effective
    sample size (module doc): n_eff = m (1 - m) n^2 / (sum over clusters of the
    squared sum of residuals), the mean m on the unit scale. For 0/1 items this
    is n over the design effect (Korn & Graubard), never above n; for bounded
    items it is the quasi-binomial n (items that vary less than 0/1 items of
    the same mean are worth more), and as for 0/1 items when every item sits at
    an end of the scale. With shared clusters, or a variance estimated from
    values inside the scale, the degrees of freedom are G - 1: n_eff is scaled
    by (z / t(G-1))^2. No interval when all items are in one cluster."""
    low_end, high_end = scale
    width = high_end - low_end
    unit = (values - low_end) / width
    n, share = unit.size, float(unit.mean())
    groups = int(codes.max()) + 1
    if groups < 2 and n > 1:
        return Estimate(float(values.mean()), n, "none (one cluster)", None, clusters=1)
    between = float(np.square(np.bincount(codes, weights=unit - share)).sum())
    spread = share * (1 - share) * n**2
    # Items all at the ends of the scale are 0/1 items: their variance is the
    # share's own, not estimated, as for a binary metric.
    at_ends = binary or bool(np.isin(unit, (0.0, 1.0)).all())
    if spread == 0:  # every item at one end of the scale: as many as 0/1 items
        effective = float(n)
    elif between == 0:  # no spread at all inside the scale: nothing to tell chance from effect by
        effective = math.inf
    elif at_ends:
        effective = min(spread / between, float(n))  # a design effect below 1 is taken as 1 (Korn & Graubard)
    else:
        # The spread estimated with one item at each end of the scale, so that few nonzero items cannot
        # shrink it; but never wider than 0/1 items of the same mean and clustering would be, the most a
        # bounded scale allows (which keeps n_eff near n for scores a hair above 0).
        padded = spread / (between + DISPERSION_PSEUDO_WEIGHT * (share**2 + (1 - share) ** 2))
        design = between / float(np.square(unit - share).sum())
        effective = max(padded, n / max(design, 1.0))

    def at_size(alpha: float, size: float) -> tuple[float, float]:
        size_eff = effective * size / n
        if math.isinf(size_eff):
            point = low_end + share * width
            return point, point
        if groups < n or not at_ends:  # t(G-1) in place of z: shared clusters, or a variance estimated from spread
            size_eff *= (_z(alpha) / _t_critical(alpha, max(2, round(groups * size / n)))) ** 2
        low, high = _wilson(share * size_eff, size_eff, alpha)
        return low_end + low * width, low_end + high * width

    method = ("wilson" if binary else "wilson-quasibinomial") + ("-clustered" if groups < n else "")
    return Estimate(
        float(values.mean()), n, method, lambda a: at_size(a, n), at_size, clusters=groups, n_effective=effective
    )


def _z(alpha: float) -> float:
    from scipy.special import ndtri

    return float(-ndtri(alpha / 2))


def value_estimate(result: MetricResult, kind: str = "unbounded", scale: tuple[float, float] | None = None) -> Estimate:
    """The value of one checkpoint, with the interval its metric's `kind` takes (module doc)."""
    scores = _mean_scores(result)
    if scores is not None and kind != "set":
        codes = cluster_codes(result)
        if kind == "binary":
            _require_binary(result, scores)
            return wilson_effective(scores, codes, (0.0, 1.0), binary=True)
        if kind == "bounded" and scale is not None:
            return wilson_effective(scores, codes, scale, binary=False)
        found = studentized(scores, codes, None, "t-clustered")
        return found or Estimate(result.value, result.n, "none (one cluster)", None, clusters=1)
    if result.replicates:
        reps = np.asarray(result.replicates, dtype=np.float64)
        return Estimate(
            result.value, result.n, "bootstrap-percentile", lambda a: percentile_ci(reps, a), p_floor=1 / reps.size
        )
    low, high = result.ci
    if high > low:  # a 95% CI and nothing to remake it from (lm-eval's stderr, a third-party metric)
        return Estimate(result.value, result.n, "reported-95%-ci", lambda a: _rescaled(result.value, low, high, a))
    return Estimate(result.value, result.n, "none", None)


def _require_binary(result: MetricResult, scores: np.ndarray) -> None:
    if not np.isin(scores, (0.0, 1.0)).all():
        raise ValueError(f"metric {result.name} is declared binary but has per-item values other than 0 and 1")


def _wilson(count: float, size: float, alpha: float) -> tuple[float, float]:
    """Wilson's score interval of count / size (statsmodels' proportion_confint
    "wilson", written out: it is called thousands of times per p-value search)."""
    z = _z(alpha)
    share, z2 = count / size, z * z / size
    center = (share + z2 / 2) / (1 + z2)
    half = z * math.sqrt(share * (1 - share) / size + z2 / (4 * size)) / (1 + z2)
    return max(0.0, center - half), min(1.0, center + half)


def _rescaled(value: float, low: float, high: float, alpha: float) -> tuple[float, float]:
    """A reported 95% interval at another level, as a normal interval's would be."""
    from scipy.stats import norm

    scale = norm.ppf(1 - alpha / 2) / norm.ppf(0.975)
    return value - (value - low) * scale, value + (high - value) * scale


def difference_estimate(
    candidate: MetricResult, reference: MetricResult, kind: str = "unbounded", scale: tuple[float, float] | None = None
) -> Estimate:
    """candidate - reference, paired where the two share their items (module doc)."""
    value = candidate.value - reference.value
    own, ref = _mean_scores(candidate), _mean_scores(reference)
    if kind != "set" and own is not None and ref is not None and list(candidate.per_item) == list(reference.per_item):
        codes = cluster_codes(candidate)
        if kind == "binary":  # Newcombe's paired interval undercovers when all discordant pairs go one way
            _require_binary(candidate, own)
            _require_binary(reference, ref)
            scale = (0.0, 1.0)
        width = scale[1] - scale[0] if kind in ("binary", "bounded") and scale else None
        found = studentized(
            own - ref, codes, (-width, width) if width else None, "t-clustered-paired" + ("-bounded" if width else "")
        )
        return found or Estimate(value, candidate.n, "none (one cluster)", None, clusters=1)
    if (
        candidate.replicates
        and reference.replicates
        and candidate.n == reference.n
        and len(candidate.replicates) == len(reference.replicates)
    ):
        diffs = np.asarray(candidate.replicates) - np.asarray(reference.replicates)
        diffs = diffs[~np.isnan(diffs)]  # inf - inf: both unbounded in that resample
        return Estimate(
            value, candidate.n, "bootstrap-paired", lambda a: percentile_ci(diffs, a), p_floor=1 / max(diffs.size, 1)
        )
    a_est, b_est = value_estimate(candidate, kind, scale), value_estimate(reference, kind, scale)
    if a_est.interval_at is None and b_est.interval_at is None:
        return Estimate(value, candidate.n, "none", None)

    def mover(alpha: float) -> tuple[float, float]:
        a_low, a_high = a_est.interval(alpha) or (candidate.value,) * 2
        b_low, b_high = b_est.interval(alpha) or (reference.value,) * 2
        return (
            value - math.hypot(candidate.value - a_low, b_high - reference.value),
            value + math.hypot(a_high - candidate.value, reference.value - b_low),
        )

    return Estimate(value, candidate.n, "mover-unpaired", mover, p_floor=max(a_est.p_floor, b_est.p_floor))


def holm_adjusted(p_values: dict[K, float], alpha: float) -> dict[K, float]:
    """Holm-Bonferroni over one family: {name: Holm-adjusted p-value}; a check
    is decided where its adjusted p-value is <= alpha (statsmodels)."""
    from statsmodels.stats.multitest import multipletests

    if not p_values:
        return {}
    names = list(p_values)
    # statsmodels' Holm ends in gc.collect(), a full collection of every
    # object the run holds (a quarter of a second each time in a main job);
    # frozen objects are not collected, and nothing here makes garbage cycles.
    gc.freeze()
    try:
        _, adjusted, _, _ = multipletests([p_values[k] for k in names], alpha=alpha, method="holm")
    finally:
        gc.unfreeze()
    return {name: float(p) for name, p in zip(names, adjusted)}


def items_needed(n: int, half_width: float, distance: float) -> int | None:
    """About how many items an interval of `half_width` at n items needs to
    shrink within `distance` (widths scale as 1/sqrt(n)); None when the
    distance is 0 (no number of items decides a point on the bound)."""
    if distance <= 0 or not math.isfinite(half_width):
        return None
    return max(n + 1, math.ceil(n * (half_width / distance) ** 2))
