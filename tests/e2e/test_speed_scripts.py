"""The measuring scripts run here so that they cannot rot: the floor script
on the zoo (it finishes and prints every suite asked for), the scale script
on its tiny shape (issue 57: every figure it prints is there, and the
shapes it builds are the published models' sizes) and the GPU check in its
CPU mode on SmolLM2 (float32 values against the committed CPU values, and a
changed value caught by name). Smoke tests: nothing here times anything."""

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


def test_the_scale_script_measures_each_suite_and_extrapolates(smollm2_path, cache_dir, tmp_path):
    result = subprocess.run([sys.executable, "benchmarks/scale.py", "--quick", "--cache-dir", str(cache_dir),
                             "--json", str(tmp_path / "scale.json")], cwd=ROOT, capture_output=True, text=True,
                            timeout=900)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    (tiny,) = json.loads((tmp_path / "scale.json").read_text())
    assert [row["suite"] for row in tiny["rows"]] == ["smoke", "tofu"] and tiny["depth_factor"] == 1.0
    for row in tiny["rows"]:
        assert row["seconds"] > 0 and row["peak_rss_mib"] > tiny["weights_mib"] > 0, row
        assert row["scored_tokens"] > 0 and row["prefill_tokens"] > 0 and row["generated_tokens"] > 0, row
        assert row["gpu_bfloat16_s"] < row["gpu_float32_s"], row
        assert f"| {row['suite']} | {row['sequences']} | {row['scored_tokens']} / " in result.stdout


def test_the_scale_shapes_are_the_published_models_sizes():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import scale

    billions = {name: round((layer * scale.SHAPES[name]["num_hidden_layers"] + rest) / 1e9, 2)
                for name in ("llama-3.2-1b", "llama-3.1-8b", "qwen2.5-7b")
                for layer, rest in [scale.params_of(scale.SHAPES[name])]}
    assert billions == {"llama-3.2-1b": 1.24, "llama-3.1-8b": 8.03, "qwen2.5-7b": 7.62}  # model cards (Qwen's
    # biases of its q, k and v projections, 1.1M, aside)
    counts = {"scored_tokens": 10**6, "prefill_tokens": 0, "generated_tokens": 0, "decode_steps": 0}
    shape = scale.SHAPES["llama-3.1-8b"]
    assert scale.gpu_seconds(counts, shape, "float32", scale.GPUS["l4-24gb"]) is None  # 32 GB of weights
    bf16 = scale.gpu_seconds(counts, shape, "bfloat16", scale.GPUS["h100-80gb"])
    assert bf16 == pytest.approx(2 * 8.03e9 * 10**6 / (scale.MFU * 989e12), rel=1e-3)
