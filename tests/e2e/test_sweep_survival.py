"""Issue 13 end to end: `pytest suites ...` in a subprocess, with one bad
checkpoint, a broken yardstick or a bad input in the run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import nan_checkpoint

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def project(warm_pytester):
    for suite in ("smoke", "dusk", "uds"):
        shutil.copytree(ROOT / "suites" / suite, warm_pytester.path / "suites" / suite)
    shutil.copytree(ROOT / "thresholds", warm_pytester.path / "thresholds")
    return warm_pytester


def run(project, cache_dir, *args, suites=("suites/smoke",)):
    reports_dir = project.path / "reports"
    shutil.rmtree(reports_dir, ignore_errors=True)
    result = project.runpytest_subprocess(*suites, "--cache-dir", str(cache_dir), "--report-dir", str(reports_dir),
                                          "-p", "no:cacheprovider", *args)
    reports = sorted(p for p in reports_dir.glob("*/report.json") if p.parent.name != "latest")
    return result, (json.loads(reports[-1].read_text()) if reports else None)


def values(report, checkpoint):
    """Every metric value and verdict of one checkpoint."""
    out = {}
    for suite, result in report["checkpoints"][checkpoint]["suites"].items():
        for name, metric in result["metrics"].items():
            out[f"{suite}.{name}"] = metric.get("value", metric.get("unavailable"))
        for name, verdict in result["checks"].items():
            out[f"{suite}.{name}:outcome"], out[f"{suite}.{name}"] = verdict["outcome"], verdict.get("value")
    return out


def zoo_args(cache_dir):
    from unlearnbench.fixtures import zoo

    return ["--full-model", str(zoo.build("full", cache_dir)), "--retain-model", str(zoo.build("retain", cache_dir)),
            "--data-dir", str(zoo.data_dir(cache_dir))]


def test_a_nan_checkpoint_in_a_sweep_fails_alone_and_the_report_is_written(project, cache_dir, zoo_family, tmp_path):
    from unlearnbench.fixtures import zoo

    ga = zoo.build("ga", cache_dir)
    broken = nan_checkpoint(ga, tmp_path / "nan")
    suites = ("suites/dusk", "suites/uds")
    alone, alone_report = run(project, cache_dir, "--model", f"ga={ga}", *zoo_args(cache_dir), suites=suites)
    # A fresh result cache: ga is evaluated again, next to the broken checkpoint, not read back.
    sweep, report = run(project, tmp_path / "cache", "--model", f"ga={ga}", "--model", f"nan={broken}",
                        *zoo_args(cache_dir), suites=suites)
    assert not report["checkpoints"]["ga"]["suites"]["dusk"]["timings"]["from_cache"]
    assert report is not None, sweep.stdout.str()[-3000:]
    # The same values, up to float rounding: the run alone may read the references' UDS work from a cache a
    # process of another thread count wrote (1e-9 apart when measured).
    swept, alone_values = values(report, "ga"), values(alone_report, "ga")
    assert swept.keys() == alone_values.keys()
    for key, value in swept.items():
        assert value == (pytest.approx(alone_values[key], rel=1e-6) if isinstance(value, float) else alone_values[key])
    nan_checks = [v for s in report["checkpoints"]["nan"]["suites"].values() for v in s["checks"].values()]
    assert nan_checks and all(v["outcome"] == "error" for v in nan_checks)
    assert all("checkpoint nan: non-finite logits (NaN)" in v["reason"] for v in nan_checks)
    sweep.stdout.fnmatch_lines(["*checkpoint nan: non-finite logits (NaN) in the first forward pass: "
                                "the weights are broken*"])
    assert "Traceback" not in sweep.stdout.str()
    assert (Path(report["run"]["directory"]) / "report.html").is_file()


def test_a_check_whose_yardstick_cannot_answer_is_inconclusive(project, cache_dir, zoo_family, tmp_path):
    from unlearnbench.fixtures import zoo

    data = shutil.copytree(zoo.data_dir(cache_dir) / "dusk", tmp_path / "dusk")
    shared = data / "eval" / "GeneralQA.jsonl"
    rows = [json.loads(line) for line in shared.read_text().splitlines() if line.strip()]
    # Answers no model of the zoo has seen: the retain model scores 0 on them.
    shared.write_text("".join(json.dumps({**r, "answer": f"Qwzx{i} Vlorbin Tresk{i}"}) + "\n"
                              for i, r in enumerate(rows)))
    # The candidate is a copy of the retain model (a copy: the retain model itself would be n/a against
    # itself): it keeps the unique-retain knowledge (a pass), so the only verdict in question is the
    # shared-knowledge one.
    candidate = shutil.copytree(zoo.build("retain", cache_dir), tmp_path / "cand")
    args = ["--model", f"cand={candidate}", *zoo_args(cache_dir)[:4], "--data-dir", f"dusk={data}",
            "-k", "shared_knowledge_kept or unique_retain_knowledge_kept"]
    result, report = run(project, cache_dir, *args, suites=("suites/dusk",))
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*inconclusive*sk_rougeL_recall*retain*no checkpoint could fail*"])
    checks = report["checkpoints"]["cand"]["suites"]["dusk"]["checks"]
    assert checks["shared_knowledge_kept"]["outcome"] == "inconclusive"
    assert report["summary"]["inconclusive"] == 1 and report["summary"]["passed"] == 1
    html = (Path(report["run"]["directory"]) / "report.html").read_text()
    assert '<td class="inconclusive"' in html

    strict, strict_report = run(project, cache_dir, *args, "--strict-ci", suites=("suites/dusk",))
    assert strict.ret == 1
    assert strict_report["checkpoints"]["cand"]["suites"]["dusk"]["checks"]["shared_knowledge_kept"]["outcome"] == "fail"

    # A release gate that fails on what it cannot decide, without --strict-ci's
    # CI bounds: the test fails, the verdict stays "inconclusive" in the report.
    gated, gated_report = run(project, cache_dir, *args, "--fail-inconclusive", suites=("suites/dusk",))
    assert gated.ret == 1
    gated.assert_outcomes(passed=1, failed=1)
    gated.stdout.fnmatch_lines(["*shared_knowledge_kept*inconclusive*--fail-inconclusive*"])
    checks = gated_report["checkpoints"]["cand"]["suites"]["dusk"]["checks"]
    assert checks["shared_knowledge_kept"]["outcome"] == "inconclusive"


CRASH_PLUGIN = '''
import os

def pytest_runtest_call(item):
    if item.nodeid.endswith("[crash]"):
        os._exit(3)  # the worker dies as on a segfault or the OOM killer
'''


def test_a_crashed_worker_costs_only_its_checkpoint(project, cache_dir, smoke_lm_dir, smoke_untrained_dir, tmp_path):
    project.makepyfile(crashplugin=CRASH_PLUGIN)
    alone, alone_report = run(project, cache_dir, "--model", f"lm={smoke_lm_dir}", "--model",
                              f"untrained={smoke_untrained_dir}")
    crash_dir = shutil.copytree(smoke_lm_dir, tmp_path / "crash")
    # A fresh result cache: the surviving checkpoints are evaluated again, not read back.
    result, report = run(project, tmp_path / "cache", "--model", f"lm={smoke_lm_dir}", "--model",
                         f"crash={crash_dir}", "--model", f"untrained={smoke_untrained_dir}", "-n", "2",
                         "-p", "crashplugin")
    assert report is not None, result.stdout.str()[-3000:]
    assert values(report, "lm") == values(alone_report, "lm")
    assert values(report, "untrained") == values(alone_report, "untrained")
    lost = report["checkpoints"]["crash"]["lost"]
    assert lost["reason"].startswith("worker 'gw") and "crashed while running" in lost["reason"]
    assert len(lost["tests"]) == 3  # every smoke check of that checkpoint, run once, not retried
    assert "maximum crashed workers reached" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*checkpoint crash lost: worker 'gw*' crashed while running*"])


def weights_only_refused(source: Path, target: Path) -> Path:
    """A checkpoint whose pytorch_model.bin holds an object torch.load(weights_only=True) refuses."""
    import argparse

    import torch
    from safetensors.torch import load_file

    shutil.copytree(source, target)
    weights = load_file(target / "model.safetensors")
    (target / "model.safetensors").unlink()
    torch.save({**weights, "extra": argparse.Namespace(lr=1)}, target / "pytorch_model.bin")
    return target


def test_a_checkpoint_that_cannot_load_fails_in_one_line(project, cache_dir, smoke_lm_dir, tmp_path):
    refused = weights_only_refused(smoke_lm_dir, tmp_path / "refused")
    result, report = run(project, cache_dir, "--model", f"lm={smoke_lm_dir}", "--model", f"refused={refused}")
    assert report is not None and values(report, "lm")
    out = result.stdout.str()
    failures = [line for line in out.splitlines() if line.startswith("checkpoint refused (")]
    assert len(failures) == 2, out[-3000:]  # two checks ran (the relative one skips without --full-model)
    assert "weights_only" in failures[0]
    assert "Traceback" not in out and "site-packages" not in out
    long, _ = run(project, cache_dir, "--model", f"refused={refused}", "--tb=long")
    assert "site-packages" in long.stdout.str()


def test_an_empty_model_dir_is_a_usage_error_before_collection(project, cache_dir, tmp_path):
    (tmp_path / "runs").mkdir()
    result, report = run(project, cache_dir, "--model-dir", str(tmp_path / "runs"))
    assert result.ret == pytest.ExitCode.USAGE_ERROR and report is None
    result.stderr.fnmatch_lines([f"ERROR: checkpoint {tmp_path / 'runs'}: --model-dir: no checkpoint*"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_unknown_suite_in_data_dir_is_a_usage_error(project, cache_dir, tmp_path):
    result, _ = run(project, cache_dir, "--data-dir", f"dsuk={tmp_path}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --data-dir dsuk=*: unknown suite 'dsuk' (known: *dusk*)"])


def test_a_uds_tokenizer_mismatch_fails_that_checkpoint_before_weights_load(project, cache_dir, zoo_family,
                                                                             smoke_lm_dir):
    from unlearnbench.fixtures import zoo

    args = ["--model", f"ga={zoo.build('ga', cache_dir)}", "--model", f"other={smoke_lm_dir}", *zoo_args(cache_dir)]
    result, report = run(project, cache_dir, *args, suites=("suites/uds",))
    result.stdout.fnmatch_lines(["checkpoint other: its tokenizer differs from the full model's*"])
    assert report["checkpoints"]["ga"]["suites"]["uds"]["checks"]["knowledge_erased_in_depth"]["outcome"] in (
        "pass", "fail")
    other = report["checkpoints"]["other"]
    assert other["suites"]["uds"]["checks"]["knowledge_erased_in_depth"]["outcome"] == "error"
    assert "fingerprint" not in other["info"]  # never loaded
