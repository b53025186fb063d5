"""Issue 47's measuring scripts run here so that they cannot rot: the floor
script on the zoo (it finishes and prints every suite asked for) and the GPU
check in its CPU mode on SmolLM2 (float32 values against the committed CPU
values, and a changed value caught by name). Smoke tests: nothing here times
anything."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def test_the_floor_script_prints_real_and_floor_time_for_every_suite(zoo_family, cache_dir):
    result = subprocess.run([sys.executable, "benchmarks/floor.py", "--suites", "smoke", "honesty", "--cache-dir",
                             str(cache_dir)], cwd=ROOT,
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    rows = {m.group(1): m.groups()[1:] for m in re.finditer(
        r"^(\w+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)x\s+([\d.]+) / ([\d.]+) / ([\d.]+)$", result.stdout,
        re.M)}
    assert set(rows) == {"smoke", "honesty"}, result.stdout
    for suite, (first, real, floor, ratio, score, generate, patch) in rows.items():
        assert float(first) > 0 and float(real) > 0, suite  # the first checkpoint and the next were both timed
        assert float(floor) > 0 and float(score) > 0, suite  # both suites score and generate
        assert float(generate) > 0 and float(patch) == 0, suite
        rounding = float(real) / float(floor) * 0.0005 / float(floor) + 0.005  # of the printed 3 decimals
        assert abs(float(ratio) - float(real) / float(floor)) <= rounding, suite


def test_the_gpu_check_in_cpu_mode_checks_values_against_the_committed_cpu_values(smollm2_path, cache_dir, tmp_path):
    check = ["bash", "benchmarks/gpu_check.sh", "--device", "cpu", "--suites", "smoke", "--cache-dir", str(cache_dir)]
    result = subprocess.run(check, cwd=ROOT,
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert re.search(r"^smoke\s+[\d.]+\s+-\s+\d\.\d\de[-+]\d\d$", result.stdout, re.M), result.stdout
    assert "float32 values equal the CPU values to 0.0001" in result.stdout
    # a value off by more than the tolerance fails the check, by name
    changed = json.loads((ROOT / "benchmarks" / "gpu_check_cpu.json").read_text())
    changed["values"]["smoke"]["mean_token_logprob"] += 0.001
    (tmp_path / "changed.json").write_text(json.dumps(changed))
    result = subprocess.run([*check, "--reference", str(tmp_path / "changed.json")], cwd=ROOT, capture_output=True,
                            text=True, timeout=900)
    assert result.returncode == 1
    assert "differs from the CPU values by more than 0.0001: smoke.mean_token_logprob" in result.stdout
