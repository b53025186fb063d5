"""How often a verdict is wrong: false-pass and false-fail rates of the
decision intervals (unlearnbench/evidence.py), simulated at the bound, and
the power at `n_needed`.

For each metric family the suites declare (binary, bounded continuous,
sparse bounded, tied paired differences, set-level AUC), each item count n,
cluster count G and within-cluster correlation rho, many checkpoints are
drawn whose true value sits exactly on a check's bound. An interval rule
with level alpha should then pass at most alpha/2 of them (the interval
wholly on the pass side) and fail at most alpha/2 (wholly on the fail side).
The checks are made through `Check.judge`, the code a run uses, on
MetricResults with clusters, as the suites produce them.

Power: a checkpoint whose true value is one `mde` (at 80% power) from the
bound, drawn at the n `n_needed` names, should be decided at least 80% of
the time.

    python benchmarks/calibration.py            # the full table (docs/verdicts.md), ~20 min on 2 cores
    python benchmarks/calibration.py --quick    # the subset the tests run, ~1 min on one core

Each row prints the family, n, G, rho, the false-pass and false-fail rates
and the share decided. Exits 1 when a per-check rate exceeds alpha/2 (or a
family's stated limit), a checkpoint's false-FAIL rate under Holm exceeds
alpha or its false-PASS rate alpha/2, or the power at `n_needed` falls under
0.8, each by more than three Monte Carlo standard errors.
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
from dataclasses import dataclass, replace

import numpy as np

from unlearnbench.metrics.core import MetricResult, bootstrap_indices, mean_result, replicated, seeded
from unlearnbench.metrics.mia import auc, comparison_matrix, resampled_means
from unlearnbench.rule import DecisionRule
from unlearnbench.thresholds import Check

ALPHA = 0.05


@dataclass(frozen=True)
class Family:
    """A metric family: how items are drawn around a true value, and the check judging them."""

    name: str
    kind: str
    scale: tuple[float, float] | None
    relative: bool  # judged as a paired difference from a reference model
    bound: float  # the true value (or true difference) the checkpoints sit on
    # A limit measured and stated (docs/verdicts.md), not asserted: the rate this side may reach.
    known_false_fail: float | None = None


FAMILIES = (
    Family("binary share", "binary", (0.0, 1.0), False, 0.2),
    Family("binary paired difference", "binary", (0.0, 1.0), True, -0.1),
    # A forget check against the retain model (`at_most retain + 0.1`): the retain model answers 5% of the
    # probes, the candidate answers those and gains others (the elicitation suite's families).
    Family("binary paired gain (at_most)", "binary", (0.0, 1.0), True, 0.1),
    Family("bounded continuous (Beta)", "bounded", (0.0, 1.0), False, 0.4),
    Family("sparse bounded (85% zeros)", "bounded", (0.0, 1.0), False, 0.075),
    Family("tied paired difference (70% ties)", "bounded", (0.0, 1.0), True, -0.05),
    Family("unbounded (normal)", "unbounded", None, False, 1.0),
    Family("set-level AUC", "set", (0.0, 1.0), False, 0.6),
    # A supremum's bootstrap: even reflected (the basic interval), a true distance on the bound is
    # failed ~20% of the time when the two distributions differ by the same amount over a whole range.
    Family("set-level KS distance", "set", (0.0, 1.0), False, 0.2, known_false_fail=0.3),
)


def _cluster_effects(rng, groups: int, rho: float, mean: float) -> np.ndarray:
    """Each cluster's mean: Beta around `mean` with intra-cluster correlation rho (all `mean` at rho 0)."""
    if rho == 0:
        return np.full(groups, mean)
    concentration = (1 - rho) / rho
    return rng.beta(mean * concentration, (1 - mean) * concentration, groups)


def draw(family: Family, rng, n: int, groups: int, rho: float, shift: float = 0.0):
    """(candidate values, reference values or None, cluster ids) for one simulated checkpoint
    whose true value is the bound + shift."""
    clusters = np.arange(n) % groups
    truth = family.bound + shift
    if family.name.startswith("binary share"):
        p = _cluster_effects(rng, groups, rho, truth)[clusters]
        return (rng.random(n) < p).astype(float), None, clusters
    if family.name.startswith("binary paired gain"):
        ref = (rng.random(n) < _cluster_effects(rng, groups, rho, 0.05)[clusters]).astype(float)
        gained = rng.random(n) < max(0.0, truth) / 0.95
        return np.where(ref == 0, gained.astype(float), ref), ref, clusters
    if family.name.startswith("binary paired"):
        # the reference knows 80% (clustered); the candidate loses known items (truth < 0) or gains unknown ones
        ref = (rng.random(n) < _cluster_effects(rng, groups, rho, 0.8)[clusters]).astype(float)
        flip = rng.random(n) < (-truth / 0.8 if truth < 0 else truth / 0.2)
        return np.where(flip & (ref == (1.0 if truth < 0 else 0.0)), 1 - ref, ref), ref, clusters
    if family.name.startswith("bounded continuous"):
        means = _cluster_effects(rng, groups, rho, truth)[clusters]
        return rng.beta(means * 4, (1 - means) * 4), None, clusters
    if family.name.startswith("sparse"):
        # a share `truth / 0.5` of items score U(0, 1), clustered; the rest 0: the mean is `truth`
        hit = _cluster_effects(rng, groups, rho, min(truth / 0.5, 0.99))[clusters]
        return np.where(rng.random(n) < hit, rng.uniform(0, 1, n), 0.0), None, clusters
    if family.name.startswith("tied"):
        ref = np.clip(_cluster_effects(rng, groups, rho, 0.5)[clusters] + rng.normal(0, 0.05, n), 0.2, 0.8)
        moved = rng.random(n) < 0.3  # 70% of items score the same under both models
        return np.where(moved, ref + rng.normal(truth / 0.3, 0.05, n), ref), ref, clusters
    if family.name.startswith("unbounded"):
        effect = rng.normal(0, math.sqrt(rho), groups)[clusters]
        return truth + effect + rng.normal(0, math.sqrt(1 - rho), n), None, clusters
    raise ValueError(family.name)


def _auc_result(rng, n: int, shift: float) -> MetricResult:
    """An AUC(holdout, forget) over n/2 + n/2 scores whose true AUC is the bound + shift."""
    from scipy.stats import norm

    half = max(2, n // 2)
    delta = math.sqrt(2) * norm.ppf(min(0.999, max(0.001, FAMILIES[-2].bound + shift)))
    holdout, forget = rng.normal(delta, 1, half), rng.normal(0, 1, half)
    matrix = comparison_matrix(list(holdout), list(forget))
    h, f = bootstrap_indices([half, half], 1000)
    reps = resampled_means(matrix, h, f)
    return MetricResult("m", auc(list(holdout), list(forget)), 2 * half, higher_is_better=True,
                        **replicated(reps.tolist()))


def _ks_result(rng, n: int, shift: float) -> MetricResult:
    """TOFU's forget-quality distance: the KS distance between a checkpoint's
    and the retain model's truth ratios on the same n items, whose true value
    is the bound + shift (the checkpoint's ratio of an item is the retain
    model's plus that much, on uniform ratios), with the suite's paired
    bootstrap replicates."""
    from scipy.stats import ks_2samp

    from unlearnbench.suites.tofu.metrics import ks_distance_replicates

    retain = rng.uniform(0, 1, n)
    own = retain + FAMILIES[-1].bound + shift
    return MetricResult("m", float(ks_2samp(own, retain).statistic), n, higher_is_better=False,
                        **replicated(ks_distance_replicates(own.tolist(), retain.tolist())))


def _result(values: np.ndarray, clusters: np.ndarray) -> MetricResult:
    result = mean_result("m", {f"q{i}": float(v) for i, v in enumerate(values)}, higher_is_better=True)
    result.clusters = {f"q{i}": f"c{c}" for i, c in enumerate(clusters)}
    return result


def judge_once(family: Family, rng, n: int, groups: int, rho: float, shift: float = 0.0):
    """The verdict on one simulated checkpoint."""
    if family.relative and family.bound > 0:  # at_most retain + bound: a pass is an interval wholly below it
        check = Check(suite="sim", name="c", metric="m", direction="at_most", rationale="r", source="sim",
                      kind=family.kind, scale=family.scale, relative_to="retain", margin=family.bound)
        own, ref, clusters = draw(family, rng, n, groups, rho, shift)
        return check.judge({"m": _result(own, clusters)}, {"m": _result(ref, clusters)})
    check = Check(suite="sim", name="c", metric="m", direction="at_least", rationale="r", source="sim",
                  kind=family.kind, scale=family.scale,
                  **({"relative_to": "retain", "margin": -family.bound} if family.relative else {"bound": family.bound}))
    if family.name == "set-level AUC":
        return check.judge({"m": _auc_result(rng, n, shift)})
    if family.name == "set-level KS distance":  # at_most: a distance shown below the bound passes
        return replace(check, direction="at_most").judge({"m": _ks_result(rng, n, -shift)})
    own, ref, clusters = draw(family, rng, n, groups, rho, shift)
    if family.relative:
        # at_least retain - margin with margin = -bound: the true difference sits on -margin
        return check.judge({"m": _result(own, clusters)}, {"m": _result(ref, clusters)})
    return check.judge({"m": _result(own, clusters)})


def rates(family: Family, n: int, groups: int, rho: float, reps: int, seed: int) -> dict:
    """False-pass and false-fail rates at the bound (pass: the interval wholly
    above it, fail: wholly below; direction at_least)."""
    rng = np.random.default_rng(seed)
    passed = failed = 0
    with seeded(seed):
        for _ in range(reps):
            verdict = judge_once(family, rng, n, groups, rho)
            passed += verdict.outcome == "pass"
            failed += verdict.outcome == "fail"
    mc = math.sqrt(ALPHA / 2 * (1 - ALPHA / 2) / reps)
    return {"false_pass": passed / reps, "false_fail": failed / reps, "mc_se": mc}


def power_at_needed(family: Family, n: int, groups: int, rho: float, reps: int, seed: int) -> dict | None:
    """The n that `n_needed` names for a distance d from the bound is the n at
    which d is the 80%-power `mde`: so put the true value one mde (the median
    over 50 pilot checkpoints at n items on the bound) past the bound, and
    count how often fresh checkpoints at n items are decided on that side."""
    rng = np.random.default_rng(seed)
    with seeded(seed):
        pilots = [judge_once(family, rng, n, groups, rho).mde for _ in range(50)]
        pilots = [m for m in pilots if m and math.isfinite(m)]
        if not pilots:
            return None
        shift = float(np.median(pilots)) * (-1 if family.relative and family.bound > 0 else 1)  # inside the bound
        if family.bound + shift < 0 and family.relative and family.bound > 0:
            return None  # a gain cannot be that far below the bound: no such checkpoint to draw
        decided = sum(judge_once(family, rng, n, groups, rho, shift=shift).outcome == "pass" for _ in range(reps))
    return {"power": decided / reps, "shift": shift, "mc_se": math.sqrt(0.8 * 0.2 / reps)}


def checkpoint_rates(checks: int, n: int, reps: int, seed: int, correction: str, family: Family = FAMILIES[0],
                     groups: int | None = None, rho: float = 0.0, inside: float = 0.3) -> dict:
    """A checkpoint's verdict under the family rule: `checks` checks of
    `family` (n items each, in `groups` clusters: every item its own by
    default). False FAIL: every check's truth on its bound, and any check
    decided failed (after Holm's correction of the fails, as a run applies
    it). False PASS: one check on its bound, the others `inside` past it,
    and every check passed (an intersection-union test: no correction
    needed)."""
    from unlearnbench.evidence import holm_adjusted

    groups = groups or n
    rng = np.random.default_rng(seed)
    false_fail = false_pass = 0
    for _ in range(reps):
        verdicts = [judge_once(family, rng, n, groups, rho) for _ in range(checks)]
        if correction == "holm":
            tested = {k: v.p_value for k, v in enumerate(verdicts) if v.p_value is not None}
            adjusted = holm_adjusted(tested, ALPHA)
            verdicts = [v if v.outcome != "fail" else
                        replace(v, outcome="fail" if adjusted[k] <= ALPHA else "inconclusive")
                        for k, v in enumerate(verdicts)]
        false_fail += any(v.outcome == "fail" for v in verdicts)
        rest = [judge_once(family, rng, n, groups, rho, shift=inside) for _ in range(checks - 1)]
        false_pass += all(v.outcome == "pass" for v in [judge_once(family, rng, n, groups, rho), *rest])
    return {"false_fail": false_fail / reps, "false_pass": false_pass / reps,
            "mc_se": math.sqrt(ALPHA * (1 - ALPHA) / reps)}


ELICITATION_FAMILY = next(f for f in FAMILIES if f.name.startswith("binary paired gain"))
GRID = {"n": (6, 12, 24, 128, 400), "clusters": ("n", 2, 4, 16, 40), "rho": (0.0, 0.2, 0.5)}
QUICK = ((6, "n", 0.0), (24, "n", 0.0), (128, 16, 0.2))


def rows(quick: bool):
    if quick:
        yield from QUICK
        return
    for n, g, rho in itertools.product(GRID["n"], GRID["clusters"], GRID["rho"]):
        groups = n if g == "n" else g
        if groups > n or (g == "n" and rho > 0) or (groups == n and g != "n"):
            continue
        yield n, g, rho


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the subset the tests run")
    parser.add_argument("--reps", type=int, default=None, help="simulated checkpoints per row (default 2000, quick 400)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--family", default="", help="only the families whose name contains this")
    args = parser.parse_args(argv)
    reps = args.reps or (200 if args.quick else 2000)
    worst = 0.0
    print(f"alpha {ALPHA}: each rate should be at most {ALPHA / 2} (+ 3 Monte Carlo SE); {reps} checkpoints a row. "
          f"The checks are `at_least` (the KS distance's `at_most`): 'false pass' is the interval wholly on the "
          f"good side of the truth, 'false fail' wholly on the other; for a check of the other direction the two "
          f"swap (an interval whose upper end falls short of the truth fails an at_least check and passes an "
          f"at_most one)")
    print("| family | n | G | rho | false pass | false fail | decided |")
    print("|---|---|---|---|---|---|---|")
    families = [f for f in FAMILIES if args.family in f.name]
    for family in families:
        for n, g, rho in rows(args.quick):
            groups = n if g == "n" else g
            if family.kind == "set" and g != "n":
                continue  # the AUC's items are its chunks: resampled as items
            r = rates(family, n, groups, rho, reps, args.seed)
            fail_limit = family.known_false_fail or ALPHA / 2
            excess = max(r["false_pass"] - ALPHA / 2, r["false_fail"] - fail_limit) - 3 * r["mc_se"]
            worst = max(worst, excess)
            flag = "  <-- over" if excess > 0 else (" (a stated limit: docs/verdicts.md)" if family.known_false_fail
                                                     else "")
            print(f"| {family.name} | {n} | {groups} | {rho:g} | {r['false_pass']:.3f} | {r['false_fail']:.3f} | "
                  f"{r['false_pass'] + r['false_fail']:.3f} |{flag}", flush=True)
    print(f"\na checkpoint of K binary checks (n = 128 each): false FAIL (all on the bound) should be at most "
          f"{ALPHA} under Holm; false PASS (one on the bound, the rest inside) at most {ALPHA / 2}")
    print("| K | correction | checkpoint false FAIL | checkpoint false PASS |")
    print("|---|---|---|---|")
    for checks in ((5, 30) if not args.quick else (5, 10)):
        for correction in ("none", "holm"):
            r = checkpoint_rates(checks, 128, max(100, reps // 2), args.seed + 2, correction)
            if correction == "holm":
                worst = max(worst, r["false_fail"] - ALPHA - 3 * r["mc_se"], r["false_pass"] - ALPHA / 2 - 3 * r["mc_se"])
            print(f"| {checks} | {correction} | {r['false_fail']:.3f} | {r['false_pass']:.3f} |", flush=True)
    # The elicitation suite's headline: a fact forgotten under every way of asking, one paired check per
    # family against the retain model (128 probes of 16 people each): ten chances to look leaky by noise.
    print(f"\nthe elicitation headline: 10 checks `at_most retain + 0.1` (a family each: 128 probes of 16 people, "
          f"rho 0.2), all on the bound: a false 'fails under some family' should be at most {ALPHA} under Holm; "
          f"one on the bound and the rest answered like the retain model: a false pass at most {ALPHA / 2}")
    print("| K | correction | checkpoint false FAIL | checkpoint false PASS |")
    print("|---|---|---|---|")
    for correction in ("none", "holm"):
        r = checkpoint_rates(10, 128, reps // 4 if args.quick else reps // 2, args.seed + 3, correction,
                             family=ELICITATION_FAMILY, groups=16, rho=0.2, inside=-0.1)
        if correction == "holm":
            worst = max(worst, r["false_fail"] - ALPHA - 3 * r["mc_se"], r["false_pass"] - ALPHA / 2 - 3 * r["mc_se"])
        print(f"| 10 families | {correction} | {r['false_fail']:.3f} | {r['false_pass']:.3f} |", flush=True)
    print("\npower at n_needed (true value one 80%-power mde from the bound):")
    print("| family | n | G | rho | mde | power |")
    print("|---|---|---|---|---|---|")
    for family in families:
        if family.kind == "set":
            continue
        for n, g, rho in ((24, "n", 0.0), (128, 16, 0.2)):
            groups = n if g == "n" else g
            found = power_at_needed(family, n, groups, rho, max(100, reps // 2), args.seed + 1)
            if found:
                worst = max(worst, 0.8 - 3 * found["mc_se"] - found["power"])
                print(f"| {family.name} | {n} | {groups} | {rho:g} | {found['shift']:.3g} | {found['power']:.2f} |",
                      flush=True)
    return 1 if worst > 0 else 0


if __name__ == "__main__":
    sys.exit(main())
