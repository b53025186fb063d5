"""The leaderboard's pieces (issue 46) on small hand-made reports: the Pareto
front worked out by hand, each suite's headline metrics, and a gate that
differs between two runs opening a group of its own that says what differs."""

from __future__ import annotations

import json

import pytest

from unlearnbench.report import leaderboard
from unlearnbench.suites import SUITES


def test_the_pareto_front_by_hand():
    points = {"a": (1.0, 1.0), "b": (2.0, 0.0), "c": (0.0, 2.0), "d": (0.5, 0.5), "e": (1.0, 1.0),
              "f": (2.0, -1.0)}
    # d is beaten by a on both; f by b on one and matched on the other; a and e tie (neither is better)
    assert sorted(leaderboard.pareto(points)) == ["a", "b", "c", "e"]
    assert leaderboard.pareto({}) == []


@pytest.mark.parametrize("suite", sorted(s for s in SUITES if SUITES[s].headline))
def test_a_declared_headline_is_a_metric_of_its_suite_on_its_axis(suite):
    spec = SUITES[suite]
    for axis, metric in spec.headline:
        assert axis in leaderboard.AXES and metric in spec.metric_names, (suite, axis, metric)
        assert (metric in spec.utility_metrics) == (axis == "utility") or not spec.utility_metrics, (suite, metric)


def verdict(check: str, metric: str, value: float, *, margin: float, outcome: str = "pass") -> dict:
    return {"check": check, "metric": metric, "value": value, "ci": [value - 0.1, value + 0.1], "bound": 0.5,
            "direction": "at_least", "axis": "forget", "relative_to": None, "margin": margin, "outcome": outcome,
            "rule": "interval", "alpha": 0.05, "correction": "none", "strict_ci": False}


def report(run_id: str, started: str, values: dict[str, float], *, margin: float,
           checks: tuple[str, ...] = ("erased",)) -> dict:
    return {
        "schema": "unlearnbench.report", "schema_version": 3,
        "run": {"id": run_id, "started_at": started, "anchors": {}},
        "references": {"full": None, "retain": None},
        "checkpoints": {name: {"info": {"name": name, "fingerprint": f"fp-{name}"}, "suites": {"uds": {
            "data": {"fingerprint": "data-1", "source": "items.json", "suite_version": 3},
            "metrics": {"uds": {"value": value, "n": 10, "ci": [value - 0.1, value + 0.1], "higher_is_better": True}},
            "checks": {check: verdict(check, "uds", value, margin=margin, outcome="pass" if value >= 0.5 else "fail")
                       for check in checks}}}}
            for name, value in values.items()},
        "summary": {"passed": 0, "failed": 0, "skipped": 0, "inconclusive": 0, "errors": 0},
    }


def test_a_changed_gate_opens_a_group_that_says_what_differs(tmp_path):
    runs = {"one": report("r1", "2026-01-01T00:00:00", {"ga": 0.9, "npo": 0.2, "rmu": 0.7}, margin=0.05),
            "two": report("r2", "2026-01-02T00:00:00", {"ga": 0.8, "simnpo": 0.6}, margin=0.1)}
    for name, body in runs.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "report.json").write_text(json.dumps(body))
    read, notes = leaderboard.read_runs(leaderboard.find_reports([tmp_path]))
    assert notes == [] and [r.id for r in read] == ["r1", "r2"]
    board = leaderboard.build(read)
    main, other = board["groups"]
    # the setting with more checkpoints is the main comparison; the other gate's results are ranked apart
    assert [r["checkpoint"] for r in main["rows"]] == ["ga", "rmu", "npo"]
    assert [r["rank"] for r in main["rows"]] == [1, 2, 3]
    assert [r["checkpoint"] for r in other["rows"]] == ["ga", "simnpo"]
    assert other["title"].startswith("uds under another setting")
    assert other["differs"] == {"uds": ["check erased: margin 0.05 vs 0.1"]}
    # the same checkpoint (ga) keeps each run's own value in its group
    assert main["rows"][0]["suites"]["uds"]["forget"]["value"] == 0.9
    assert other["rows"][0]["suites"]["uds"]["forget"]["value"] == 0.8
    assert main["rows"][0]["runs"] == ["r1"] and other["rows"][0]["runs"] == ["r2"]


def test_a_run_that_left_a_check_out_is_the_same_setting(tmp_path):
    """Settings are compared on the checks both ran: a run of one check (pytest -k) joins the run of two."""
    runs = {"both": report("r1", "2026-01-01T00:00:00", {"ga": 0.9, "npo": 0.2}, margin=0.05,
                           checks=("erased", "erased_deep")),
            "one": report("r2", "2026-01-02T00:00:00", {"rmu": 0.7}, margin=0.05, checks=("erased",)),
            "other": report("r3", "2026-01-03T00:00:00", {"simnpo": 0.6}, margin=0.2, checks=("erased_deep",))}
    for name, body in runs.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "report.json").write_text(json.dumps(body))
    board = leaderboard.build(leaderboard.read_runs(leaderboard.find_reports([tmp_path]))[0])
    assert [sorted(r["checkpoint"] for r in g["rows"]) for g in board["groups"]] == [["ga", "npo", "rmu"], ["simnpo"]]
    assert board["groups"][1]["differs"] == {"uds": ["check erased_deep: margin 0.05 vs 0.2"]}
    # the report's rule: ranked on the checks every candidate ran (rmu ran one of the two)
    main = board["groups"][0]
    assert main["shared_checks"] == ["uds.erased"]
    assert [(r["checkpoint"], r["rank"]) for r in main["rows"]] == [("ga", 1), ("rmu", 2), ("npo", 3)]
