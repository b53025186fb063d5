"""The calibration benchmark's quick mode (benchmarks/calibration.py): every
decision interval's false-pass and false-fail rates at the bound, per check
and per checkpoint under the family rule, and the power at `n_needed`,
simulated through `Check.judge` as a run decides."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "calibration.py"


def test_the_quick_calibration_holds_every_rate_and_the_power(capsys, monkeypatch):
    spec = importlib.util.spec_from_file_location("calibration", BENCHMARK)
    calibration = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "calibration", calibration)  # its dataclasses look their module up
    spec.loader.exec_module(calibration)
    code = calibration.main(["--quick"])
    out = capsys.readouterr().out
    assert code == 0, out
    # Every family was simulated, and the checkpoint table shows what Holm buys: without
    # a correction, any of 10 checks on the bound fails the checkpoint far more often than alpha.
    for family in calibration.FAMILIES:
        assert f"| {family.name} |" in out, family.name
    rows = {tuple(cell.strip() for cell in line.split("|")[1:3]): line for line in out.splitlines()
            if line.startswith("| 10 |")}
    uncorrected = float(rows[("10", "none")].split("|")[3])
    assert uncorrected > calibration.ALPHA
    # The elicitation headline: ten families on the bound fail the checkpoint at most alpha of the time
    # under Holm (main's exit code holds the bound; the row must be there).
    family_rows = {line.split("|")[2].strip(): line for line in out.splitlines() if line.startswith("| 10 families |")}
    assert set(family_rows) == {"none", "holm"}
    assert float(family_rows["holm"].split("|")[3]) <= calibration.ALPHA + 0.05
