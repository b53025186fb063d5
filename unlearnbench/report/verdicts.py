"""What a report says about each checkpoint: its gate verdict, and where it
ranks among the other candidates.

**Verdict** of a checkpoint on a suite (and over all its suites): `fail` when
any check fails or errors, else `inconclusive` when any check is inconclusive
or none was judged, else `pass`. Skipped checks (a reference model not given,
a metric unavailable) are counted, never judged. A check that the retain
model itself fails is flagged on every row ("retain fails this too") and
counted apart: it still fails the gate, as it fails the pytest run, but a
reader sees that the model everything is compared with cannot pass it on this
data.

**Anchors** are the reference models (the run's full and retain models):
they get verdicts, are badged, and are never ranked.

**Ranking** (candidates only) ranks what the data decided: an
inconclusive check (underpowered, or one the references cannot judge) counts
as neither passed nor failed, and checks that read the same metric of one
suite count once (their worst outcome). On the checks every ranked candidate ran (the
largest set of checks that the most candidates ran; a candidate that ran only
some of them, like a robustness-only checkpoint, is listed apart with the
reason): gate verdict (pass, inconclusive, fail); then utility kept or paid
for before utility collapsed (a collapse: more than half of its utility
checks decided failed, so it "forgets" by losing everything; a cost: fewer
decided utility failures); then forgetting shown, forget checks decided
passed minus those decided failed (most first); then utility checks decided
failed (fewest first); then the mean clipped relative margin of the decided
checks; then the name. Forget efficacy and model utility stay separate axes,
as OpenUnlearning and MUSE report them: never one sum of the two.

**Series** (the `checkpoint-<step>` folders of one training run) are one
candidate each: the series is ranked by its best step under the rule above,
that step named, and every step is listed under `ranking.series` in step
order with its verdict, so that steps of one run never outrank each other.
Picking the best of N steps is a selection: a step counts as passing for its
series (its rank, the series' first passing step) only where every check
passes at alpha / N (each p-value of its bound at most that; Bonferroni over
the N steps looked at), so that the chance that any step of a series on the
bound "passes" stays at most alpha however many steps are saved. A step
that passes alone but not at alpha / N ranks as inconclusive, and says so.
"""

from __future__ import annotations

OUTCOMES = ("pass", "fail", "inconclusive", "skip", "error")
VERDICT_ORDER = {"pass": 0, "inconclusive": 1, "fail": 2}
MARGIN_FLOOR = 0.1
FIRST_FAILURES = 3
RULE = (
    "Candidates are ranked on the {n} checks they all ran, counting only decided verdicts (an inconclusive "
    "check counts as neither): gate verdict first (pass, inconclusive, fail), then utility kept or paid for "
    "before utility collapsed (more than half of the utility checks decided failed: a collapsed model ranks below "
    "every model that keeps utility), then forgetting shown (forget checks decided passed minus decided failed, "
    "most first), then utility checks decided failed (fewest first), then the mean clipped margin to the bounds; "
    "a training run's steps are one candidate, ranked by its best step; references are anchors, never ranked."
)


def check_margin(verdict: dict) -> float | None:
    """How far a judged value sits on the good side of its bound, relative to
    the bound (floor 0.1) and clipped to [-1, 1]; None when not judged."""
    value, bound, direction = verdict.get("value"), verdict.get("bound"), verdict.get("direction")
    if value is None or bound is None or verdict.get("outcome") not in ("pass", "fail"):
        return None
    return relative_margin(value, bound, str(direction))


def relative_margin(value: float, bound: float, direction: str) -> float:
    """How far `value` sits on the passing side of `bound`, relative to the bound (floor 0.1), in [-1, 1]."""
    signed = value - bound if direction == "at_least" else bound - value
    return max(-1.0, min(1.0, signed / max(abs(bound), MARGIN_FLOOR)))


def anchors(report: dict) -> dict[str, str]:
    """{checkpoint name: role} for the checkpoints that are the run's
    reference models: named at the start of the run (`run.anchors`), or with
    the fingerprint of a reference the report records."""
    found = dict(report.get("run", {}).get("anchors") or {})
    fingerprints = {
        info["fingerprint"]: role
        for role, info in (report.get("references") or {}).items()
        if info and info.get("fingerprint")
    }
    for name, checkpoint in report["checkpoints"].items():
        role = fingerprints.get(checkpoint.get("info", {}).get("fingerprint"))
        if role and name not in found:
            found[name] = role
    return found


def _checks(checkpoint: dict):
    for suite, result in checkpoint.get("suites", {}).items():
        for check, verdict in result.get("checks", {}).items():
            yield f"{suite}.{check}", verdict


def retain_failures(report: dict, anchor_roles: dict[str, str] | None = None) -> set[str]:
    """'suite.check' of every check the retain anchor fails."""
    roles = anchors(report) if anchor_roles is None else anchor_roles
    failed = set()
    for name, role in roles.items():
        if role == "retain" and name in report["checkpoints"]:
            failed |= {key for key, v in _checks(report["checkpoints"][name]) if v["outcome"] in ("fail", "error")}
    return failed


def _counts(verdicts: list[tuple[str, dict]], retain_fails: set[str]) -> dict:
    counts = {o: 0 for o in OUTCOMES}
    for _, v in verdicts:
        counts[v["outcome"] if v["outcome"] in counts else "error"] += 1
    failing = [key for key, v in verdicts if v["outcome"] in ("fail", "error")]
    judged = counts["pass"] + counts["fail"] + counts["error"]
    if counts["fail"] or counts["error"]:
        verdict = "fail"
    elif counts["inconclusive"] or judged == 0:
        verdict = "inconclusive"
    else:
        verdict = "pass"
    return {
        "verdict": verdict,
        "passed": counts["pass"],
        "failed": counts["fail"],
        "errors": counts["error"],
        "inconclusive": counts["inconclusive"],
        "skipped": counts["skip"],
        "judged": judged,
        "failing": failing,
        "retain_fails_too": [k for k in failing if k in retain_fails],
    }


def checkpoint_verdicts(report: dict) -> dict[str, dict]:
    """{name: {verdict, role, counts..., suites: {SUITE: {verdict, counts...}}, summary}} for every checkpoint."""
    roles = anchors(report)
    retain_fails = retain_failures(report, roles)
    out = {}
    for name, checkpoint in report["checkpoints"].items():
        every = list(_checks(checkpoint))
        overall = _counts(every, retain_fails)
        if checkpoint.get("lost"):
            overall["verdict"] = "fail"
            overall["lost"] = checkpoint["lost"]["reason"]
        suites = {
            suite: _counts([(k, v) for k, v in every if k.split(".", 1)[0] == suite], retain_fails)
            for suite in checkpoint.get("suites", {})
        }
        out[name] = overall | {"role": roles.get(name), "suites": suites, "summary": _summary(overall, suites)}
    return out


def suite_counts(verdict: dict) -> str:
    """'dusk 5/6, tofu 1/2': checks passed / judged per suite."""
    return ", ".join(f"{suite} {c['passed']}/{c['judged']}" for suite, c in verdict["suites"].items())


def _summary(overall: dict, suites: dict) -> str:
    """'FAIL: 9 of 27 checks fail (3 the retain model fails too); dusk 1/6, ...; first: dusk.x, ...'"""
    if overall.get("lost"):
        return f"FAIL: lost ({overall['lost']})"
    per_suite = suite_counts({"suites": suites})
    head = overall["verdict"].upper()
    if overall["verdict"] == "fail":
        bad = overall["failed"] + overall["errors"]
        apart = len(overall["retain_fails_too"])
        first = ", ".join(overall["failing"][:FIRST_FAILURES]) + (", ..." if bad > FIRST_FAILURES else "")
        return (
            f"{head}: {bad} of {overall['judged']} checks fail"
            f"{f' ({apart} of them the retain model fails too)' if apart else ''}; {per_suite}; first: {first}"
        )
    if overall["verdict"] == "inconclusive":
        return f"{head}: {overall['inconclusive']} inconclusive, none failed; {per_suite}"
    return f"{head}: all {overall['judged']} judged checks pass; {per_suite}"


def shared_checks(report: dict, candidates: list[str]) -> list[str]:
    """The checks to rank on: of the candidates' own check sets (the checks
    each ran, any outcome but skip), the one that the most candidates ran in
    full; among those, the largest. A suite only a few candidates ran (the
    robustness subset) thus never decides the ranking of the others."""
    ran = {
        name: frozenset(k for k, v in _checks(report["checkpoints"][name]) if v["outcome"] != "skip")
        for name in candidates
    }
    best: tuple[int, int, list[str]] = (0, 0, [])
    for checks in set(ran.values()):
        covered = sum(checks <= other for other in ran.values())
        if checks and (covered, len(checks)) > best[:2]:
            best = (covered, len(checks), sorted(checks))
    return best[2]


def ranking(report: dict, verdicts: dict[str, dict] | None = None) -> dict:
    """{rule, shared_checks, rows: [{rank, checkpoint, verdict, ...}], unranked: [{checkpoint, reason}],
    anchors: [{checkpoint, role}]}."""
    verdicts = verdicts if verdicts is not None else checkpoint_verdicts(report)
    candidates = [n for n, v in verdicts.items() if not v["role"]]
    shared = shared_checks(report, candidates)
    key_set = set(shared)
    axes = _axes(report)
    decision = (report.get("run") or {}).get("decision") or {}
    alpha, rule = decision.get("alpha") or 0.05, decision.get("rule")
    steps_in = {name: len(steps) for steps in series_of(report).values() for _, name in steps}
    rows, unranked = [], []
    for name in candidates:
        checks = {k: v for k, v in _checks(report["checkpoints"][name]) if k in key_set and v["outcome"] != "skip"}
        if not shared or len(checks) < len(shared):
            unranked.append({"checkpoint": name, "reason": f"ran {len(checks)} of the {len(shared)} shared checks"})
            continue
        checks = _once_per_metric(checks)
        counts = _counts(list(checks.items()), set())
        margins = [m for m in (check_margin(v) for v in checks.values()) if m is not None]
        rows.append(
            {
                "checkpoint": name,
                "verdict": counts["verdict"],
                "passed": counts["passed"],
                "failed": counts["failed"] + counts["errors"],
                "inconclusive": counts["inconclusive"],
                "utility_failed": sum(
                    v["outcome"] in ("fail", "error") for k, v in checks.items() if axes.get(k) == "utility"
                ),
                "utility_checks": sum(axes.get(k) == "utility" for k in checks),
                "forget_passed": sum(v["outcome"] == "pass" for k, v in checks.items() if axes.get(k) == "forget"),
                "forget_failed": sum(
                    v["outcome"] in ("fail", "error") for k, v in checks.items() if axes.get(k) == "forget"
                ),
                "forget_checks": sum(axes.get(k) == "forget" for k in checks),
                "margin": sum(margins) / len(margins) if margins else None,
            }
        )
        row = rows[-1]
        looks = steps_in.get(name)
        if (
            looks
            and row["verdict"] == "pass"
            and rule != "point-estimate"
            and not passes_at(checks.values(), alpha / looks)
        ):
            row["verdict"] = "inconclusive"  # a selection among the series' steps: see the module doc
            row["selection"] = (
                f"passes at alpha {alpha:g} alone, not at alpha/{looks} for the {looks} steps of its training run"
            )
        row["collapsed"] = row["utility_failed"] * 2 > row["utility_checks"]
        row["utility"] = "collapsed" if row["collapsed"] else "cost" if row["utility_failed"] else "kept"
    rows.sort(key=_rank_key)
    rows, series = _one_row_per_series(report, rows)
    for rank, row in enumerate(rows, start=1):
        row["rank"] = rank
    return {
        "rule": RULE.format(n=len(shared)),
        "shared_checks": shared,
        "rows": rows,
        "unranked": unranked,
        "series": series,
        "anchors": [{"checkpoint": n, "role": v["role"]} for n, v in verdicts.items() if v["role"]],
    }


def passes_at(checks, level: float) -> bool:
    """Whether every judged check (not skipped) passes with its p-value of the
    bound at most `level`: its interval at that level lies on the good side."""
    judged = [v for v in checks if v.get("outcome") != "skip"]
    return bool(judged) and all(
        v.get("outcome") == "pass" and v.get("p_value") is not None and v["p_value"] <= level for v in judged
    )


def looks_level(alpha: float, look: int) -> float:
    """The level of the `look`-th evaluation of a run whose number of looks is
    not known in advance (training with `stop_when="pass"`): alpha / (k (k+1)),
    which sums to alpha over any number of looks."""
    return alpha / (look * (look + 1))


def _once_per_metric(checks: dict[str, dict]) -> dict[str, dict]:
    """One check per suite and metric: two checks that read the same items
    and metric (smoke's two bounds on one log-probability) are one piece of
    evidence, counted once, as its worst outcome."""
    severity = {"fail": 0, "error": 0, "inconclusive": 1, "pass": 2}
    kept: dict[tuple, tuple[str, dict]] = {}
    for key, verdict in checks.items():
        group = (key.split(".", 1)[0], verdict.get("metric") or key)
        if group not in kept or severity.get(verdict["outcome"], 0) < severity.get(kept[group][1]["outcome"], 0):
            kept[group] = (key, verdict)
    return dict(kept.values())


def _rank_key(row: dict) -> tuple:
    return (
        VERDICT_ORDER[row["verdict"]],
        row["collapsed"],
        row["forget_failed"] - row["forget_passed"],
        row["utility_failed"],
        -(row["margin"] if row["margin"] is not None else -2),
        row["checkpoint"],
    )


def series_of(report: dict) -> dict[str, list[tuple[int, str]]]:
    """{series: [(step, checkpoint name), ...] in step order} of the report's training-run steps."""
    found: dict[str, list[tuple[int, str]]] = {}
    for name, checkpoint in report["checkpoints"].items():
        info = checkpoint.get("info") or {}
        if info.get("series") is not None and info.get("step") is not None:
            found.setdefault(info["series"], []).append((int(info["step"]), name))
    return {s: sorted(steps) for s, steps in sorted(found.items())}


def _one_row_per_series(report: dict, rows: list[dict]) -> tuple[list[dict], dict[str, list[dict]]]:
    """`rows` (sorted by the rule) with each series' steps folded into the
    row of its best step (the first in rank order), which names the series and
    the step; and {series: every ranked step's row, in step order}."""
    step_of = {name: (series, step) for series, steps in series_of(report).items() for step, name in steps}
    folded: list[dict] = []
    series: dict[str, list[dict]] = {}
    for row in rows:
        if row["checkpoint"] not in step_of:
            folded.append(row)
            continue
        name, step = step_of[row["checkpoint"]]
        steps = series.setdefault(name, [])
        steps.append(row | {"step": step})
        if len(steps) == 1:  # the series' best step, its first row in rank order
            folded.append(row | {"series": name, "step": step})
    for name, steps in series.items():
        steps.sort(key=lambda r: r["step"])
        best = next(r for r in folded if r.get("series") == name)
        best["steps"] = len(steps)
        passing = [r["step"] for r in steps if r["verdict"] == "pass"]
        best["first_pass_step"] = passing[0] if passing else None
    return folded, series


def _axes(report: dict) -> dict[str, str]:
    """'suite.check' -> 'forget' | 'utility', as the thresholds YAML declares it."""
    axes = {}
    for checkpoint in report["checkpoints"].values():
        for key, v in _checks(checkpoint):
            if v.get("axis"):
                axes[key] = v["axis"]
    return axes


def display_order(report: dict, board: dict) -> list[str]:
    """One checkpoint order for every table: ranked candidates (a series'
    steps together, in step order, where its best step ranks), the unranked
    ones, then the anchors (retain before full)."""
    series = board.get("series") or {}
    order = [
        name
        for r in board["rows"]
        for name in ([s["checkpoint"] for s in series[r["series"]]] if r.get("series") else [r["checkpoint"]])
    ]
    order += [r["checkpoint"] for r in board["unranked"]]
    return order + [
        a["checkpoint"] for a in sorted(board["anchors"], key=lambda a: (a["role"] != "retain", a["checkpoint"]))
    ]


def assess(report: dict) -> dict:
    """The report's `assessment`: verdicts, ranking and the display order."""
    verdicts = checkpoint_verdicts(report)
    board = ranking(report, verdicts)
    return {
        "verdicts": verdicts,
        "ranking": board,
        "order": display_order(report, board),
        "retain_fails": sorted(retain_failures(report)),
    }
