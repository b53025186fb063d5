"""The pytest plugin end to end, in subprocesses (pytester)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def project(warm_pytester):
    """A checkout-like folder with the smoke suite and its default gate."""
    shutil.copytree(ROOT / "suites" / "smoke", warm_pytester.path / "suites" / "smoke")
    shutil.copytree(ROOT / "thresholds", warm_pytester.path / "thresholds")
    return warm_pytester


def run_suite(project, cache_dir, *args):
    result = project.runpytest_subprocess(
        "suites/smoke", "--cache-dir", str(cache_dir), "--report-dir", str(project.path / "reports"), *args
    )
    # The newest by write time: two runs can start in the same second, and a run's id sorts by the second only.
    reports = sorted((p for p in (project.path / "reports").glob("*/report.json") if p.parent.name != "latest"),
                     key=lambda p: p.stat().st_mtime_ns)
    return result, (json.loads(reports[-1].read_text()) if reports else None)


def values(report):
    return {
        (name, check): verdict.get("value")
        for name, ckpt in report["checkpoints"].items()
        for check, verdict in ckpt["suites"]["smoke"]["checks"].items()
    }


def test_two_checkpoints_serial_and_xdist_give_one_identical_report(
    project, cache_dir, smoke_lm_dir, smoke_untrained_dir
):
    models = ["--model", f"lm={smoke_lm_dir}", "--model", f"untrained={smoke_untrained_dir}"]
    serial, serial_report = run_suite(project, cache_dir, *models)
    shutil.rmtree(project.path / "reports")
    parallel, parallel_report = run_suite(project, cache_dir, *models, "-n", "2")

    for result in (serial, parallel):
        assert result.ret == 1  # the untrained checkpoint fails its gate
        result.stdout.fnmatch_lines(["*test_fluent_on_reference_texts*untrained*", "*unlearnbench*"])
    serial.assert_outcomes(passed=2, failed=2, skipped=2)
    parallel.assert_outcomes(passed=2, failed=2, skipped=2)
    runs = [p for p in (project.path / "reports").glob("*/report.json") if p.parent.name != "latest"]
    assert len(runs) == 1  # one merged report, no per-worker files

    assert set(parallel_report["checkpoints"]) == {"lm", "untrained"}
    assert values(serial_report) == values(parallel_report)
    lm = parallel_report["checkpoints"]["lm"]
    assert lm["info"]["fingerprint"] and lm["suites"]["smoke"]["metrics"]["qa_rougeL_recall"]["per_item"]
    assert lm["suites"]["smoke"]["checks"]["no_less_fluent_than_full"]["outcome"] == "skip"
    for ckpt in parallel_report["checkpoints"].values():  # loadgroup: one worker per checkpoint
        workers = {c["worker"] for c in ckpt["suites"]["smoke"]["checks"].values()}
        assert len(workers) == 1 and workers.pop().startswith("gw")
    assert parallel_report["summary"] == {"passed": 2, "failed": 2, "skipped": 2, "inconclusive": 0,
                                        "errors": 0}
    assert parallel_report["schema_version"] == 3 and parallel_report["environment"]["torch"]


def test_exit_code_follows_a_deliberately_failing_threshold(project, cache_dir, smoke_lm_dir):
    passing, _ = run_suite(project, cache_dir, "--model", str(smoke_lm_dir))
    assert passing.ret == 0
    (project.path / "strict.yaml").write_text("smoke:\n  fluent_on_reference_texts: {bound: 0.0}\n")
    failing, report = run_suite(project, cache_dir, "--model", str(smoke_lm_dir), "--thresholds", "strict.yaml")
    assert failing.ret == 1
    verdict = report["checkpoints"][smoke_lm_dir.name]["suites"]["smoke"]["checks"]["fluent_on_reference_texts"]
    assert verdict["outcome"] == "fail" and verdict["bound"] == 0.0


def test_reference_model_work_is_cached_across_runs(project, cache_dir, smoke_lm_dir, smoke_untrained_dir, tmp_path):
    own_cache = tmp_path / "cache"
    args = ["--model", str(smoke_untrained_dir), "--full-model", str(smoke_lm_dir)]
    first, first_report = run_suite(project, own_cache, *args)
    second, second_report = run_suite(project, own_cache, *args)
    assert first.ret == second.ret == 1
    # The full model's suite results and the checkpoint's: computed once, then read back.
    assert first_report["run"]["cache"] == {"hits": 0, "misses": 2, "corrupt": 0}
    assert second_report["run"]["cache"] == {"hits": 2, "misses": 0, "corrupt": 0}
    check = second_report["checkpoints"][smoke_untrained_dir.name]["suites"]["smoke"]["checks"]
    assert check["no_less_fluent_than_full"]["reference_value"] == pytest.approx(
        first_report["checkpoints"][smoke_untrained_dir.name]["suites"]["smoke"]["checks"][
            "no_less_fluent_than_full"]["reference_value"])
    assert second_report["references"]["full"]["fingerprint"]


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_missing_checkpoint_is_a_usage_error(project, cache_dir, tmp_path, xdist):
    result, report = run_suite(project, cache_dir, "--model", str(tmp_path / "gone"), *xdist)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: checkpoint {tmp_path / 'gone'}: no such file or directory"])
    assert report is None


def test_corrupt_checkpoint_and_bad_thresholds_are_usage_errors(project, cache_dir, smoke_lm_dir, tmp_path):
    broken = shutil.copytree(smoke_lm_dir, tmp_path / "broken")
    (broken / "model.safetensors").write_bytes((broken / "model.safetensors").read_bytes()[:1000])
    result, _ = run_suite(project, cache_dir, "--model", str(broken))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: checkpoint */broken/model.safetensors: truncated safetensors file*"])

    (project.path / "bad.yaml").write_text("smoke:\n  fluent_on_reference_texts: {bound: -1, colour: red}\n")
    result, _ = run_suite(project, cache_dir, "--model", str(smoke_lm_dir), "--thresholds", "bad.yaml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: thresholds bad.yaml check 'fluent_on_reference_texts': unknown key(s) colour*"])

    (project.path / "thresholds" / "smoke.yaml").write_text("suite: smoke\nchecks:\n  x: {metric: nope}\n")
    result, _ = run_suite(project, cache_dir, "--model", str(smoke_lm_dir))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: thresholds */thresholds/smoke.yaml check 'x': missing 'direction'"])


def test_a_rootdir_taken_from_an_options_value_stops_the_run_before_it_writes_there(project, cache_dir, smoke_lm_dir,
                                                                                    tmp_path):
    # pytest picks its rootdir before it knows the plugin's options, so in
    # `pytest --model ../training/ckpt suites/smoke` the checkpoint path counts
    # as a test path: another project's pyproject.toml would make its folder
    # the rootdir, and the reports and pytest's cache would be written there.
    (project.path / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    training = tmp_path / "training"
    checkpoint = shutil.copytree(smoke_lm_dir, training / "ckpt")
    (training / "pyproject.toml").write_text("[project]\nname = 'training'\n\n[tool.pytest.ini_options]\n")
    before = sorted(p.name for p in training.iterdir())
    result = project.runpytest_subprocess("--model", str(checkpoint), "suites/smoke", "--cache-dir", str(cache_dir))
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    errors = [line for line in result.stderr.str().splitlines() if line.strip()]
    assert len(errors) == 1, errors
    assert errors[0].startswith(f"ERROR: pytest took {training} as its rootdir from --model {checkpoint}"), errors[0]
    assert "--model=" in errors[0] and "--rootdir" in errors[0]  # the ways out
    assert sorted(p.name for p in training.iterdir()) == before  # no reports/, no .pytest_cache there
    assert not (project.path / "reports").exists()

    # The ways out the message names: the run goes on, its reports under the project.
    for args in (["suites/smoke", "--model", str(checkpoint)], [f"--model={checkpoint}", "suites/smoke"],
                 ["--model", str(checkpoint), "suites/smoke", f"--rootdir={project.path}"]):
        result = project.runpytest_subprocess(*args, "--cache-dir", str(cache_dir), "-p", "no:cacheprovider")
        assert result.ret == pytest.ExitCode.OK, (args, result.stdout.str()[-2000:], result.stderr.str()[-2000:])
        assert sorted(p.name for p in training.iterdir()) == before
    assert len([p for p in (project.path / "reports").iterdir() if p.name != "latest"]) == 3


def test_plugin_is_inert_without_suites(warm_pytester):
    warm_pytester.makepyfile(test_plain="def test_ok():\n    assert True\n")
    result = warm_pytester.runpytest_subprocess("--model", "/does/not/matter")
    result.assert_outcomes(passed=1)
    assert not (warm_pytester.path / "reports").exists()
    assert "report:" not in result.stdout.str() and " unlearnbench =" not in result.stdout.str()


def test_plugin_import_is_cheap():
    code = "import unlearnbench.plugin, sys; print(sorted({'torch', 'transformers', 'numpy'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_checkpoint_of_a_node_id():
    from unlearnbench.scheduling import checkpoint_of

    names = sorted(["ga", "ga-step5", "npo"], key=len, reverse=True)
    assert checkpoint_of("suites/x.py::test_a[ga-step5]", names) == "ga-step5"
    assert checkpoint_of("suites/x.py::test_a[ga]", names) == "ga"
    assert checkpoint_of("suites/x.py::test_a[npo-fmt2]", names) == "npo"
    assert checkpoint_of("suites/x.py::test_a[other]", names) is None
    assert checkpoint_of("tests/test_x.py::test_plain", names) is None


def test_cli_zoo_inspect_and_errors(cache_dir, smoke_lm_dir, capsys):
    from unlearnbench.cli import main

    assert main(["zoo", "--cache-dir", str(cache_dir), "path", "smoke-lm"]) == 0
    assert capsys.readouterr().out.strip() == str(smoke_lm_dir)
    assert main(["inspect", str(smoke_lm_dir)]) == 0
    assert json.loads(capsys.readouterr().out)["kind"] == "hf"
    assert main(["inspect", "/no/such/ckpt"]) == 2
    assert "checkpoint /no/such/ckpt: no such file or directory" in capsys.readouterr().err
    assert main(["thresholds", str(ROOT / "thresholds" / "smoke.yaml")]) == 0


def test_cli_preflight_prints_each_checks_power_from_the_references_alone(zoo_family, cache_dir, capsys):
    from unlearnbench.cli import main

    assert main(["preflight", "--cache-dir", str(cache_dir), "--suite", "dusk", "--suite", "wmdp",
                 "--thresholds-dir", str(ROOT / "thresholds"), "--device", "cpu"]) == 0
    lines = capsys.readouterr().out.splitlines()
    # 192 verbatim passages tell the margin of 0.05 at 80% power; 256 MMLU questions told MMLU's 0.02 at 50%
    # power (an interval's half-width alone), not at 80%, in their 32 clusters: about 420 would.
    verbatim = next(line for line in lines if "dusk.verbatim_forgotten" in line)
    # On the retrained zoo the full and retain models' verbatim scores spread a little more: 192 passages
    # tell differences of 0.053 at 80% power, about 216 would tell the margin.
    assert verbatim.startswith(("ok: dusk.verbatim_forgotten can tell differences >= 0.0",
                                "underpowered: dusk.verbatim_forgotten can tell differences >= 0.05")), verbatim
    assert "at 80% power with n=192 items in 32 clusters; its margin is 0.05" in verbatim, verbatim
    mmlu = next(line for line in lines if "wmdp.mmlu_kept" in line)
    assert mmlu.startswith("underpowered: wmdp.mmlu_kept") and "n=256 items in 32 clusters" in mmlu, mmlu
    assert "its margin is 0.02" in mmlu and 256 < int(mmlu.rsplit("~", 1)[1].split()[0]) < 600, mmlu
    # WMDP's forget checks are held to the looser absolute bound 0.3 (the retain model, which prefers the
    # familiar distractors, answers a tenth of them, so the margin is 0.3 less that): 128 questions tell it.
    bio = next(line for line in lines if "wmdp.bio_forgotten" in line)
    assert bio.startswith("ok: wmdp.bio_forgotten"), bio
    assert 0.2 <= float(bio.rsplit("its margin is ", 1)[1]) <= 0.3, bio
    assert lines[-1].endswith("underpowered check(s) at alpha 0.05 and 80% power (see docs/verdicts.md)")
    assert main(["preflight", "--suite", "nope"]) == 2


def test_bad_device_batch_size_and_memory_budget_are_usage_errors(project, cache_dir, smoke_lm_dir):
    result, _ = run_suite(project, cache_dir, "--model", str(smoke_lm_dir), "--device", "gpu")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --device must be auto, cpu, cuda or cuda:N, not 'gpu'"])
    result, _ = run_suite(project, cache_dir, "--model", str(smoke_lm_dir), "--batch-size", "0")
    result.stderr.fnmatch_lines(["ERROR: --batch-size must be 'auto' or a positive integer, not '0'"])
    result, _ = run_suite(project, cache_dir, "--model", str(smoke_lm_dir), "--memory-budget", "12 apples")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --memory-budget must be 'auto' or a size of at least 1 MiB such as 512MiB "
                                 "or 4GB, not '12 apples'"])


@pytest.mark.parametrize("args, message", [
    (("--alpha", "0"), "argument --alpha: expected a level strictly between 0 and 1 (0.05: 95% intervals), not '0'"),
    (("--alpha", "1.5"), "argument --alpha: expected a level strictly between 0 and 1 (0.05: 95% intervals), "
                         "not '1.5'"),
    (("--correction", "bogus"), "argument --correction: invalid choice: 'bogus' (choose from *none*holm*)"),
    (("--point-estimate", "--strict-ci"), "ERROR: --point-estimate decides on values alone and --strict-ci on "
                                          "intervals: give one of them"),
])
def test_a_bad_decision_rule_is_one_line_at_parse_time(project, cache_dir, smoke_lm_dir, args, message):
    result, report = run_suite(project, cache_dir, "--model", str(smoke_lm_dir), *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR and report is None
    result.stderr.fnmatch_lines([f"*{message}"])
    assert "Traceback" not in result.stderr.str() and "loading" not in result.stderr.str()


def test_alpha_and_holm_are_what_the_report_says_decided(project, cache_dir, smoke_lm_dir, smoke_untrained_dir):
    # Holm is the default: a fail is corrected across the checkpoint's checks; a pass needs no correction.
    result, report = run_suite(project, cache_dir, "--model", f"lm={smoke_lm_dir}", "--model",
                               f"untrained={smoke_untrained_dir}", "--alpha", "0.1", "--power", "0.9")
    decision = report["run"]["decision"]
    assert (decision["alpha"], decision["correction"], decision["power"]) == (0.1, "holm", 0.9)
    assert "Holm-adjusted p-value <= alpha across all of the checkpoint's checks" in decision["text"]
    assert "aim at 90% power" in decision["text"]
    checks = [v for name in ("lm", "untrained") for v in report["checkpoints"][name]["suites"]["smoke"]["checks"].values()]
    assert all(v["alpha"] == 0.1 and v["correction"] == "holm" and v["power"] == 0.9 for v in checks)
    failed = [v for v in checks if v["outcome"] == "fail"]
    assert failed and all(v["p_adjusted"] is not None and v["p_adjusted"] >= v["p_value"] for v in failed)
    assert all(v["p_adjusted"] is None for v in checks if v["outcome"] == "pass")
    _, uncorrected = run_suite(project, cache_dir, "--model", f"lm={smoke_lm_dir}", "--correction", "none")
    assert uncorrected["run"]["decision"]["correction"] == "none"
    assert "no correction for the checkpoint's other checks" in uncorrected["run"]["decision"]["text"]
    point, point_report = run_suite(project, cache_dir, "--model", f"lm={smoke_lm_dir}", "--point-estimate")
    assert {v["decided_by"] for v in point_report["checkpoints"]["lm"]["suites"]["smoke"]["checks"].values()
            if v["outcome"] in ("pass", "fail")} == {"point-estimate"}


def test_a_check_added_to_the_yaml_is_a_test_without_writing_one(project, cache_dir, smoke_lm_dir):
    """Issue 15: the plugin makes one test per YAML check; a check added to
    the YAML is judged, not silently ignored for want of a test function."""
    gate = project.path / "thresholds" / "smoke.yaml"
    gate.write_text(gate.read_text() + """  answers_half_the_questions:
    metric: qa_rougeL_recall
    direction: at_least
    bound: 0.55
    rationale: a stricter copy of answers_reference_questions, added in the YAML only
""")
    result, report = run_suite(project, cache_dir, "--model", f"lm={smoke_lm_dir}", "-v")
    result.stdout.fnmatch_lines(["*test_answers_half_the_questions[[]lm[]] PASSED*"])
    assert report["checkpoints"]["lm"]["suites"]["smoke"]["checks"]["answers_half_the_questions"]["outcome"] == "pass"
    result.assert_outcomes(passed=3, skipped=1)


def test_a_yaml_check_with_no_metric_is_a_collection_error_naming_the_file(project, cache_dir, smoke_lm_dir):
    gate = project.path / "thresholds" / "smoke.yaml"
    gate.write_text(gate.read_text() + """  made_up:
    metric: no_such_metric
    direction: at_least
    bound: 0.5
    rationale: names a metric the smoke suite does not compute
""")
    result, report = run_suite(project, cache_dir, "--model", f"lm={smoke_lm_dir}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR and report is None
    result.stderr.fnmatch_lines([f"ERROR: thresholds {gate} check 'made_up': suite 'smoke' has no metric "
                                 "'no_such_metric'*"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_an_unreadable_suite_yaml_stops_the_run_naming_the_file(project, cache_dir, smoke_lm_dir):
    """No check can be generated from it, and the run still stops on the file
    (not "no tests ran")."""
    gate = project.path / "thresholds" / "smoke.yaml"
    gate.write_text("suite: smoke\nchecks: [not, a, mapping\n")
    result, report = run_suite(project, cache_dir, "--model", f"lm={smoke_lm_dir}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR and report is None
    result.stderr.fnmatch_lines([f"ERROR: thresholds {gate}*"])


def test_zoo_extra_adds_recipes_to_the_family_suites_only_and_bad_names_stop_the_run(warm_pytester):
    for suite in ("smoke", "uds"):
        shutil.copytree(ROOT / "suites" / suite, warm_pytester.path / "suites" / suite)
    shutil.copytree(ROOT / "thresholds", warm_pytester.path / "thresholds")
    listed = warm_pytester.runpytest_subprocess("suites", "--collect-only", "-q", "--zoo-extra", "retain-seed1")
    ids = [line for line in listed.outlines if "::" in line]
    assert any("test_uds.py" in i and "[retain-seed1]" in i for i in ids)
    assert not any("test_smoke.py" in i and "retain-seed1" in i for i in ids)  # smoke runs its own zoo
    bad = warm_pytester.runpytest_subprocess("suites", "--collect-only", "--zoo-extra", "retain-seed9")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--zoo-extra retain-seed9: no zoo recipe of this name (known: *retain-seed1*"])


def test_a_sharded_run_keeps_the_zoo_extra_recipes_each_in_one_shard(warm_pytester):
    """Issue 44: `--shard i/N` split a run order that left out the --zoo-extra recipes, so no shard
    evaluated them. The shards together collect exactly the unsharded run's tests, each in one shard."""
    for suite in ("smoke", "uds"):
        shutil.copytree(ROOT / "suites" / suite, warm_pytester.path / "suites" / suite)
    shutil.copytree(ROOT / "thresholds", warm_pytester.path / "thresholds")
    extra = ("--zoo-extra", "retain-seed1", "--zoo-extra", "retain-seed2")

    def ids(*args: str) -> list[str]:
        listed = warm_pytester.runpytest_subprocess("suites", "--collect-only", "-q", *extra, *args)
        return [line for line in listed.outlines if "::" in line and "[" in line]  # one test per checkpoint

    whole = ids()
    assert any("[retain-seed1]" in i for i in whole) and any("[retain-seed2]" in i for i in whole)
    shards = [ids("--shard", f"{k}/3") for k in range(3)]
    assert sorted(i for shard in shards for i in shard) == sorted(whole)


def test_yaml_checks_are_items_beside_hand_written_suite_tests(project, cache_dir, smoke_lm_dir):
    """Issue 27: a YAML check is a `CheckItem` collected from the module's
    `pytestmark` line (nothing is added to the module); a test the module
    defines for a check replaces the generated one, and other hand-written
    suite tests run on the same checkpoints through the `gate` fixture."""
    module = project.path / "suites" / "smoke" / "test_smoke.py"
    module.write_text(module.read_text() + '''

def test_answers_reference_questions(gate):
    verdict = gate.check()
    assert verdict.outcome == "pass"


def test_own_check(gate, checkpoint):
    assert gate.check("fluent_on_reference_texts").outcome == "pass" and checkpoint.name == "lm"
''')
    (project.path / "conftest.py").write_text('''
def pytest_collection_finish(session):
    from unlearnbench.collect import CheckItem
    kinds = sorted({(type(i).__name__, i.name.split("[")[0]) for i in session.items})
    print("KINDS", kinds)
''')
    result, report = run_suite(project, cache_dir, "--model", f"lm={smoke_lm_dir}", "-s")
    result.stdout.fnmatch_lines(["KINDS [[]('CheckItem', 'test_fluent_on_reference_texts'), "
                                 "('CheckItem', 'test_no_less_fluent_than_full'), "
                                 "('Function', 'test_answers_reference_questions'), ('Function', 'test_own_check')[]]"])
    result.assert_outcomes(passed=3, skipped=1)
    assert set(report["checkpoints"]["lm"]["suites"]["smoke"]["checks"]) == {
        "fluent_on_reference_texts", "answers_reference_questions", "no_less_fluent_than_full"}
    from unlearnbench.suites.smoke import SPEC

    assert not hasattr(SPEC, "test_fluent_on_reference_texts")  # nothing is set on a module or spec


def test_conftest_hooks_add_figures_and_see_the_written_report(project, cache_dir, smoke_lm_dir):
    """hookspec.py: `pytest_unlearnbench_plots` adds a figure to a suite's
    section of the HTML report; `pytest_unlearnbench_report` gets the report
    and the written files (e.g. to upload them)."""
    (project.path / "conftest.py").write_text('''
def pytest_unlearnbench_plots(suite, view):
    if suite == "smoke":
        values = ",".join(f"{n}={view.value(n, 'qa_rougeL_recall')}" for n in view.names)
        return [f'<figure data-plot="from-conftest">{values}</figure>']


def pytest_unlearnbench_report(report, files):
    import json, pathlib
    pathlib.Path("hook.json").write_text(json.dumps({"html": str(files.html),
                                                     "checkpoints": sorted(report["checkpoints"])}))
''')
    result, report = run_suite(project, cache_dir, "--model", f"lm={smoke_lm_dir}")
    seen = json.loads((project.path / "hook.json").read_text())
    assert seen["checkpoints"] == ["lm"] and Path(seen["html"]).is_file()
    html = Path(seen["html"]).read_text()
    value = report["checkpoints"]["lm"]["suites"]["smoke"]["metrics"]["qa_rougeL_recall"]["value"]
    assert f'<figure data-plot="from-conftest">lm={value}</figure>' in html


def test_a_suite_without_zoo_checkpoints_says_it_needs_model(cache_dir, tmp_path, warm_python):
    """`pytest suites/utility` with no --model (the zoo has no lm-eval task) used to end 'no tests ran' (exit 5)
    with no word of why."""
    result = warm_python.run(["-m", "pytest", "suites/utility", "-rs", "-p", "no:cacheprovider",
                              "--cache-dir", str(cache_dir), "--report-dir", str(tmp_path / "reports")],
                             cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:]
    assert "1 skipped" in result.stdout
    assert "utility has no default checkpoints (the fixture zoo has none for it): give --model" in result.stdout


def test_a_first_run_trains_nothing_and_copies_the_shipped_zoo(project, tmp_path):
    """Issue 54: every zoo checkpoint a run evaluates ships, so a first run on
    an empty cache copies them (checked against their sha256 sums) and trains
    none: the same bytes on every machine."""
    from unlearnbench.fixtures import zoo

    cache = tmp_path / "empty-cache"
    result, report = run_suite(project, cache)
    assert report is not None, result.stdout.str()
    assert "training the fixture zoo" not in result.stderr.str()
    for name in ("smoke-lm", "smoke-untrained"):
        copy = zoo.checkpoint_dir(name, cache)
        assert (copy / "model.safetensors").read_bytes() == (zoo.SHIPPED_DIR / copy.name / "model.safetensors").read_bytes()
