"""The report as typed values (report/model.py): every reader gets it
upgraded from older schema versions in one place and checked part by part,
and `to_dict()` gives back the document field for field."""

from __future__ import annotations

import copy
import json

import pytest

from unlearnbench.outcome import Code, Outcome
from unlearnbench.report.model import Report, upgrade
from unlearnbench.report.schema import add_record, load_report, new_report


def document() -> dict:
    """A report as a run writes it: two verdicts and an error, a metric with an unnamed field."""
    report = new_report({"id": "run-1", "decision": {"rule": "interval", "alpha": 0.05, "strict_ci": False,
                                                     "text": "interval (alpha 0.05)"}, "anchors": {"full": "full"}})
    metric = {"name": "m", "value": 0.25, "n": 4, "ci": [0.1, 0.4], "higher_is_better": False, "params": {},
              "per_item": {"a": 0.0, "b": 1.0}, "interval": "wilson", "kind": "share"}
    for name, outcome, code in (("cand", "pass", "decided"), ("full", "skip", "reference-itself")):
        add_record(report, {"checkpoint": {"name": name, "fingerprint": f"fp-{name}"}, "suite": "s",
                            "data": {"fingerprint": "data"}, "metrics": {"m": metric},
                            "verdict": {"check": "c", "outcome": outcome, "code": code, "metric": "m", "value": 0.25,
                                        "bound": 0.5, "direction": "at_most", "p_value": 0.01, "lean": None}})
    add_record(report, {"checkpoint": {"name": "broken"}, "suite": "s", "check": "c", "error": "CheckpointError: x"})
    return report


def test_a_report_reads_back_field_for_field_with_typed_parts():
    raw = document()
    report = Report.of(copy.deepcopy(raw))
    assert report.to_dict() == raw
    check = report.checkpoints["cand"].suites["s"].checks["c"]
    assert (check.outcome, check.code, check.value, check.worker) == (Outcome.PASS, Code.DECIDED, 0.25, None)
    assert report.checkpoints["broken"].suites["s"].checks["c"].outcome is Outcome.ERROR
    assert report.checkpoints["cand"].suites["s"].metrics["m"].model_extra == {"interval": "wilson", "kind": "share"}
    assert [(name, check.outcome) for name, _, check in report.checks()] == [
        ("cand", Outcome.PASS), ("full", Outcome.SKIP), ("broken", Outcome.ERROR)]
    assert report.summary.passed == 1 and report.summary.errors == 1 and report.run.anchors == {"full": "full"}


@pytest.mark.parametrize("change, where", [
    (lambda r: r["checkpoints"]["cand"]["suites"]["s"]["checks"]["c"].update(outcome="passed"),
     "checkpoints.cand.suites.s.checks.c.outcome"),
    (lambda r: r["checkpoints"]["cand"]["suites"]["s"]["checks"]["c"].update(code="fine"),
     "checkpoints.cand.suites.s.checks.c.code"),
    (lambda r: r["checkpoints"]["cand"]["suites"]["s"]["metrics"]["m"].update(value="high"),
     "checkpoints.cand.suites.s.metrics.m.value"),
    (lambda r: r["summary"].update(passed="one"), "summary.passed"),
])
def test_a_malformed_part_is_one_message_naming_the_file_and_the_field(tmp_path, change, where):
    raw = document()
    change(raw)
    path = tmp_path / "report.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(ValueError, match=rf"^{path}: {where}: ") as raised:
        load_report(path)
    assert "\n" not in str(raised.value)


def test_older_schemas_are_upgraded_in_one_place():
    version_2 = document()
    version_2["schema_version"] = 2
    version_2["run"].pop("decision")
    version_2["run"]["strict_ci"] = True
    upgraded = upgrade(version_2)
    assert upgraded["schema_version"] == 3 and upgraded["upgraded_from"] == 2
    assert upgraded["run"]["decision"] == {"strict_ci": True, "text": "strict CI"} and "strict_ci" not in upgraded["run"]
    assert version_2["run"]["strict_ci"] is True  # the caller's document is left as it was
    version_1 = copy.deepcopy(version_2) | {"schema_version": 1, "leaderboard": {"rows": []}}
    version_1["run"].pop("anchors")
    read = Report.of(version_1)
    assert read.run.decision.text == "strict CI" and read.run.anchors == {} and "leaderboard" not in read.to_dict()
    assert upgrade(document()) == document()  # the current version is read as written
    with pytest.raises(ValueError, match=r"^r.json: report schema version 99, expected one of 1, 2, 3$"):
        upgrade(document() | {"schema_version": 99}, "r.json")
    with pytest.raises(ValueError, match=r"^r.json: not an unlearnbench report$"):
        upgrade({"schema": "other"}, "r.json")
