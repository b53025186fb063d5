"""Threshold files: schema validation, overrides and verdicts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from unlearnbench.errors import ThresholdsError
from unlearnbench.rule import DecisionRule
from unlearnbench.metrics.core import MetricResult
from unlearnbench.thresholds import apply_overrides, load_suite_thresholds

METRICS = ("score", "leak")
GOOD = """
suite: demo
checks:
  score_high:
    metric: score
    direction: at_least
    bound: 0.5
    rationale: scores should be high
  leak_like_retain:
    metric: leak
    direction: at_most
    relative_to: retain
    margin: 0.05
    rationale: leak no worse than retain
"""


def write(tmp_path: Path, text: str, name: str = "demo.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# Bound arithmetic is tested on values alone: a value with no interval is not decided by the interval rule.
POINT = DecisionRule(point_estimate=True)


def result(name: str, value: float, ci=(None, None)) -> MetricResult:
    low, high = ci
    return MetricResult(name, value, 10, (value if low is None else low, value if high is None else high), True)


def test_repository_default_gates_are_valid():
    from unlearnbench.suites import SUITES

    root = Path(__file__).resolve().parents[2] / "thresholds"
    for suite, spec in SUITES.items():
        assert load_suite_thresholds(root / f"{suite}.yaml", suite, spec.known_metrics)


def test_good_file_loads(tmp_path):
    gate = load_suite_thresholds(write(tmp_path, GOOD), "demo", METRICS)
    assert gate["score_high"].bound == 0.5 and gate["score_high"].relative_to is None
    assert gate["leak_like_retain"].relative_to == "retain" and gate["leak_like_retain"].margin == 0.05


@pytest.mark.parametrize(
    "edit, message",
    [
        (("    bound: 0.5\n", "    bound: 0.5\n    bonud: 1\n"), "check 'score_high': unknown key(s) bonud"),
        (("bound: 0.5", "bound: high"), "check 'score_high': 'bound' must be a finite number, not 'high'"),
        (("bound: 0.5", "bound: true"), "check 'score_high': 'bound' must be a finite number, not True"),
        (("direction: at_least", "direction: up"), "check 'score_high': 'direction' must be one of at_least, at_most"),
        (("metric: score", "metric: scroe"), "check 'score_high': suite 'demo' has no metric 'scroe'"),
        (("    rationale: scores should be high\n", ""), "check 'score_high': missing 'rationale'"),
        (("margin: 0.05", "margin: -1"), "check 'leak_like_retain': 'margin' must be >= 0"),
        (("relative_to: retain", "relative_to: oracle"), "'relative_to' must be one of full, retain"),
        (("    bound: 0.5\n", "    bound: 0.5\n    relative_to: full\n"), "give exactly one of 'bound'"),
        (("suite: demo", "suite: other"), "'suite' must be 'demo', not 'other'"),
        (("checks:", "checks: []\nextra:"), "unknown top-level key(s) extra"),
    ],
)
def test_malformed_file_names_file_check_and_problem(tmp_path, edit, message):
    path = write(tmp_path, GOOD.replace(*edit))
    with pytest.raises(ThresholdsError) as info:
        load_suite_thresholds(path, "demo", METRICS)
    assert str(info.value).startswith(f"thresholds {path}")
    assert message in str(info.value)


def test_invalid_yaml_and_missing_file(tmp_path):
    with pytest.raises(ThresholdsError, match="not valid YAML"):
        load_suite_thresholds(write(tmp_path, "suite: [unclosed"), "demo", METRICS)
    with pytest.raises(ThresholdsError, match="file not found"):
        load_suite_thresholds(tmp_path / "absent.yaml", "demo", METRICS)


def test_absolute_verdicts(tmp_path):
    gate = load_suite_thresholds(write(tmp_path, GOOD), "demo", METRICS)
    check = gate["score_high"]
    assert check.judge({"score": result("score", 0.5)}, rule=POINT).outcome == "pass"  # bound inclusive
    failed = check.judge({"score": result("score", 0.49)}, rule=POINT)
    assert failed.outcome == "fail" and "not >= 0.5" in failed.reason


def test_relative_verdict_uses_reference_plus_margin(tmp_path):
    check = load_suite_thresholds(write(tmp_path, GOOD), "demo", METRICS)["leak_like_retain"]
    reference = {"leak": result("leak", 0.10)}
    ok = check.judge({"leak": result("leak", 0.149)}, reference, rule=POINT)
    assert ok.outcome == "pass" and ok.bound == pytest.approx(0.15) and ok.reference_value == 0.10
    bad = check.judge({"leak": result("leak", 0.151)}, reference, rule=POINT)
    assert bad.outcome == "fail" and "(retain 0.1 + 0.05)" in bad.reason


def test_relative_check_without_reference_is_skipped_not_passed(tmp_path):
    check = load_suite_thresholds(write(tmp_path, GOOD), "demo", METRICS)["leak_like_retain"]
    verdict = check.judge({"leak": result("leak", 0.0)}, None)
    assert verdict.outcome == "skip" and "--retain-model" in verdict.reason


def test_three_outcomes_by_the_interval_and_the_old_rule_by_the_point_estimate(tmp_path):
    check = load_suite_thresholds(write(tmp_path, GOOD), "demo", METRICS)["score_high"]  # score >= 0.5
    straddling = {"score": result("score", 0.6, ci=(0.45, 0.75))}
    verdict = check.judge(straddling)
    assert verdict.outcome == "inconclusive" and verdict.lean == "pass" and verdict.decided_by is None
    assert "underpowered, leans pass" in verdict.reason and verdict.n_needed > 10
    point = check.judge(straddling, rule=DecisionRule(point_estimate=True))
    assert point.outcome == "pass" and point.decided_by == "point-estimate" and point.rule == "point-estimate"
    strict = check.judge(straddling, rule=DecisionRule(strict=True))
    assert strict.outcome == "fail" and "--strict-ci" in strict.reason
    decided = check.judge({"score": result("score", 0.6, ci=(0.55, 0.65))})
    assert decided.outcome == "pass" and decided.decided_by == "interval"
    below = check.judge({"score": result("score", 0.4, ci=(0.35, 0.45))})
    assert below.outcome == "fail" and below.decided_by == "interval"
    # A value with no interval of its own is not decided: no decision without an interval.
    bare = check.judge({"score": result("score", 0.6)})
    assert bare.outcome == "inconclusive" and bare.decided_by is None and "no interval" in bare.reason
    assert bare.lean == "pass"


def test_overrides_replace_bound_kind_and_validate(tmp_path):
    gates = {"demo": load_suite_thresholds(write(tmp_path, GOOD), "demo", METRICS)}
    override = write(tmp_path, "demo:\n  leak_like_retain: {bound: 0.01}\n  score_high: {bound: 0.9}\n", "o.yaml")
    apply_overrides(override, gates, {"demo": METRICS})
    assert gates["demo"]["leak_like_retain"].bound == 0.01 and gates["demo"]["leak_like_retain"].relative_to is None
    assert gates["demo"]["score_high"].bound == 0.9 and gates["demo"]["score_high"].source == str(override)


@pytest.mark.parametrize(
    "text, message",
    [
        ("demo:\n  nope: {bound: 1}\n", "check 'nope': suite 'demo' has no check of this name"),
        ("other:\n  x: {bound: 1}\n", "unknown suite 'other'"),
        ("demo:\n  score_high: {bound: '1'}\n", "check 'score_high': 'bound' must be a finite number"),
        ("demo:\n  score_high: {colour: red}\n", "check 'score_high': unknown key(s) colour"),
    ],
)
def test_bad_overrides(tmp_path, text, message):
    gates = {"demo": load_suite_thresholds(write(tmp_path, GOOD), "demo", METRICS)}
    with pytest.raises(ThresholdsError, match=re.escape(message)):
        apply_overrides(write(tmp_path, text, "o.yaml"), gates, {"demo": METRICS})


def test_every_built_in_check_declares_its_axis_and_a_bad_axis_is_refused(tmp_path):
    from unlearnbench.errors import ThresholdsError
    from unlearnbench.suites import SUITES
    from unlearnbench.thresholds import load_suite_thresholds

    root = Path(__file__).resolve().parents[2] / "thresholds"
    for suite, spec in SUITES.items():
        checks = load_suite_thresholds(root / f"{suite}.yaml", suite, spec.known_metrics, spec.scale_of)
        assert {c.name: c.axis for c in checks.values() if c.axis not in ("forget", "utility")} == {}, suite
    bad = tmp_path / "smoke.yaml"
    bad.write_text("suite: smoke\nchecks:\n  c:\n    metric: qa_rougeL_recall\n    direction: at_least\n"
                   "    bound: 0.5\n    rationale: r\n    axis: both\n")
    with pytest.raises(ThresholdsError, match="'axis' must be one of forget, utility, not 'both'"):
        load_suite_thresholds(bad, "smoke", SUITES["smoke"].metric_names)


OR_BOUND = """
suite: demo
checks:
  leak_low:
    metric: leak
    direction: at_most
    relative_to: retain
    margin: 0.02
    or_bound: 0.30
    requires: {full_at_least: 0.35}
    rationale: no better than chance + 0.05 or the retain model + 0.02
  score_reported:
    metric: score
    direction: at_least
    relative_to: full
    margin: 0.05
    enabled: false
    rationale: reported until enabled
"""


def test_or_bound_passes_under_the_looser_bound_and_stands_alone_without_the_reference(tmp_path):
    check = load_suite_thresholds(write(tmp_path, OR_BOUND), "demo", METRICS)["leak_low"]
    # retain 0.10 + 0.02 = 0.12 is tighter than 0.30: 0.25 passes under the absolute bound.
    verdict = check.judge({"leak": result("leak", 0.25)}, {"leak": result("leak", 0.10)}, rule=POINT)
    assert verdict.outcome == "pass" and verdict.bound == 0.30 and verdict.relative_to is None
    assert "the check's absolute bound, looser than 0.12 (retain 0.1 + 0.02)" in verdict.reason
    # retain 0.40 + 0.02 = 0.42 is looser: 0.41 passes relative to retain, 0.43 fails.
    high = {"leak": result("leak", 0.40)}
    assert check.judge({"leak": result("leak", 0.41)}, high, rule=POINT).outcome == "pass"
    failed = check.judge({"leak": result("leak", 0.43)}, high, rule=POINT)
    assert failed.outcome == "fail" and failed.bound == pytest.approx(0.42) and failed.relative_to == "retain"
    # No retain model: the absolute bound alone (not skipped).
    alone = check.judge({"leak": result("leak", 0.31)}, None, rule=POINT)
    assert alone.outcome == "fail" and alone.bound == 0.30 and "no --retain-model" in alone.reason


def test_full_at_least_makes_a_check_inconclusive_when_the_full_model_holds_nothing_to_forget(tmp_path):
    check = load_suite_thresholds(write(tmp_path, OR_BOUND), "demo", METRICS)["leak_low"]
    assert check.reference_roles == ("retain", "full")
    near_chance = {"full": {"leak": result("leak", 0.27)}}
    verdict = check.judge({"leak": result("leak", 0.2)}, {"leak": result("leak", 0.2)}, others=near_chance)
    assert verdict.outcome == "inconclusive"
    assert "the full model scores 0.27 on leak, under the 0.35 this check requires" in verdict.reason
    knows = {"full": {"leak": result("leak", 0.9)}}
    assert check.judge({"leak": result("leak", 0.2)}, {"leak": result("leak", 0.2)}, others=knows, rule=POINT).outcome == "pass"


def test_a_disabled_check_is_reported_not_gated_until_an_override_enables_it(tmp_path):
    gates = {"demo": load_suite_thresholds(write(tmp_path, OR_BOUND), "demo", METRICS)}
    check = gates["demo"]["score_reported"]
    off = check.judge({"score": result("score", 0.1)}, {"score": result("score", 0.9)})
    assert off.outcome == "skip" and off.value == 0.1 and off.margin == 0.05 and off.relative_to == "full"
    assert "demo: {score_reported: {enabled: true}}" in off.reason
    apply_overrides(write(tmp_path, "demo:\n  score_reported: {enabled: true}\n", "o.yaml"), gates, {"demo": METRICS})
    enabled = gates["demo"]["score_reported"]
    assert enabled.relative_to == "full" and enabled.margin == 0.05
    assert enabled.judge({"score": result("score", 0.1)}, {"score": result("score", 0.9)}, rule=POINT).outcome == "fail"
    # A kept or_bound survives an override of the margin; a bound override replaces it.
    apply_overrides(write(tmp_path, "demo:\n  leak_low: {margin: 0.05}\n", "p.yaml"), gates, {"demo": METRICS})
    assert gates["demo"]["leak_low"].or_bound == 0.30 and gates["demo"]["leak_low"].margin == 0.05
    apply_overrides(write(tmp_path, "demo:\n  leak_low: {bound: 0.2}\n", "q.yaml"), gates, {"demo": METRICS})
    assert gates["demo"]["leak_low"].or_bound is None and gates["demo"]["leak_low"].bound == 0.2


@pytest.mark.parametrize("edit, message", [
    (("    relative_to: retain\n    margin: 0.02\n", "    bound: 0.1\n"), "'or_bound' only applies with 'relative_to'"),
    (("enabled: false", "enabled: 'no'"), "'enabled' must be true or false"),
    (("full_at_least: 0.35", "full_at_least: high"), "'requires.full_at_least' must be a finite number"),
])
def test_bad_or_bound_enabled_and_full_at_least_are_refused(tmp_path, edit, message):
    with pytest.raises(ThresholdsError, match=re.escape(message)):
        load_suite_thresholds(write(tmp_path, OR_BOUND.replace(*edit)), "demo", METRICS)


def test_a_skipped_relative_check_keeps_the_form_of_its_bound(tmp_path):
    """The report's matrix labels a check by its verdict: a skipped relative check without its margin read
    '>= full - 0'."""
    from unlearnbench.metrics.core import Unavailable

    check = load_suite_thresholds(write(tmp_path, GOOD), "demo", METRICS)["leak_like_retain"]
    verdict = check.judge({"leak": Unavailable("leak", "no such subset")}, {"leak": result("leak", 0.1)})
    assert verdict.outcome == "skip" and verdict.relative_to == "retain" and verdict.margin == 0.05


def test_the_decision_is_a_code_and_numbers_and_its_words_come_after(tmp_path):
    """Decide, then explain: `decide` returns the outcome, a code and the
    numbers (no prose); `judge` adds the reason `explain` words from them; the
    report's record holds outcome and code as plain strings."""
    import json

    from unlearnbench.thresholds import Code, Decision, Outcome, explain

    gate = load_suite_thresholds(write(tmp_path, GOOD), "demo", METRICS)
    score, leak = gate["score_high"], gate["leak_like_retain"]
    cases = [
        (score, {"score": result("score", 0.6, ci=(0.55, 0.65))}, None, DecisionRule(), Outcome.PASS, Code.DECIDED),
        (score, {"score": result("score", 0.4, ci=(0.35, 0.45))}, None, DecisionRule(), Outcome.FAIL, Code.DECIDED),
        (score, {"score": result("score", 0.6, ci=(0.45, 0.75))}, None, DecisionRule(), Outcome.INCONCLUSIVE,
         Code.UNDERPOWERED),
        (score, {"score": result("score", 0.6, ci=(0.45, 0.75))}, None, DecisionRule(strict=True), Outcome.FAIL,
         Code.UNDERPOWERED),
        (score, {"score": result("score", 0.6)}, None, DecisionRule(), Outcome.INCONCLUSIVE, Code.NO_INTERVAL),
        (score, {"score": result("score", 0.4)}, None, POINT, Outcome.FAIL, Code.POINT_ESTIMATE),
        (score, {"score": result("score", float("nan"))}, None, POINT, Outcome.FAIL, Code.NOT_FINITE),
        (leak, {"leak": result("leak", 0.1)}, None, POINT, Outcome.SKIP, Code.NEEDS_REFERENCE),
        (leak, {"leak": result("leak", 0.1)}, {"leak": result("leak", float("inf"))}, POINT, Outcome.FAIL,
         Code.REFERENCE_NOT_FINITE),
    ]
    for check, metrics, reference, rule, outcome, code in cases:
        decision = check.decide(metrics, reference, rule=rule)
        assert isinstance(decision, Decision) and (decision.outcome, decision.code) == (outcome, code), code
        assert not any(isinstance(v, str) and " " in v for v in decision.fields.values() if v is not None
                       and v not in (check.rationale,)), decision.fields  # numbers and names, no sentences
        verdict = check.judge(metrics, reference, rule=rule)
        assert (verdict.outcome, verdict.code, verdict.reason) == (outcome, code, explain(check, decision))
        record = json.loads(json.dumps(verdict.to_dict()))
        assert (record["outcome"], record["code"]) == (outcome.value, code.value)
        assert type(verdict.to_dict()["outcome"]) is str and type(verdict.to_dict()["code"]) is str
    assert Outcome.PASS == "pass" and f"{Outcome.INCONCLUSIVE}" == "inconclusive"
