"""The quantity a check decides on, its interval at any level, and what
follows from it: a p-value, Holm's correction, the items a decision needs
(docs/verdicts.md).

An absolute check decides on the checkpoint's value; a relative one on the
difference checkpoint - reference over the same items:

- both values means of per-item scores over the same items: paired. 0/1
  scores get Newcombe's interval for a paired difference of proportions
  (built on Wilson's, so it keeps its width at 0/n and n/n); other scores the
  percentile bootstrap of the per-item differences;
- both set-level values with bootstrap replicates over the same items
  (`MetricResult.replicates`; replicate k of each resampled the same items):
  the percentile interval of the replicates' differences;
- otherwise the two values' own intervals combined (MOVER: Zou & Donner's
  square-and-add), as if the models had answered different items.

A value alone: Wilson's interval for a share of 0/1 items, the percentile
bootstrap for another mean or a set-level value with replicates, the
metric's reported 95% CI where there is nothing to remake it from (lm-eval's
stderr interval), and none for a value that has no interval of its own (it
is then decided on its point, and the verdict says so).

Every bootstrap draws from `metrics.core.bootstrap_indices`, seeded by the
run's `--seed`, so the intervals here reproduce the metrics' own 95% CIs at
alpha = 0.05.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from unlearnbench.metrics.core import MetricResult, bootstrap_means, is_share, percentile_ci, wilson_ci
from unlearnbench.rule import DEFAULT_ALPHA



@dataclass(frozen=True)
class Estimate:
    """A decision quantity: its point value, its item count, how its interval
    is made (`method`) and the interval at any level (None: it has none).
    `interval_at_size(alpha, n)`, where given, is the interval the same
    observed shares would have at n items (Wilson, Newcombe): what `needed`
    solves exactly; other intervals shrink as 1/sqrt(n)."""

    value: float
    n: int
    method: str
    interval_at: Callable[[float], tuple[float, float]] | None
    interval_at_size: Callable[[float, float], tuple[float, float]] | None = None

    def interval(self, alpha: float) -> tuple[float, float] | None:
        return self.interval_at(alpha) if self.interval_at else None

    def needed(self, threshold: float, alpha: float) -> int | None:
        """About how many items would put the interval wholly on the point's
        side of `threshold` (None: the point sits on it, or no interval)."""
        interval = self.interval(alpha)
        if interval is None or self.value == threshold:
            return None
        if self.interval_at_size is None:
            edge = interval[0] if self.value > threshold else interval[1]
            return items_needed(self.n, abs(self.value - edge), abs(self.value - threshold))

        def clear(size: float) -> bool:
            low, high = self.interval_at_size(alpha, size)
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
        interval (bisection; intervals shrink as alpha grows). None without an
        interval."""
        if self.interval_at is None:
            return None
        if _inside(self.interval_at(1.0 - 1e-9), bound):
            return 1.0
        if not _inside(self.interval_at(1e-12), bound):
            return 0.0
        low, high = 1e-12, 1.0 - 1e-9  # bound inside at `low`, outside at `high`
        for _ in range(50):
            mid = (low + high) / 2
            low, high = (mid, high) if _inside(self.interval_at(mid), bound) else (low, mid)
        return high


def _inside(interval: tuple[float, float], x: float) -> bool:
    return interval[0] <= x <= interval[1]


def _mean_scores(result: MetricResult) -> np.ndarray | None:
    """The per-item scores whose mean the value is, or None (a set-level value)."""
    scores = np.fromiter(result.per_item.values(), dtype=np.float64, count=len(result.per_item))
    if scores.size == 0 or scores.size != result.n or not math.isclose(float(scores.mean()), result.value,
                                                                        rel_tol=1e-9, abs_tol=1e-12):
        return None
    return scores


def value_estimate(result: MetricResult) -> Estimate:
    """The value of one checkpoint, with the interval docs/verdicts.md names for it."""
    scores = _mean_scores(result)
    if scores is not None and is_share(scores):
        share = float(scores.mean())
        return Estimate(result.value, result.n, "wilson", lambda a: wilson_ci(scores, a),
                        lambda a, size: _wilson(share * size, size, a))
    if scores is not None:
        means = bootstrap_means(scores)
        return Estimate(result.value, result.n, "bootstrap-percentile", lambda a: percentile_ci(means, a))
    if result.replicates:
        reps = np.asarray(result.replicates, dtype=np.float64)
        return Estimate(result.value, result.n, "bootstrap-percentile", lambda a: percentile_ci(reps, a))
    low, high = result.ci
    if high > low:  # a 95% CI and nothing to remake it from (lm-eval's stderr, a third-party metric)
        return Estimate(result.value, result.n, "reported-95%-ci", lambda a: _rescaled(result.value, low, high, a))
    return Estimate(result.value, result.n, "none", None)


def _wilson(count: float, size: float, alpha: float) -> tuple[float, float]:
    from statsmodels.stats.proportion import proportion_confint

    low, high = proportion_confint(count, size, alpha=alpha, method="wilson")
    return max(0.0, float(low)), min(1.0, float(high))


def _rescaled(value: float, low: float, high: float, alpha: float) -> tuple[float, float]:
    """A reported 95% interval at another level, as a normal interval's would be."""
    from scipy.stats import norm

    scale = norm.ppf(1 - alpha / 2) / norm.ppf(0.975)
    return value - (value - low) * scale, value + (high - value) * scale


def difference_estimate(candidate: MetricResult, reference: MetricResult) -> Estimate:
    """candidate - reference, paired where the two share their items (module doc)."""
    value = candidate.value - reference.value
    own, ref = _mean_scores(candidate), _mean_scores(reference)
    if own is not None and ref is not None and list(candidate.per_item) == list(reference.per_item):
        if is_share(own) and is_share(ref):
            table = _paired_table(own, ref)
            return Estimate(value, candidate.n, "newcombe-paired", lambda a: newcombe_paired(table, a),
                            lambda a, size: newcombe_paired([c * size / own.size for c in table], a))
        diffs = bootstrap_means(own - ref)
        return Estimate(value, candidate.n, "bootstrap-paired", lambda a: percentile_ci(diffs, a))
    if (candidate.replicates and reference.replicates and candidate.n == reference.n
            and len(candidate.replicates) == len(reference.replicates)):
        diffs = np.asarray(candidate.replicates) - np.asarray(reference.replicates)
        return Estimate(value, candidate.n, "bootstrap-paired", lambda a: percentile_ci(diffs, a))
    a_est, b_est = value_estimate(candidate), value_estimate(reference)
    if a_est.interval_at is None and b_est.interval_at is None:
        return Estimate(value, candidate.n, "none", None)

    def mover(alpha: float) -> tuple[float, float]:
        a_low, a_high = a_est.interval(alpha) or (candidate.value,) * 2
        b_low, b_high = b_est.interval(alpha) or (reference.value,) * 2
        return (value - math.hypot(candidate.value - a_low, b_high - reference.value),
                value + math.hypot(a_high - candidate.value, reference.value - b_low))

    return Estimate(value, candidate.n, "mover-unpaired", mover)


def _paired_table(first: np.ndarray, second: np.ndarray) -> tuple[int, int, int, int]:
    """(both 1, first only, second only, neither) of two paired 0/1 score arrays."""
    first, second = first.astype(bool), second.astype(bool)
    return (int((first & second).sum()), int((first & ~second).sum()), int((~first & second).sum()),
            int((~first & ~second).sum()))


def newcombe_paired(table, alpha: float = DEFAULT_ALPHA) -> tuple[float, float]:
    """The (1 - alpha) interval of p1 - p2 for paired 0/1 scores from their 2x2
    table (both, first only, second only, neither): Newcombe (1998), method
    10, from each share's Wilson interval and the table's phi correlation."""
    both, only_first, only_second, neither = table
    n = both + only_first + only_second + neither
    p1, p2 = (both + only_first) / n, (both + only_second) / n
    l1, u1 = _wilson(both + only_first, n, alpha)
    l2, u2 = _wilson(both + only_second, n, alpha)
    margins = (both + only_first) * (only_second + neither) * (both + only_second) * (only_first + neither)
    phi = (both * neither - only_first * only_second) / math.sqrt(margins) if margins else 0.0
    delta = p1 - p2
    low = delta - math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    high = delta + math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    return max(-1.0, low), min(1.0, high)


def holm_adjusted(p_values: dict[str, float], alpha: float) -> dict[str, float]:
    """Holm-Bonferroni over one family: {name: Holm-adjusted p-value}; a check
    is decided where its adjusted p-value is <= alpha (statsmodels)."""
    from statsmodels.stats.multitest import multipletests

    if not p_values:
        return {}
    names = list(p_values)
    _, adjusted, _, _ = multipletests([p_values[k] for k in names], alpha=alpha, method="holm")
    return {name: float(p) for name, p in zip(names, adjusted)}


def items_needed(n: int, half_width: float, distance: float) -> int | None:
    """About how many items an interval of `half_width` at n items needs to
    shrink within `distance` (widths scale as 1/sqrt(n)); None when the
    distance is 0 (no number of items decides a point on the bound)."""
    if distance <= 0 or not math.isfinite(half_width):
        return None
    return max(n + 1, math.ceil(n * (half_width / distance) ** 2))

