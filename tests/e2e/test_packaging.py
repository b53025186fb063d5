"""The wheel (issue 44): built from the tree, it holds every registered
suite's modules, default gate, thin test file and data, and from it alone a
repository of the user's own runs a suite after `unlearnbench init`; there,
editing thresholds/<suite>.yaml changes the gate."""

from __future__ import annotations

import configparser
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """Built from a copy of the tree: setuptools reuses a checkout's build/, which can hold what the
    packaging no longer (or never) declares."""
    tree, out = tmp_path_factory.mktemp("tree") / "unlearnbench", tmp_path_factory.mktemp("wheel")
    shutil.copytree(ROOT, tree, ignore=shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info",
                                                             "reports", "site", "__pycache__", ".hypothesis"))
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", str(tree), "--no-deps", "--no-build-isolation",
                            "-q", "-w", str(out)], capture_output=True, text=True, cwd=out)
    assert build.returncode == 0, build.stderr[-3000:]
    [path] = out.glob("unlearnbench-*.whl")
    return path


def test_the_wheel_holds_every_suite_its_gate_its_test_file_and_its_data(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    [entry_points] = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    parser = configparser.ConfigParser()
    parser.read_string(zipfile.ZipFile(wheel).read(entry_points).decode())
    suites = dict(parser["unlearnbench.suites"])
    assert {"wmdp", "utility", "dusk", "smoke"} <= set(suites)  # wmdp and utility were left out before
    for suite, target in suites.items():
        package = target.split(":")[0].replace(".", "/")
        modules = {f"{package}/{p.name}" for p in (ROOT / package).glob("*.py")}
        assert f"{package}/__init__.py" in modules and modules <= names, (suite, modules - names)
        assert f"unlearnbench/defaults/thresholds/{suite}.yaml" in names, suite
        assert f"unlearnbench/defaults/suites/{suite}/test_{suite}.py" in names, suite
        assert f"unlearnbench/defaults/suites/{suite}/__init__.py" in names, suite  # a package: --pyargs finds it
    # Every module of the package (the zoo's included), and the smoke suite's built-in data.
    code = {f"unlearnbench/{p.relative_to(ROOT / 'unlearnbench').as_posix()}" for p in (ROOT / "unlearnbench").rglob("*.py")}
    assert "unlearnbench/fixtures/zoo.py" in code
    assert code <= names, sorted(code - names)
    assert {"unlearnbench/fixtures/smoke/qa.jsonl", "unlearnbench/fixtures/smoke/texts.jsonl"} <= names
    # The zoo's shipped bases: a first run from the wheel trains only the short recipes too.
    shipped = {f"unlearnbench/{p.relative_to(ROOT / 'unlearnbench').as_posix()}"
               for p in (ROOT / "unlearnbench" / "fixtures" / "shipped").rglob("*") if p.is_file()}
    assert len(shipped) >= 2 * 5 and shipped <= names, sorted(shipped - names)


def test_init_from_the_wheel_makes_a_repository_that_runs_a_suite_and_owns_its_gate(wheel, tmp_path, smoke_lm_dir,
                                                                                      cache_dir):
    unpacked = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(unpacked)
    env = {**os.environ, "PYTHONPATH": str(unpacked)}  # the wheel's code before the checkout's editable install
    repo = tmp_path / "my-gates"

    def run(*args: str, cwd: Path = repo) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=600)

    made = run("-m", "unlearnbench.cli", "init", str(repo), "--suite", "smoke", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert (repo / "suites" / "smoke" / "test_smoke.py").is_file() and not (repo / "conftest.py").exists()
    gate = repo / "thresholds" / "smoke.yaml"
    assert "rationale:" in gate.read_text() and "#" in gate.read_text()  # comments and rationales kept

    # Options as --opt=value: pytest takes bare path arguments into its choice of rootdir (the reports' folder).
    args = ("-m", "pytest", "suites/smoke", f"--model=lm={smoke_lm_dir}", "-p", "no:cacheprovider",
            f"--cache-dir={cache_dir}", "--no-progress")
    first = run(*args)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    report = json.loads((repo / "reports" / "latest" / "report.json").read_text())
    assert report["run"]["thresholds_files"]["smoke"] == str(gate)
    origin = run("-c", "import unlearnbench; print(unlearnbench.__file__)")
    assert origin.stdout.strip().startswith(str(unpacked))  # the wheel's code ran, not the checkout's

    # The repository's gate is the one judged: a bound no model reaches fails the run.
    gate.write_text(gate.read_text().replace("bound: -4.0", "bound: 0.0"))
    second = run(*args)
    assert second.returncode == 1, second.stdout[-3000:]
    again = run("-m", "unlearnbench.cli", "init", str(repo), "--suite", "smoke", cwd=tmp_path)
    assert "kept" in again.stdout and "bound: 0.0" in gate.read_text()  # not overwritten without --force
    forced = run("-m", "unlearnbench.cli", "init", str(repo), "--suite", "smoke", "--force", cwd=tmp_path)
    assert forced.returncode == 0 and "bound: -4.0" in gate.read_text()

    # The wheel's `unlearnbench site` over the two runs: one gate bound changed between them, so the runs are
    # two comparable settings, and the site says which bound differs.
    published = run("-m", "unlearnbench.cli", "site", "reports", "-o", str(tmp_path / "leaderboard"))
    assert published.returncode == 0, published.stderr
    board = json.loads((tmp_path / "leaderboard" / "leaderboard.json").read_text())
    assert len(board["runs"]) == 2 and len(board["groups"]) == 2
    assert "check fluent_on_reference_texts: bound" in board["groups"][1]["differs"]["smoke"][0]
    assert (tmp_path / "leaderboard" / "index.html").is_file()


def test_pyargs_runs_a_packaged_suite_from_any_folder_with_its_default_gate(wheel, tmp_path, smoke_lm_dir, cache_dir):
    unpacked = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(unpacked)
    anywhere = tmp_path / "anywhere"
    anywhere.mkdir()
    run = subprocess.run([sys.executable, "-m", "pytest", "--pyargs", "unlearnbench.defaults.suites.smoke",
                          f"--model=lm={smoke_lm_dir}", f"--cache-dir={cache_dir}", "-p", "no:cacheprovider",
                          "--no-progress"], capture_output=True, text=True, cwd=anywhere, timeout=600,
                         env={**os.environ, "PYTHONPATH": str(unpacked)})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    report = json.loads((anywhere / "reports" / "latest" / "report.json").read_text())  # ./reports of this folder
    assert report["run"]["thresholds_files"]["smoke"] == str(unpacked / "unlearnbench" / "defaults" / "thresholds"
                                                          / "smoke.yaml")
    assert report["checkpoints"]["lm"]["suites"]["smoke"]["checks"]["fluent_on_reference_texts"]["outcome"] == "pass"
