"""Issue 14: `unlearnbench sweep --ray` on a real local Ray cluster (started
here on 127.0.0.1, stopped after) gives the report a plain pytest run gives;
bad input fails in seconds with one line, before a model loads."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.conftest import comparable_report, require

# A local Ray cluster, one at a time on the machine (its tests share a worker: tests/conftest.py).
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
# A cluster on loopback started by the test: no usage reports, no token auth
# (the driver would need the token Ray writes to ~/.ray, shared by every test run).
RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}


def _ray_cli() -> str:
    return str(Path(sys.executable).with_name("ray"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ray_cluster():
    """A one-node Ray cluster with 2 CPUs on loopback; its address. One at a
    time on the machine (under `-n 2` the other worker waits here): `ray
    stop` ends every Ray process of the user, another worker's cluster too."""
    try:
        import ray  # noqa: F401
    except ImportError:
        require(False, "Ray", "pip install 'unlearnbench[ray]'")
    from unlearnbench.cache import file_lock

    port = _free_port()
    env = {**os.environ, **RAY_ENV}
    with file_lock(Path(tempfile.gettempdir()) / "unlearnbench-tests-ray.lock"):
        # Ray's default temp dir: the driver finds the cluster's auth token there.
        subprocess.run([_ray_cli(), "start", "--head", "--node-ip-address=127.0.0.1", f"--port={port}",
                        "--num-cpus=2", "--include-dashboard=false", "--disable-usage-stats"],
                       env=env, check=True, capture_output=True)
        try:
            yield f"127.0.0.1:{port}"
        finally:
            subprocess.run([_ray_cli(), "stop", "--force"], env=env, capture_output=True)


@pytest.fixture
def project(tmp_path):
    for suite in ("smoke", "uds"):
        shutil.copytree(ROOT / "suites" / suite, tmp_path / "suites" / suite)
    shutil.copytree(ROOT / "thresholds", tmp_path / "thresholds")
    return tmp_path


def _unlearnbench(python, args: list[str], cwd: Path, timeout: int = 900) -> subprocess.CompletedProcess:
    return python.run(["-m", "unlearnbench.cli", *args], cwd=cwd, env={**os.environ, **RAY_ENV}, timeout=timeout)


def _only_report(directory: Path) -> dict:
    [path] = [p for p in directory.glob("*/report.json") if p.parent.name != "latest"]
    return json.loads(path.read_text())


def test_a_ray_sweep_gives_the_one_run_report(ray_cluster, project, cache_dir, zoo_family, tmp_path, warm_python):
    from unlearnbench.fixtures import zoo

    models = [a for name in ("ga", "npo", "idknll") for a in ("--model", f"{name}={zoo_family[name]}")]
    # UDS: reference work (the full and retain models' patching baselines) at a fraction of DUSK's generation.
    common = ["suites/smoke", "suites/uds", *models, "--full-model", str(zoo_family["full"]),
              "--retain-model", str(zoo_family["retain"]), "--data-dir", f"uds={zoo.data_dir(cache_dir)}",
              "--suite-option", "uds.max_items=16"]  # the first 16 items: a sweep's bookkeeping, not the data, is tested
    # Fresh result caches: neither run may read the other's results.
    serial = warm_python.run(["-m", "pytest", *common, "-n", "0", "-p", "no:cacheprovider",
                              "--cache-dir", str(tmp_path / "cache-serial"), "--report-dir", str(tmp_path / "serial")],
                             cwd=project)
    assert serial.returncode == 1, serial.stdout[-3000:]  # the zoo's under-forgetting recipes fail the UDS check
    swept = _unlearnbench(warm_python, ["sweep", "--ray", ray_cluster, "--", *common, "--cache-dir",
                                        str(tmp_path / "cache-ray"), "--report-dir", str(tmp_path / "ray")], cwd=project)
    assert swept.returncode == 1, swept.stdout[-3000:] + swept.stderr[-3000:]

    whole, merged = _only_report(tmp_path / "serial"), _only_report(tmp_path / "ray")
    assert set(merged["checkpoints"]) == {"ga", "npo", "idknll"}
    assert comparable_report(merged) == comparable_report(whole)
    assert merged["summary"] == whole["summary"]
    assert (tmp_path / "ray" / merged["run"]["id"] / "report.html").is_file()
    # The reference work was done once (by the first task, alone), not once per task.
    assert merged["run"]["cache"]["misses"] == whole["run"]["cache"]["misses"]
    assert merged["run"]["cache"]["hits"] > 0
    # One progress line per finished checkpoint, the last one done.
    progress = re.findall(r"^\[(\d)/3\] (\w+): .* in [\d.]+ s on \S+; (ETA [\d.]+ min|done)$", swept.stdout, re.M)
    assert [p[0] for p in progress] == ["1", "2", "3"] and progress[-1][2] == "done"
    assert sorted(p[1] for p in progress) == ["ga", "idknll", "npo"]


def test_an_unreachable_ray_address_fails_in_seconds(project, warm_python):
    port = _free_port()  # closed again: nothing listens there
    result = _unlearnbench(warm_python, ["sweep", "--ray", f"127.0.0.1:{port}", "--", "suites/smoke"], cwd=project, timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip() == (f"unlearnbench: error: --ray 127.0.0.1:{port}: cannot reach a Ray cluster "
                                     "there ([Errno 111] Connection refused)")


def test_ray_missing_is_one_line_naming_the_extra(project, warm_python):
    code = ("import sys; sys.modules['ray'] = None; from unlearnbench.cli import main; "
            "sys.exit(main(['sweep', '--ray', '--', 'suites/smoke']))")
    result = warm_python.run(["-c", code], cwd=project, timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip() == ("unlearnbench: error: --ray needs Ray, which is not installed: "
                                     "pip install 'unlearnbench[ray]'")


@pytest.mark.parametrize("pytest_args, message", [
    (["suites/smoke", "--model", "/no/such/checkpoint"], "checkpoint /no/such/checkpoint: "),
    (["suites/smoke", "--shard", "0/2"], "--shard and --ray split the same sweep twice"),
    (["suites/nothing-here"], "the pytest arguments do not make a run"),
])
def test_bad_sweep_arguments_fail_before_ray_starts(project, pytest_args, message, warm_python):
    # Starting Ray is replaced by an exit with another message: a run that got
    # that far would not print the expected one.
    code = ("import sys, unlearnbench.sweep as s; s._connect = lambda *a: sys.exit('ray was started'); "
            f"from unlearnbench.cli import main; sys.exit(main(['sweep', '--ray', '--', *{pytest_args!r}]))")
    result = warm_python.run(["-c", code], cwd=project, timeout=300)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


CRASH_PLUGIN = '''
import os

def pytest_runtest_call(item):
    if item.nodeid.endswith("[crash]"):
        os._exit(3)  # the task's pytest dies as on a segfault or the OOM killer
'''


def test_a_checkpoint_whose_task_dies_costs_only_itself(ray_cluster, project, cache_dir, smoke_lm_dir,
                                                         smoke_untrained_dir, tmp_path, warm_python):
    (project / "crashplugin.py").write_text(CRASH_PLUGIN)
    crash = shutil.copytree(smoke_lm_dir, tmp_path / "crash")
    common = ["suites/smoke", "--model", f"lm={smoke_lm_dir}", "--model", f"crash={crash}",
              "--model", f"untrained={smoke_untrained_dir}", "-p", "crashplugin"]
    serial = warm_python.run(["-m", "pytest", "suites/smoke", "--model", f"lm={smoke_lm_dir}",
                              "--model", f"untrained={smoke_untrained_dir}", "-p", "no:cacheprovider",
                              "--cache-dir", str(tmp_path / "cache-serial"), "--report-dir", str(tmp_path / "serial")],
                             cwd=project)
    assert serial.returncode == 1, serial.stdout[-2000:]
    swept = _unlearnbench(warm_python, ["sweep", "--ray", ray_cluster, "--", *common, "--cache-dir",
                                        str(tmp_path / "cache-ray"), "--report-dir", str(tmp_path / "ray")], cwd=project)
    assert swept.returncode == 1, swept.stdout[-3000:] + swept.stderr[-3000:]
    merged = _only_report(tmp_path / "ray")
    lost = merged["checkpoints"]["crash"]["lost"]
    assert lost["reason"].startswith("its pytest run wrote no report (exit 3)")
    assert len(lost["tests"]) == 3 and merged["summary"]["errors"] == 3
    # The other checkpoints' values and verdicts are those of a run without the crashing one.
    survivors = {k: v for k, v in comparable_report(merged).items() if k[0] != "crash"}
    assert survivors == comparable_report(_only_report(tmp_path / "serial"))
    assert re.search(r"^\[\d/3\] crash: no report: ", swept.stdout, re.M), swept.stdout
    assert (tmp_path / "ray" / merged["run"]["id"] / "report.html").is_file()
