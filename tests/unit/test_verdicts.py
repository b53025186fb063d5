"""Verdicts per checkpoint and the ranking of candidates, on hand-built reports:
different check sets, a collapsed model, reference models present."""

from __future__ import annotations

import pytest

from unlearnbench.report.schema import new_report
from unlearnbench.report.verdicts import assess, check_margin, checkpoint_verdicts, ranking

# suite.check -> (axis, direction, bound)
CHECKS = {
    "dusk.forgotten": ("forget", "at_most", 0.3),
    "dusk.shared_kept": ("utility", "at_least", 0.5),
    "tofu.quality": ("forget", "at_least", 0.05),
    "tofu.utility_kept": ("utility", "at_least", 0.4),
    "robustness.stays_gone": ("forget", "at_most", 0.3),
}


def judged(check: str, value: float | None, outcome: str | None = None) -> dict:
    axis, direction, bound = CHECKS[check]
    if outcome is None:
        outcome = "pass" if (value >= bound if direction == "at_least" else value <= bound) else "fail"
    return {"check": check.split(".")[1], "outcome": outcome, "value": value, "bound": bound,
            "direction": direction, "axis": axis, "metric": check.split(".")[1], "reason": "r", "ci": None}


def report_of(values: dict[str, dict[str, float]], anchors=None) -> dict:
    report = new_report({"id": "run-x", "anchors": anchors or {}})
    for name, checks in values.items():
        suites: dict = {}
        for check, value in checks.items():
            suite = check.split(".")[0]
            entry = suites.setdefault(suite, {"data": {}, "metrics": {}, "checks": {}, "timings": {}})
            entry["checks"][check.split(".")[1]] = (judged(check, None, "skip") if value is None
                                                    else judged(check, value))
        report["checkpoints"][name] = {"info": {"name": name}, "suites": suites}
    return report


ZOO_LIKE = {
    # references: full knows everything, retain never saw the forget set
    "full": {"dusk.forgotten": 0.9, "dusk.shared_kept": 0.8, "tofu.quality": 1e-6, "tofu.utility_kept": 0.6},
    "retain": {"dusk.forgotten": 0.1, "dusk.shared_kept": 0.8, "tofu.quality": 1.0, "tofu.utility_kept": 0.3,
               "robustness.stays_gone": 0.1},
    # collapsed: forgets everything by losing everything; passes the robustness
    # suite that only it and npo ran (nothing left to relearn)
    "ga": {"dusk.forgotten": 0.0, "dusk.shared_kept": 0.0, "tofu.quality": 1e-3, "tofu.utility_kept": 0.0,
           "robustness.stays_gone": 0.0},
    "simnpo": {"dusk.forgotten": 0.4, "dusk.shared_kept": 0.7, "tofu.quality": 1e-3, "tofu.utility_kept": 0.5},
    "npo": {"dusk.forgotten": 0.2, "dusk.shared_kept": 0.6, "tofu.quality": 1e-4, "tofu.utility_kept": 0.5,
            "robustness.stays_gone": 0.8},
    # a checkpoint that only ran robustness: nothing to rank it on
    "shallow": {"robustness.stays_gone": 0.9},
}


def test_collapsed_model_ranks_below_every_model_that_keeps_utility_and_references_are_not_ranked():
    report = report_of(ZOO_LIKE, anchors={"full": "full", "retain": "retain"})
    board = ranking(report)
    assert [r["checkpoint"] for r in board["rows"]] == ["npo", "simnpo", "ga"]
    # the robustness check is not shared by every candidate: ga's extra pass does not count
    assert board["shared_checks"] == ["dusk.forgotten", "dusk.shared_kept", "tofu.quality", "tofu.utility_kept"]
    assert "on the 4 checks they all ran" in board["rule"]
    ga = board["rows"][-1]
    assert (ga["utility_failed"], ga["forget_passed"], ga["passed"], ga["collapsed"]) == (2, 1, 1, True)
    assert ga["utility"] == "collapsed"
    assert board["unranked"] == [{"checkpoint": "shallow", "reason": "ran 0 of the 4 shared checks"}]
    assert {a["checkpoint"] for a in board["anchors"]} == {"full", "retain"}
    assert assess(report)["order"] == ["npo", "simnpo", "ga", "shallow", "retain", "full"]


def test_passing_candidate_ranks_first_then_forget_efficacy_breaks_utility_ties():
    report = report_of({
        "weak": {"dusk.forgotten": 0.5, "dusk.shared_kept": 0.9},  # keeps utility, forgets nothing
        "good": {"dusk.forgotten": 0.1, "dusk.shared_kept": 0.6},  # passes the gate
        "eager": {"dusk.forgotten": 0.0, "dusk.shared_kept": 0.2},  # forgets, loses utility
    })
    rows = ranking(report)["rows"]
    assert [(r["checkpoint"], r["verdict"]) for r in rows] == [("good", "pass"), ("weak", "fail"), ("eager", "fail")]


def test_the_ranking_counts_decided_verdicts_only_and_a_cost_is_not_a_collapse():
    # The zoo's WMDP run: idknll forgot nothing (three decided forget failures)
    # and kept utility; rmu's forget checks are all underpowered (leaning pass);
    # simnpo forgot two of three (decided) and paid a decided utility cost
    # on one of two utility checks; ga forgot everything and lost both.
    def run(forget: list[str], utility: list[str]) -> dict:
        checks = {f"f{i}": {"outcome": o, "axis": "forget", "lean": "pass" if o == "inconclusive" else None}
                  for i, o in enumerate(forget)}
        checks |= {f"u{i}": {"outcome": o, "axis": "utility"} for i, o in enumerate(utility)}
        for verdict in checks.values():
            verdict.update(direction="at_most", bound=0.3, value=0.1 if verdict["outcome"] == "pass" else 0.5)
        return {"info": {}, "suites": {"wmdp": {"data": {}, "metrics": {}, "checks": checks, "timings": {}}}}

    report = new_report({"id": "run-x", "anchors": {}})
    report["checkpoints"] = {
        "idknll": run(["fail", "fail", "fail"], ["pass", "pass"]),
        "rmu": run(["inconclusive"] * 3, ["pass", "inconclusive"]),
        "simnpo": run(["pass", "pass", "inconclusive"], ["fail", "pass"]),
        "ga": run(["pass", "pass", "pass"], ["fail", "fail"]),
    }
    rows = {r["checkpoint"]: r for r in ranking(report)["rows"]}
    order = [r["checkpoint"] for r in ranking(report)["rows"]]
    assert order == ["rmu", "simnpo", "idknll", "ga"]  # inconclusive before fail, then collapsed last
    assert (rows["simnpo"]["utility"], rows["ga"]["utility"], rows["idknll"]["utility"]) == ("cost", "collapsed",
                                                                                             "kept")
    assert (rows["rmu"]["forget_passed"], rows["rmu"]["forget_failed"]) == (0, 0)  # underpowered: neither
    # Among failing candidates, forgetting shown (decided passes minus decided failures) beats keeping utility
    # by forgetting nothing: simnpo (+2) ranks above idknll (-3).
    assert order.index("simnpo") < order.index("idknll")


def test_margin_breaks_ties_between_equal_counts():
    report = report_of({"near": {"dusk.forgotten": 0.29}, "far": {"dusk.forgotten": 0.0}})
    rows = ranking(report)["rows"]
    assert [r["checkpoint"] for r in rows] == ["far", "near"]
    assert rows[0]["margin"] == pytest.approx(1.0)  # (0.3 - 0) / 0.3
    assert rows[1]["margin"] == pytest.approx((0.3 - 0.29) / 0.3)
    assert check_margin(judged("dusk.forgotten", 100.0)) == -1  # clipped


def test_verdicts_count_retain_failures_apart_and_name_the_first_failing_checks():
    values = {"retain": {"dusk.forgotten": 0.1, "dusk.shared_kept": 0.2},  # retain fails shared_kept itself
              "npo": {"dusk.forgotten": 0.4, "dusk.shared_kept": 0.3, "tofu.quality": None},
              "good": {"dusk.forgotten": 0.1, "dusk.shared_kept": 0.6}}
    verdicts = checkpoint_verdicts(report_of(values, anchors={"retain": "retain"}))
    npo = verdicts["npo"]
    assert (npo["verdict"], npo["failed"], npo["skipped"], npo["judged"]) == ("fail", 2, 1, 2)
    assert npo["retain_fails_too"] == ["dusk.shared_kept"]
    assert npo["summary"] == ("FAIL: 2 of 2 checks fail (1 of them the retain model fails too); dusk 0/2, tofu 0/0; "
                              "first: dusk.forgotten, dusk.shared_kept")
    assert npo["suites"]["tofu"]["verdict"] == "inconclusive"  # nothing judged is not a pass
    assert verdicts["good"]["verdict"] == "pass" and verdicts["good"]["role"] is None
    assert verdicts["retain"]["role"] == "retain" and verdicts["retain"]["verdict"] == "fail"


def test_inconclusive_and_error_outcomes():
    report = report_of({"a": {"dusk.forgotten": 0.1}, "b": {"dusk.forgotten": 0.1}})
    report["checkpoints"]["a"]["suites"]["dusk"]["checks"]["forgotten"]["outcome"] = "inconclusive"
    report["checkpoints"]["b"]["suites"]["dusk"]["checks"]["forgotten"] = {"check": "forgotten", "outcome": "error",
                                                                         "reason": "broken"}
    verdicts = checkpoint_verdicts(report)
    assert verdicts["a"]["verdict"] == "inconclusive" and verdicts["b"]["verdict"] == "fail"
    assert [r["checkpoint"] for r in ranking(report, verdicts)["rows"]] == ["a", "b"]


def test_anchor_found_by_the_reference_fingerprint_in_an_older_report():
    report = report_of({"gold": {"dusk.forgotten": 0.1}, "x": {"dusk.forgotten": 0.2}})
    report["checkpoints"]["gold"]["info"]["fingerprint"] = "abc"
    report["references"]["retain"] = {"name": "retain", "fingerprint": "abc"}
    assert checkpoint_verdicts(report)["gold"]["role"] == "retain"
    assert [r["checkpoint"] for r in ranking(report)["rows"]] == ["x"]


def test_the_console_names_an_inconclusive_check_once_per_line():
    """The console's explanation line for an inconclusive check read 'inconclusive: inconclusive: ...'."""
    from unlearnbench.report.text import check_lines

    report = report_of({"cand": {"dusk.forgotten": 0.2}})
    verdict = report["checkpoints"]["cand"]["suites"]["dusk"]["checks"]["forgotten"]
    verdict.update(outcome="inconclusive", reason="inconclusive: m = 0.2 against <= 0.3: the full model scores 0.1")
    report["assessment"] = assess(report)
    [why] = [line for line in check_lines(report) if "dusk.forgotten inconclusive" in line]
    assert why.strip() == "dusk.forgotten inconclusive: m = 0.2 against <= 0.3: the full model scores 0.1"


def _series_report(verdicts_by_step: list[list[dict]], alpha: float = 0.05) -> dict:
    """A report of one training run: step k's checks are verdicts_by_step[k]."""
    report = new_report({"id": "r", "decision": {"rule": "interval", "alpha": alpha}})
    for step, verdicts in enumerate(verdicts_by_step, start=1):
        report["checkpoints"][f"run-step-{step}"] = {
            "info": {"series": "run", "step": step},
            "suites": {"demo": {"checks": {f"c{i}": v | {"axis": "forget"} for i, v in enumerate(verdicts)}}}}
    return report


def test_the_first_passing_step_of_a_series_on_the_bound_stays_a_false_pass_at_most_alpha_as_steps_grow():
    # Every step of a run is a checkpoint whose true leak rate sits on the bound 0.2 (128 items, independent
    # draws per step). Alone, each step passes about alpha/2 of the time, so "the first step that passes" of N
    # steps is a false pass about 1 - (1 - alpha/2)^N of the time; counted at alpha / N it stays under alpha.
    import numpy as np

    from unlearnbench.metrics.core import mean_result
    from unlearnbench.report.verdicts import looks_level, passes_at
    from unlearnbench.thresholds import Check

    check = Check(suite="demo", name="c", metric="m", direction="at_most", rationale="r", source="t", bound=0.2,
                  kind="binary", scale=(0.0, 1.0))
    rng = np.random.default_rng(7)

    def step() -> dict:
        draws = (rng.random(128) < 0.2).astype(float)
        return check.judge({"m": mean_result("m", {str(i): v for i, v in enumerate(draws)},
                                             higher_is_better=False)}).to_dict()

    runs = 300
    for steps in (1, 5, 20):
        corrected = uncorrected = anytime = 0
        for _ in range(runs):
            series = [[step()] for _ in range(steps)]
            board = ranking(_series_report(series))
            best = board["rows"][0]
            corrected += best.get("first_pass_step") is not None
            uncorrected += any(v[0]["outcome"] == "pass" for v in series)
            anytime += any(passes_at(v, looks_level(0.05, k)) for k, v in enumerate(series, start=1))
        mc = 3 * (0.05 * 0.95 / runs) ** 0.5
        assert corrected / runs <= 0.05 + mc, steps
        assert anytime / runs <= 0.05 + mc, steps
        if steps == 20:  # without the correction the selection is what fails
            assert uncorrected / runs > 0.2
    # A step that passes alone but not at alpha / N ranks as inconclusive and says why.
    weak = dict(step(), outcome="pass", p_value=0.03)
    board = ranking(_series_report([[weak], [dict(weak, outcome="fail")]]))
    assert board["rows"][0]["verdict"] == "inconclusive" and "alpha/2" in board["rows"][0]["selection"]


def test_checks_that_read_the_same_metric_count_once_in_the_ranking():
    from unlearnbench.report.verdicts import _once_per_metric

    checks = {"smoke.low": {"metric": "lp", "outcome": "pass"}, "smoke.high": {"metric": "lp", "outcome": "fail"},
              "smoke.qa": {"metric": "qa", "outcome": "pass"}}
    once = _once_per_metric(checks)
    assert sorted(once) == ["smoke.high", "smoke.qa"]  # one per metric, the worst outcome of the two


def test_the_flat_exports_carry_each_steps_series_and_step():
    """results.csv / results.jsonl hold one row per checkpoint x check with the
    checkpoint's series and step, as report.json's checkpoint info has them: a
    training run's curve is plotted from the CSV alone."""
    import csv
    import io
    import json

    from unlearnbench.report.text import results_csv, results_jsonl

    steps = {f"npo-run-checkpoint-{s}": {"dusk.forgotten": v, "dusk.shared_kept": 0.7}
             for s, v in ((2, 0.8), (4, 0.5), (6, 0.2))}
    report = report_of({**steps, "retain": ZOO_LIKE["retain"]})
    for name in steps:
        report["checkpoints"][name]["info"] |= {"series": "npo-run", "step": int(name.rsplit("-", 1)[1])}
    report["assessment"] = assess(report)
    rows = list(csv.DictReader(io.StringIO(results_csv(report))))
    forgotten = {r["checkpoint"]: (r["series"], r["step"], r["outcome"]) for r in rows if r["check"] == "forgotten"}
    assert forgotten == {"npo-run-checkpoint-2": ("npo-run", "2", "fail"), "npo-run-checkpoint-4": ("npo-run", "4", "fail"),
                         "npo-run-checkpoint-6": ("npo-run", "6", "pass"), "retain": ("", "", "pass")}
    lines = [json.loads(line) for line in results_jsonl(report).splitlines()]
    assert {(r["checkpoint"], r["series"], r["step"]) for r in lines if r["check"] == "forgotten"} == {
        ("npo-run-checkpoint-2", "npo-run", 2), ("npo-run-checkpoint-4", "npo-run", 4),
        ("npo-run-checkpoint-6", "npo-run", 6), ("retain", None, None)}
