"""A hung or slow server never holds a run hostage: --endpoint-timeout,
--checkpoint-deadline and Ctrl-C end that checkpoint's work in seconds,
fail its checks with the reason, and keep every other checkpoint's results
in a report that is always written. Real runs (`pytest suites/smoke` in a
subprocess) against servers on 127.0.0.1: one answers from a zoo model, one
lists its model and then never answers a completion."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from openai_server import CompletionsServer, StubServer, reply_json

ROOT = Path(__file__).resolve().parents[2]


class HungServer:
    """Lists one model, then holds every POST open until closed."""

    def __init__(self, served: str = "hung"):
        self.posted = threading.Event()
        self.release = threading.Event()

        def respond(handler, _body) -> None:
            if handler.command == "GET":
                return reply_json(handler, 200, {"data": [{"id": served, "root": "/nowhere"}]})
            self.posted.set()
            self.release.wait(120)

        self.stub = StubServer(respond)
        self.source = f"openai:{self.stub.origin}/v1#{served}"

    def close(self):
        self.release.set()
        self.stub.close()


@pytest.fixture(scope="module")
def answering(smoke_lm_dir):
    server = CompletionsServer(smoke_lm_dir, "smoke-a")
    yield server
    server.close()


@pytest.fixture
def hung():
    server = HungServer()
    yield server
    server.close()


def _command(tmp_path, answering, hung, smoke_lm_dir, *extra) -> list[str]:
    return ["-m", "pytest", "suites/smoke", "-p", "no:cacheprovider", "-q", "--no-progress",
            "--cache-dir", str(tmp_path / "cache"), "--report-dir", str(tmp_path / "reports"),
            "--model", f"a=openai:{answering.url}#smoke-a", "--tokenizer", f"a={smoke_lm_dir}",
            "--model", f"b={hung.source}", "--tokenizer", f"b={smoke_lm_dir}", *extra]


def _report(tmp_path) -> dict:
    return json.loads((tmp_path / "reports" / "latest" / "report.json").read_text())


def _checks(report: dict, name: str) -> dict:
    return report["checkpoints"][name]["suites"]["smoke"]["checks"]


@pytest.mark.parametrize("limit, reason", [(["--endpoint-timeout", "2"], "timed out after 2 s"),
                                           (["--checkpoint-deadline", "20"], "--checkpoint-deadline")])
def test_a_hung_server_fails_its_checkpoint_in_seconds_and_the_others_keep_their_results(
        tmp_path, answering, hung, smoke_lm_dir, limit, reason, warm_python):
    # The deadline applies to every checkpoint: 20 s leaves `a` (a few seconds) room on a loaded machine.
    env = {**os.environ, "OPENAI_API_KEY": ""}
    # A later option wins: each case sets the limit it tests, the other is 600 s.
    run = warm_python.run(_command(tmp_path, answering, hung, smoke_lm_dir, "--endpoint-timeout", "600", *limit),
                          cwd=ROOT, timeout=240, env=env)
    output = run.stdout + run.stderr
    assert run.returncode == 1, output  # b's checks failed; not a usage error, not a crash
    report = _report(tmp_path)
    assert report["checkpoints"]["a"]["suites"]["smoke"]["metrics"]["mean_token_logprob"]["value"] < 0
    assert all(v["outcome"] != "error" for v in _checks(report, "a").values())
    evaluated = [v for v in _checks(report, "b").values() if v["outcome"] != "skip"]  # skip: no --full-model
    assert evaluated and all(v["outcome"] == "error" and reason in v["reason"] for v in evaluated), evaluated
    assert hung.posted.is_set()


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one process", "xdist"])
def test_ctrl_c_stops_the_run_and_writes_a_report_marked_interrupted(tmp_path, answering, hung, smoke_lm_dir, workers,
                                                                     warm_python):
    # Under xdist only the controller sees Ctrl-C; its workers must stop too.
    env = {**os.environ, "OPENAI_API_KEY": "", "PYTHONUNBUFFERED": "1"}
    process = warm_python.start(_command(tmp_path, answering, hung, smoke_lm_dir, "--endpoint-timeout", "600", *workers),
                                cwd=ROOT, env=env, merge_stderr=True)
    try:
        assert hung.posted.wait(180), "the run never reached the hung checkpoint"
        time.sleep(2)  # under xdist the controller takes over Ctrl-C once it has seen a suite test start
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 2, output  # pytest's "interrupted"
    assert "Ctrl-C" in output and "report:" in output
    report = _report(tmp_path)
    assert report["run"]["interrupted"] is True
    assert all(v["outcome"] != "error" for v in _checks(report, "a").values())  # finished before: kept
    evaluated = [v for v in _checks(report, "b").values() if v["outcome"] != "skip"]
    assert evaluated and all(v["outcome"] == "error" and "interrupted" in v["reason"] for v in evaluated), evaluated
