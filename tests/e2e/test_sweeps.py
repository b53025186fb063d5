"""Issue 14: sweeps whose memory does not grow with the number of checkpoints,
and shards that any scheduler can run, merged into the one-run report."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from tests.conftest import comparable_report

ROOT = Path(__file__).resolve().parents[2]

# Counts live models in the pytest process under test, independently of the
# plugin: a model is live from ModelHandle.load until it is garbage-collected.
COUNT_PLUGIN = '''
import gc, json, os, weakref

from unlearnbench.models import handle as handle_module

live, peak, names = set(), [0], []
_load = handle_module.ModelHandle.load.__func__


def _counted_load(cls, *args, **kwargs):
    handle = _load(cls, *args, **kwargs)
    names.append(handle.name)
    key = id(handle.model)
    live.add(key)
    peak[0] = max(peak[0], len(live))
    weakref.finalize(handle.model, live.discard, key)
    return handle


handle_module.ModelHandle.load = classmethod(_counted_load)


def pytest_runtest_setup(item):
    gc.collect()  # what is unreachable is not held, whatever the collector's timing


def pytest_sessionfinish(session):
    with open(os.environ["LOADED_MODELS_LOG"], "w") as out:
        json.dump({"peak": peak[0], "loaded": names}, out)
'''


@pytest.fixture
def project(warm_pytester):
    for suite in ("smoke", "dusk"):
        shutil.copytree(ROOT / "suites" / suite, warm_pytester.path / "suites" / suite)
    shutil.copytree(ROOT / "thresholds", warm_pytester.path / "thresholds")
    return warm_pytester


def report_of(project) -> dict:
    # The newest by write time: two runs can start in the same second, and a run's id sorts by the second only.
    reports = sorted((p for p in (project.path / "reports").glob("*/report.json") if p.parent.name != "latest"),
                     key=lambda p: p.stat().st_mtime_ns)
    return json.loads(reports[-1].read_text())


@pytest.mark.slow  # a sweep over the whole zoo family
def test_a_serial_sweep_holds_the_references_and_one_checkpoint(project, cache_dir, zoo_family, monkeypatch, tmp_path):
    from unlearnbench.fixtures import zoo

    project.makepyfile(countplugin=COUNT_PLUGIN)
    log = tmp_path / "loaded.json"
    monkeypatch.setenv("LOADED_MODELS_LOG", str(log))
    models = [a for name in ("ga", "npo", "simnpo", "graddiff") for a in ("--model", f"{name}={zoo.build(name, cache_dir)}")]
    result = project.runpytest_subprocess(
        "suites/smoke", "suites/dusk", *models, "--full-model", str(zoo.build("full", cache_dir)),
        "--retain-model", str(zoo.build("retain", cache_dir)), "--data-dir", f"dusk={zoo.data_dir(cache_dir)}",
        "--cache-dir", str(cache_dir), "--report-dir", str(project.path / "reports"), "-p", "countplugin", "-v")
    assert json.loads(log.read_text())["peak"] <= 2 + 1  # full + retain + the checkpoint under test
    # Checkpoint-major: every checkpoint's tests, of both suites, run as one block.
    order = re.findall(r"^suites/\w+/test_\w+\.py::\w+\[(\w+)\] (?:PASSED|FAILED|SKIPPED)", result.stdout.str(), re.M)
    blocks = [name for i, name in enumerate(order) if i == 0 or order[i - 1] != name]
    assert sorted(blocks) == ["ga", "graddiff", "npo", "simnpo"], order
    assert len(order) == 4 * (3 + 6)
    assert set(report_of(project)["checkpoints"]) == {"ga", "npo", "simnpo", "graddiff"}


def test_shards_split_checkpoints_and_merge_into_the_one_run_report(project, cache_dir, smoke_lm_dir,
                                                                    smoke_untrained_dir, tmp_path):
    from unlearnbench.report.merge import merge_reports
    from unlearnbench.report.model import Report

    names = {"lm": smoke_lm_dir, "untrained": smoke_untrained_dir}
    for i in range(3):
        names[f"copy{i}"] = shutil.copytree(smoke_lm_dir if i % 2 else smoke_untrained_dir, tmp_path / f"copy{i}")
    models = [a for name, path in names.items() for a in ("--model", f"{name}={path}")]
    common = ["suites/smoke", *models, "--cache-dir", str(cache_dir), "--full-model", str(smoke_lm_dir)]

    runs = []

    def run(*extra) -> dict:
        runs.append(extra)
        directory = tmp_path / f"reports-{len(runs)}"
        project.runpytest_subprocess(*common, "--report-dir", str(directory), *extra)
        [path] = [p for p in directory.glob("*/report.json") if p.parent.name != "latest"]
        return json.loads(path.read_text())

    whole = run()
    shards = [run("--shard", f"{i}/3") for i in range(3)]
    owned = [set(s["checkpoints"]) for s in shards]
    assert sorted(n for o in owned for n in o) == sorted(names)  # each checkpoint in exactly one shard
    assert all(owned)  # 5 checkpoints over 3 shards: none empty
    merged = merge_reports([(f"shard{i}", Report.of(s)) for i, s in enumerate(shards)])

    assert comparable_report(merged) == comparable_report(whole)
    assert merged["summary"] == whole["summary"]
    assert run("--shard", "1/3")["checkpoints"].keys() == shards[1]["checkpoints"].keys()  # deterministic


@pytest.mark.parametrize("value, message", [
    ("3/2", "--shard 3/2: the shard index must be in 0..1"),
    ("x", "--shard 'x': expected I/N"),
    ("0/0", "--shard 0/0: expected I/N"),
])
def test_bad_shard_is_a_usage_error(project, cache_dir, smoke_lm_dir, value, message):
    result = project.runpytest_subprocess("suites/smoke", "--model", str(smoke_lm_dir), "--shard", value,
                                          "--cache-dir", str(cache_dir))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()


def test_an_interrupted_sweep_resumes_without_loading_what_it_finished(project, smoke_lm_dir, smoke_untrained_dir,
                                                                        random_llama_dir, monkeypatch, tmp_path):
    project.makepyfile(countplugin=COUNT_PLUGIN)
    log = tmp_path / "loaded.json"
    monkeypatch.setenv("LOADED_MODELS_LOG", str(log))
    own_cache = tmp_path / "cache"
    common = ["suites/smoke", "--model", f"untrained={smoke_untrained_dir}", "--model", f"random={random_llama_dir}",
              "--full-model", str(smoke_lm_dir), "--cache-dir", str(own_cache), "-p", "countplugin",
              "--report-dir", str(project.path / "reports")]
    project.runpytest_subprocess(*common, "-k", "untrained")  # the sweep stops after one checkpoint
    first = report_of(project)
    assert set(json.loads(log.read_text())["loaded"]) == {"untrained", smoke_lm_dir.name}
    project.runpytest_subprocess(*common)  # the whole sweep again
    rerun = report_of(project)
    assert json.loads(log.read_text())["loaded"] == ["random"]  # only the checkpoint the first run did not reach
    assert rerun["checkpoints"]["untrained"]["suites"]["smoke"]["metrics"] == \
        first["checkpoints"]["untrained"]["suites"]["smoke"]["metrics"]
    assert rerun["checkpoints"]["untrained"]["suites"]["smoke"]["timings"]["from_cache"] is True
    assert rerun["checkpoints"]["untrained"]["info"]["fingerprint"]  # described from the cache


@pytest.mark.parametrize("extra, message", [
    (["--device-map", "nowhere.json"], "--device-map 'nowhere.json': expected auto, balanced, balanced_low_0, "
                                       "sequential or a JSON file"),
    (["--device-map", "auto", "-n", "2"], "--device-map spreads each checkpoint over every visible device: run it "
                                          "with one process, not -n 2"),
])
def test_bad_device_map_is_a_usage_error_before_any_model_loads(project, cache_dir, smoke_lm_dir, extra, message):
    result = project.runpytest_subprocess("suites/smoke", "--model", str(smoke_lm_dir), "--cache-dir", str(cache_dir),
                                          *extra)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()
    assert "loading" not in result.stderr.str()
