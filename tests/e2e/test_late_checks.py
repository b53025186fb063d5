"""Checked at the start, in one line, never as a traceback after the work:
the report folder, every numeric suite option, UDS items with no findable
entity, an endpoint that replies null log-probs."""

from __future__ import annotations

import importlib
import json
import subprocess
from pathlib import Path

import pytest
from openai_server import StubServer, reply_json

from unlearnbench.errors import DataError
from unlearnbench.suites import SUITES

ROOT = Path(__file__).resolve().parents[2]


def _smoke_run(warm_python, tmp_path, *extra) -> subprocess.CompletedProcess:
    return warm_python.run(["-m", "pytest", "suites/smoke", "-p", "no:cacheprovider", "-q",
                            "--cache-dir", str(tmp_path / "cache"), *extra], cwd=ROOT, timeout=300)


@pytest.mark.parametrize("where", ["a file", "below a file"])
def test_a_report_dir_that_cannot_be_written_stops_the_run_before_any_work(tmp_path, where, warm_python):
    blocker = tmp_path / "reports.txt"
    blocker.write_text("not a folder")
    target = blocker if where == "a file" else blocker / "reports"
    run = _smoke_run(warm_python, tmp_path, "--report-dir", str(target))
    output = run.stdout + run.stderr
    assert run.returncode == 4, output
    assert f"ERROR: --report-dir {target}" in output and "Traceback" not in output
    assert "smoke suite" not in output  # no evaluation started
    assert blocker.read_text() == "not a folder"


def _default_params(suite: str) -> dict:
    module = importlib.import_module(SUITES[suite].loader.name.partition(":")[0])
    return getattr(module, "DEFAULT_PARAMS", {})


NUMERIC = [(suite, key) for suite in sorted(SUITES) for key, value in _default_params(suite).items()
           if isinstance(value, (int, float)) and not isinstance(value, bool)]


@pytest.mark.parametrize("suite, key", NUMERIC, ids=[f"{s}.{k}" for s, k in NUMERIC])
def test_every_numeric_suite_option_refuses_a_value_out_of_its_range(suite, key, cache_dir):
    from unlearnbench.fixtures import zoo

    data = zoo.data_dir(cache_dir)
    load = SUITES[suite].load_data
    integer = isinstance(_default_params(suite)[key], int)
    for bad in ("-2", "nan", "inf", *(("-1000", "2.5") if integer else ()), *(("1.5", "0") if key == "mink_k" else ())):
        with pytest.raises(DataError, match=rf"'{key}' must be .*, not"):
            load(str(data), {key: bad})


def test_a_negative_item_count_is_refused_not_one_item_fewer(cache_dir):
    from unlearnbench.fixtures import zoo
    from unlearnbench.suites.uds import data as uds

    with pytest.raises(DataError, match=r"'max_items' must be an integer >= 0 \(0 = all items\), not '-1'"):
        uds.load(str(zoo.data_dir(cache_dir)), {"max_items": "-1"})
    assert len(uds.load(str(zoo.data_dir(cache_dir)), {"max_items": "0"}).items) == len(
        uds.load(str(zoo.data_dir(cache_dir))).items)


def test_the_command_line_gives_one_error_line_for_an_option_out_of_range(tmp_path, warm_python):
    run = warm_python.run(["-m", "pytest", "suites/uds", "-p", "no:cacheprovider", "-q",
                           "--cache-dir", str(tmp_path / "cache"), "--suite-option", "uds.max_items=-1"],
                          cwd=ROOT, timeout=600)
    output = run.stdout + run.stderr
    assert run.returncode == 4 and "ERROR: data" in output and "'max_items' must be an integer >= 0" in output, output
    assert "Traceback" not in output


def test_uds_with_no_findable_entity_is_unavailable_with_the_count(random_llama, tmp_path):
    from unlearnbench.cache import DiskCache, SuiteMemo
    from unlearnbench.metrics.core import References, Unavailable
    from unlearnbench.suites.uds import metrics as uds
    from unlearnbench.suites.uds.data import DEFAULT_PARAMS, UDSData, UDSItem

    items = [UDSItem(str(i), "Q?", f"The answer is {city}.", "The answer is", "Atlantis")
             for i, city in enumerate(["Paris", "Rome", "Oslo"])]
    data = UDSData(items=items, params=dict(DEFAULT_PARAMS), fingerprint="x", source="test")
    refs = References(full=random_llama, retain=random_llama, memo=SuiteMemo(DiskCache(tmp_path), "uds", "x", 1))
    result = uds.evaluate(random_llama, data, refs)["uds"]
    assert isinstance(result, Unavailable)
    assert "0 of 3 items have a locatable entity span" in result.reason
    assert "entity not found in the reference answer" in result.reason


@pytest.fixture
def null_logprobs_server():
    def respond(handler, body: bytes) -> None:
        if handler.command == "GET":
            return reply_json(handler, 200, {"data": [{"id": "nulls"}]})
        prompts = json.loads(body)["prompt"]
        reply_json(handler, 200, {"choices": [{"index": i, "text": "", "logprobs": {"token_logprobs": [None] * len(p)}}
                                              for i, p in enumerate(prompts)]})

    server = StubServer(respond)
    yield f"openai:{server.origin}/v1#nulls"
    server.close()


def test_null_log_probs_from_an_endpoint_are_an_error_naming_the_field(null_logprobs_server, monkeypatch):
    from unlearnbench.backends import LoadSettings, backend_for
    from unlearnbench.openai_api import EndpointError

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    model = backend_for(null_logprobs_server).load_model(null_logprobs_server, name="nulls",
                                                         settings=LoadSettings(device="cpu"))
    with pytest.raises(EndpointError, match=r"nulls: .*logprobs\.token_logprobs.* null at position 1"):
        model.token_logprobs([[5, 6, 7, 8]], [1])


@pytest.mark.parametrize("option, value", [("--endpoint-timeout", "0"), ("--endpoint-timeout", "soon"),
                                           ("--checkpoint-deadline", "-1"), ("--checkpoint-deadline", "nan")])
def test_the_new_time_limits_are_checked_at_option_parsing(tmp_path, option, value, warm_python):
    run = _smoke_run(warm_python, tmp_path, option, value)
    output = run.stdout + run.stderr
    assert run.returncode == 4 and f"{option}: expected a positive number of seconds, not '{value}'" in output, output
    assert "Traceback" not in output
