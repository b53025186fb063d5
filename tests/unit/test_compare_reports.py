"""scripts/compare_reports.py: what a refactor must leave equal. A changed
value or reason is a difference, a field only the new report has is one
unless --allow-added, a timing or another cache folder is not."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "compare_reports.py"


def report(value: float, reason: str, *, seconds: float, folder: str, code: str | None = None) -> dict:
    check = {"outcome": "pass", "value": value, "reason": reason, "worker": "gw0"} | ({"code": code} if code else {})
    suite = {"data": {"source": f"{folder}/dusk"}, "metrics": {"m": {"value": value, "n": 8}},
             "checks": {"c": check}, "timings": {"evaluate_s": seconds}}
    return {"run": {"id": str(seconds)}, "checkpoints": {"ga": {"info": {"name": "ga"}, "suites": {"dusk": suite}}},
            "references": {}, "assessment": {"order": ["ga"]}, "summary": {"passed": 1}}


def compare(tmp_path: Path, old: dict, new: dict, *flags: str) -> subprocess.CompletedProcess:
    (tmp_path / "old.json").write_text(json.dumps(old))
    (tmp_path / "new.json").write_text(json.dumps(new))
    return subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "old.json"), str(tmp_path / "new.json"),
                           *flags], capture_output=True, text=True)


def test_equal_reports_differ_only_in_what_varies_between_runs(tmp_path):
    same = compare(tmp_path, report(0.5, "r", seconds=1.0, folder="/a"), report(0.5, "r", seconds=9.0, folder="/b"),
                   "--same", "/a", "/b")
    assert same.returncode == 0 and "0 differences, 0 added fields" in same.stdout
    other_folder = compare(tmp_path, report(0.5, "r", seconds=1.0, folder="/a"),
                           report(0.5, "r", seconds=1.0, folder="/b"))
    assert other_folder.returncode == 1 and "data.source" in other_folder.stdout


def test_a_changed_value_or_reason_is_a_difference_and_an_added_field_only_without_allow_added(tmp_path):
    changed = compare(tmp_path, report(0.5, "r", seconds=1, folder="/a"), report(0.5000001, "r", seconds=1, folder="/a"))
    assert changed.returncode == 1 and "checkpoints.ga.suites.dusk.metrics.m.value: 0.5 -> 0.5000001" in changed.stdout
    reworded = compare(tmp_path, report(0.5, "r", seconds=1, folder="/a"), report(0.5, "s", seconds=1, folder="/a"))
    assert reworded.returncode == 1 and "checks.c.reason" in reworded.stdout
    old, new = report(0.5, "r", seconds=1, folder="/a"), report(0.5, "r", seconds=1, folder="/a", code="decided")
    assert compare(tmp_path, old, new).returncode == 1
    allowed = compare(tmp_path, old, new, "--allow-added")
    assert allowed.returncode == 0 and "added   code (1 places" in allowed.stdout
