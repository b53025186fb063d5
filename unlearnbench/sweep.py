"""`unlearnbench sweep --ray [ADDRESS] -- PYTEST_ARGS...`: a sweep spread over a
Ray cluster, one task per checkpoint, merged into one report.

Each task runs the same pytest session a plain `pytest PYTEST_ARGS` would, on
the one-checkpoint shard `--shard k/N` (N = the run's checkpoint count, see
shard.py), in a subprocess on whichever node Ray picks: a crash or an
out-of-memory kill costs that checkpoint alone. Before any task starts, a
collect-only pytest run here checks the arguments (bad input fails here, before
a model loads or the cluster is asked for anything) and lists the checkpoints.
The first task runs alone, so the reference models' work (full/retain scores,
UDS baselines) lands in the result cache once; the others then read it from
there. For that, `--cache-dir` must be a path every node sees (a shared file
system); otherwise each node recomputes the reference work, with the same
values. The working directory (the suites' folder) and the checkpoint paths
must exist at the same paths on every node, and every node's Python must have
unlearnbench installed.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from unlearnbench.errors import UnlearnbenchError

PLAN_ENV = "UNLEARNBENCH_SWEEP_PLAN"
# Variables a task's pytest needs from the driver's environment: Ray workers
# start with the raylet's, not the driver's.
FORWARDED_ENV_PREFIXES = ("UNLEARNBENCH_", "HF_", "TRANSFORMERS_", "OPENAI_", "TOKENIZERS_")
CONNECT_TIMEOUT_S = 5.0
DEFAULT_RAY_PORT = 6379
DEFAULT_CLIENT_PORT = 10001
OUTPUT_TAIL_CHARS = 4000


def pytest_collection_finish(session) -> None:
    """Preflight plugin (`-p unlearnbench.sweep`): write the run's checkpoints,
    their tests and where reports go to the file named by $UNLEARNBENCH_SWEEP_PLAN."""
    from unlearnbench.collect import checkpoint_spec_of
    from unlearnbench.suites import run_order

    target = os.environ.get(PLAN_ENV)
    state = session.config.pluginmanager.get_plugin("unlearnbench-state")
    if not target or state is None:
        return
    tests: dict[str, list[str]] = {}
    for item in session.items:
        spec = checkpoint_spec_of(item)
        if spec is not None:
            tests.setdefault(spec.name, []).append(item.nodeid)
    Path(target).write_text(
        json.dumps(
            {
                "order": run_order([s.name for s in state.options.models], state.options.zoo_extra),
                "tests": tests,
                "report_base": str(state.run_options.report_dir.resolve()),
            }
        )
    )


def plan(pytest_args: list[str], cwd: Path) -> dict:
    """Collect (no model loads) and return the plan; UnlearnbenchError with
    pytest's own message on bad input."""
    with tempfile.TemporaryDirectory() as scratch:
        target = Path(scratch) / "plan.json"
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                *pytest_args,
                "--collect-only",
                "-q",
                "-n",
                "0",
                "-p",
                "unlearnbench.sweep",
                "-p",
                "no:cacheprovider",
                "--no-progress",
            ],
            cwd=cwd,
            env={**os.environ, PLAN_ENV: str(target)},
            capture_output=True,
            text=True,
        )
        if done.returncode != 0 or not target.is_file():
            errors = [line for line in (done.stderr + done.stdout).splitlines() if line.startswith("ERROR")]
            detail = "; ".join(errors) or (done.stderr + done.stdout).strip()[-OUTPUT_TAIL_CHARS:]
            raise UnlearnbenchError(f"the pytest arguments do not make a run (pytest exit {done.returncode}): {detail}")
        out = json.loads(target.read_text())
    if not out["tests"]:
        raise UnlearnbenchError("the pytest arguments select no suite test: nothing to sweep")
    return out


def import_ray():
    try:
        import ray
    except ImportError:
        raise UnlearnbenchError("--ray needs Ray, which is not installed: pip install 'unlearnbench[ray]'") from None
    return ray


def check_reachable(address: str) -> None:
    """Fail in seconds on an address nothing answers at (ray.init would retry
    for a minute or more). 'local' starts a cluster here; 'auto' is Ray's own
    lookup (RAY_ADDRESS or a cluster started on this machine)."""
    if address in ("local", "auto"):
        return
    client = address.startswith("ray://")
    hostport = address.removeprefix("ray://")
    host, _, port_text = hostport.rpartition(":") if ":" in hostport else (hostport, "", "")
    try:
        port = int(port_text) if port_text else (DEFAULT_CLIENT_PORT if client else DEFAULT_RAY_PORT)
    except ValueError:
        raise UnlearnbenchError(f"--ray {address}: expected HOST:PORT or ray://HOST:PORT") from None
    try:
        with socket.create_connection((host.strip("[]"), port), timeout=CONNECT_TIMEOUT_S):
            pass
    except OSError as exc:
        raise UnlearnbenchError(f"--ray {address}: cannot reach a Ray cluster there ({exc})") from None


def run_checkpoint(name: str, shard: str, pytest_args: list[str], cwd: str, env: dict) -> dict:
    """One Ray task: the pytest session of one checkpoint, in a subprocess.
    Returns its report (read back here, so nodes need no shared report folder)."""
    with tempfile.TemporaryDirectory() as out:
        started = time.perf_counter()
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                *pytest_args,
                "--shard",
                shard,
                "--report-dir",
                out,
                "-p",
                "no:cacheprovider",
                "--no-progress",
            ],
            cwd=cwd,
            env={**os.environ, **env},
            capture_output=True,
            text=True,
        )
        found = [p for p in Path(out).glob("*/report.json") if p.parent.name != "latest"]
        return {
            "name": name,
            "exit_code": done.returncode,
            "seconds": round(time.perf_counter() - started, 1),
            "node": socket.gethostname(),
            "report": json.loads(found[0].read_text()) if found else None,
            "output_tail": (done.stdout + done.stderr)[-OUTPUT_TAIL_CHARS:],
        }


def _connect(ray, address: str) -> None:
    quiet = {"logging_level": logging.ERROR, "log_to_driver": False}
    try:
        if address == "local":
            ray.init(include_dashboard=False, **quiet)
        else:
            ray.init(address=address, **quiet)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise UnlearnbenchError(f"--ray {address}: {exc}") from None


def _progress(result: dict, done: int, total: int, started: float) -> str:
    summary = (result["report"] or {}).get("summary", {})
    counts = (
        ", ".join(
            f"{summary[k]} {k}" for k in ("passed", "failed", "inconclusive", "skipped", "errors") if summary.get(k)
        )
        or "no report: " + (result["output_tail"].strip().splitlines() or ["no output"])[-1][:200]
    )
    remaining = (time.perf_counter() - started) / done * (total - done)
    eta = f"ETA {remaining / 60:.1f} min" if done < total else "done"
    return f"[{done}/{total}] {result['name']}: {counts} in {result['seconds']} s on {result['node']}; {eta}"


def sweep(
    address: str,
    pytest_args: list[str],
    *,
    cpus_per_task: float = 1.0,
    gpus_per_task: float | None = None,
    out=sys.stdout,
) -> tuple[int, Path]:
    """Run the sweep; returns (exit status as pytest's, merged report.json)."""
    from unlearnbench.report.merge import merge_reports
    from unlearnbench.report.model import Report
    from unlearnbench.report.schema import add_lost, new_report, write_outputs
    from unlearnbench.report.text import path_lines, verdict_lines
    from unlearnbench.shard import Shard

    if any(a == "--shard" or a.startswith("--shard=") for a in pytest_args):
        raise UnlearnbenchError(
            "--shard and --ray split the same sweep twice: give one (Ray runs one task per checkpoint)"
        )
    ray = import_ray()
    check_reachable(address)
    cwd = Path.cwd()
    run_plan = plan(pytest_args, cwd)
    names = list(run_plan["tests"])
    order = run_plan["order"]
    _connect(ray, address)
    try:
        if gpus_per_task is None:
            gpus_per_task = 1.0 if ray.cluster_resources().get("GPU", 0) > 0 else 0.0
        task = ray.remote(run_checkpoint).options(num_cpus=cpus_per_task, num_gpus=gpus_per_task, max_retries=1)
        env = {k: v for k, v in os.environ.items() if k.startswith(FORWARDED_ENV_PREFIXES)}

        submitted = {}

        def submit(name: str):
            ref = task.remote(name, str(Shard.of(name, order)), pytest_args, str(cwd), env)
            submitted[ref] = name
            return ref

        def result_of(ref) -> dict:
            try:
                return ray.get(ref)
            except Exception as exc:  # the task itself died (node lost, OOM-killed worker): that checkpoint only
                first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                return {
                    "name": submitted[ref],
                    "exit_code": None,
                    "seconds": None,
                    "node": None,
                    "report": None,
                    "output_tail": f"Ray task failed: {first}",
                }

        started = time.perf_counter()
        results = [result_of(submit(names[0]))]  # alone: the reference work is computed once, into the cache
        print(_progress(results[0], 1, len(names), started), file=out, flush=True)
        pending = [submit(name) for name in names[1:]]
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            results.append(result_of(ready[0]))
            print(_progress(results[-1], len(results), len(names), started), file=out, flush=True)
    finally:
        ray.shutdown()

    reports = [(f"ray:{r['name']}", Report.of(r["report"], f"ray:{r['name']}")) for r in results if r["report"]]
    merged = merge_reports(reports) if reports else new_report({})
    run_id = time.strftime("%Y%m%d-%H%M%S") + "-ray-" + os.urandom(3).hex()
    directory = Path(run_plan["report_base"]) / run_id
    merged["run"].update(
        {
            "id": run_id,
            "directory": str(directory),
            "cwd": str(cwd),
            "command": ["unlearnbench", "sweep", "--ray", address, "--", *pytest_args],
            "ray": {
                r["name"]: {"node": r["node"], "seconds": r["seconds"], "exit_code": r["exit_code"]} for r in results
            },
        }
    )
    for r in results:
        if r["report"] is None:
            last = r["output_tail"].strip().splitlines()[-1:] or ["no output"]
            add_lost(
                merged,
                r["name"],
                f"its pytest run wrote no report (exit {r['exit_code']}): {last[0]}",
                run_plan["tests"][r["name"]],
            )
    files = write_outputs(merged, directory)
    print("\n".join([*verdict_lines(merged), "", *path_lines(files)]), file=out, flush=True)
    return _exit_status([r["exit_code"] for r in results], lost=any(r["report"] is None for r in results)), files.json


def _exit_status(codes: list[int], *, lost: bool) -> int:
    """pytest's meaning: 0 all passed, 1 some test failed (or a checkpoint was
    lost), else the worst other status a task's pytest returned."""
    if lost or 1 in codes:
        return 1
    return max((c for c in codes if c is not None), default=0)
