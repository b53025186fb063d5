"""Issue 13: a broken checkpoint, a broken yardstick or a misread input costs
only itself, with one clear message; nothing a shared machine holds can run code."""

from __future__ import annotations

import json
import math
import os
import pickle
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from conftest import nan_checkpoint
from unlearnbench.errors import CheckpointError, UnlearnbenchError
from unlearnbench.rule import DecisionRule
from unlearnbench.metrics.core import MetricResult
from unlearnbench.thresholds import Check


def test_non_finite_logits_are_an_error_of_the_checkpoint_at_the_first_forward(random_llama_dir, tmp_path):
    from unlearnbench.errors import NonFiniteOutputError
    from unlearnbench.models.handle import ModelHandle

    handle = ModelHandle.load(str(nan_checkpoint(random_llama_dir, tmp_path / "nan")), device="cpu", name="nan")
    for call in (lambda: handle.token_logprobs([[1, 5, 6, 7]], [1]),
                 lambda: handle.generate(["the capital of"], max_new_tokens=3),
                 lambda: handle.next_token(["the capital of"])):
        with pytest.raises(NonFiniteOutputError, match=r"^checkpoint nan: non-finite logits \(NaN\) in the first "
                                                       r"forward pass: the weights are broken"):
            call()


def test_a_healthy_left_padded_batch_is_not_called_non_finite(random_llama):
    # Padding rows attend to nothing; only real positions are checked.
    prompts = ["a", "the capital of the country is a long prompt here"]
    assert len(random_llama.generate(prompts, max_new_tokens=2)) == 2


def test_the_report_writer_turns_non_finite_numbers_into_null_with_the_reason(tmp_path):
    from unlearnbench.report.schema import new_report, write_outputs

    report = new_report({"id": "x", "directory": str(tmp_path)})
    report["checkpoints"]["nan"] = {"info": {"name": "nan"}, "suites": {"dusk": {
        "data": {}, "timings": {}, "checks": {},
        "metrics": {"m": {"name": "m", "value": float("nan"), "ci": [float("-inf"), 1.0], "n": 3}}}}}
    files = write_outputs(report, tmp_path)
    written = json.loads(files.json.read_text())
    metric = written["checkpoints"]["nan"]["suites"]["dusk"]["metrics"]["m"]
    assert metric["value"] is None and metric["ci"] == [None, 1.0]
    assert {"path": "checkpoints.nan.suites.dusk.metrics.m.value", "was": "nan"} in written["non_finite"]
    assert {"path": "checkpoints.nan.suites.dusk.metrics.m.ci.0", "was": "-inf"} in written["non_finite"]
    assert files.html.is_file() and files.markdown.is_file() and "nan" in files.csv.read_text()


def result(value, ci=None, per_item=None):
    return MetricResult("m", value, 10, ci or (value - 0.01, value + 0.01), True, per_item=per_item or {})


def kept_check(**extra):
    return Check(suite="dusk", name="kept", metric="m", direction="at_least", rationale="r", source="t.yaml",
                 relative_to="retain", margin=0.05, **extra)


def test_a_relative_bound_at_the_floor_of_the_scale_is_inconclusive_not_a_pass():
    # Retain answers nothing: bound 0 - 0.05 < 0, so no checkpoint could fail.
    verdict = kept_check(scale=(0.0, 1.0)).judge({"m": result(0.0)}, {"m": result(0.0)})
    assert verdict.outcome == "inconclusive"
    assert "no checkpoint could fail" in verdict.reason and "icl_shots" in verdict.reason
    # A ceiling where none could pass: at_most with a bound under the floor.
    ceiling = Check(suite="dusk", name="gone", metric="m", direction="at_most", rationale="r", source="t.yaml",
                    bound=-0.1, scale=(0.0, 1.0))
    assert ceiling.judge({"m": result(0.0)}).outcome == "inconclusive"
    # The same check with a yardstick that answers: judged.
    assert kept_check(scale=(0.0, 1.0)).judge({"m": result(0.6)}, {"m": result(0.6)}).outcome == "pass"
    assert kept_check(scale=(0.0, 1.0)).judge({"m": result(0.1)}, {"m": result(0.6)}).outcome == "fail"


def test_a_yardstick_that_answers_too_few_items_is_inconclusive():
    answered = {f"q{i}": (1.0 if i < 1 else 0.0) for i in range(10)}  # 1 of 10 answered
    check = kept_check(requires={"reference_answers_at_least": 0.2})
    verdict = check.judge({"m": result(0.5)}, {"m": result(0.1, per_item=answered)})
    assert verdict.outcome == "inconclusive" and "answers 10% of the items" in verdict.reason
    answered = {f"q{i}": (1.0 if i < 3 else 0.0) for i in range(10)}
    # Enough answered: judged (on the value here; 10 items would not decide the interval rule's verdict).
    point = DecisionRule(point_estimate=True)
    assert check.judge({"m": result(0.5)}, {"m": result(0.3, per_item=answered)}, rule=point).outcome == "pass"


def test_full_and_retain_indistinguishable_on_a_forget_metric_is_inconclusive():
    check = Check(suite="dusk", name="forgotten", metric="m", direction="at_most", rationale="r", source="t.yaml",
                  relative_to="retain", margin=0.05, requires={"separated_from": "full"})
    overlapping = check.judge({"m": result(0.9)}, {"m": result(0.3, (0.1, 0.5))},
                              others={"full": {"m": result(0.4, (0.3, 0.6))}})
    assert overlapping.outcome == "inconclusive" and "interval of their difference" in overlapping.reason
    # The advice fits the reason: data the full model answers, not the dusk suite's in-context examples.
    assert "needs data the full model answers better than the retain model" in overlapping.reason
    assert "icl_shots" not in overlapping.reason
    separated = check.judge({"m": result(0.9)}, {"m": result(0.3, (0.1, 0.5))},
                            others={"full": {"m": result(0.8, (0.7, 0.9))}})
    assert separated.outcome == "fail"


def test_strict_ci_turns_inconclusive_into_a_failure():
    verdict = kept_check(scale=(0.0, 1.0)).judge({"m": result(0.0)}, {"m": result(0.0)},
                                                 rule=DecisionRule(strict=True))
    assert verdict.outcome == "fail" and "inconclusive" in verdict.reason


def test_a_non_finite_value_never_reaches_a_verdict_as_a_number():
    check = Check(suite="s", name="c", metric="m", direction="at_least", rationale="r", source="t.yaml", bound=0.1)
    verdict = check.judge({"m": result(float("nan"), (float("nan"), float("nan")))})
    assert verdict.outcome == "fail" and verdict.value is None and "not a finite number" in verdict.reason
    relative = kept_check().judge({"m": result(0.5)}, {"m": result(float("inf"), (0.0, float("inf")))})
    assert relative.outcome == "fail" and relative.bound is None and "retain" in relative.reason


def test_thresholds_schema_validates_requires(tmp_path):
    from unlearnbench.errors import ThresholdsError
    from unlearnbench.thresholds import load_suite_thresholds

    path = tmp_path / "dusk.yaml"
    path.write_text("suite: dusk\nchecks:\n  kept:\n    metric: sk_rougeL_recall\n    direction: at_least\n"
                    "    relative_to: retain\n    rationale: r\n    requires: {reference_answers_at_least: 1.5}\n")
    with pytest.raises(ThresholdsError, match="reference_answers_at_least.*between 0 and 1"):
        load_suite_thresholds(path, "dusk", ("sk_rougeL_recall",))
    path.write_text(path.read_text().replace("reference_answers_at_least: 1.5", "separated_from: retain"))
    with pytest.raises(ThresholdsError, match="separated_from.*must name the other reference"):
        load_suite_thresholds(path, "dusk", ("sk_rougeL_recall",))


# ------------------------------------------------------------------ inputs
def test_a_path_holding_an_equals_sign_is_not_split_into_a_name():
    from unlearnbench.models.checkpoint import CheckpointSpec

    spec = CheckpointSpec.parse("/data/lr=3e-4/ckpt")
    assert (spec.name, spec.source) == ("ckpt", "/data/lr=3e-4/ckpt")
    spec = CheckpointSpec.parse("runs/lr=3e-4")
    assert (spec.name, spec.source) == ("lr=3e-4", "runs/lr=3e-4")
    assert CheckpointSpec.parse("ga-v2=/data/lr=3e-4/ckpt") == CheckpointSpec("ga-v2", "/data/lr=3e-4/ckpt")
    assert CheckpointSpec.parse("hf:org/model").name == "model"


def test_a_missing_local_path_never_turns_into_a_download(monkeypatch):
    import huggingface_hub

    from unlearnbench.models import checkpoint

    def download(*_args, **_kwargs):
        raise AssertionError("a missing path was sent to the Hub")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", download)
    with pytest.raises(CheckpointError, match="no such file or directory.*hf:ORG/NAME"):
        checkpoint.resolve("3e-4/ckpt")
    with pytest.raises(CheckpointError, match="no such file or directory"):
        checkpoint.resolve("meta-llama/Llama-3.2-1B")


def test_fail_on_regression_rejects_non_finite_deltas():
    from unlearnbench.report.baseline import RegressionRule

    for text in ("m:nan", "m:inf", "dusk.m:-inf"):
        with pytest.raises(UnlearnbenchError, match="finite"):
            RegressionRule.parse(text)


def test_a_latest_that_is_a_real_directory_does_not_lose_the_report(tmp_path):
    from unlearnbench.report.schema import new_report, write_outputs

    (tmp_path / "latest").mkdir()
    (tmp_path / "latest" / "mine.txt").write_text("the user's file")
    report = new_report({"id": "run1", "directory": str(tmp_path / "run1")})
    files = write_outputs(report, tmp_path / "run1")
    assert json.loads(files.json.read_text())["run"]["id"] == "run1"
    assert (tmp_path / "latest" / "mine.txt").read_text() == "the user's file"  # never deleted
    assert (tmp_path / "latest.txt").read_text().strip() == "run1"


# ---------------------------------------------------------- shared machine
def test_cache_entries_are_json_and_npy_never_pickle(tmp_path):
    import numpy as np

    from unlearnbench.cache import DiskCache

    cache = DiskCache(tmp_path)
    value = {"scores": np.arange(6, dtype=np.float32).reshape(2, 3), "names": ["a", "b"], "pair": (1, 2.5),
             "nested": {"x": [np.float64(0.25), None, True]}, "int_keys": {3: "c"}}
    assert cache.get_or_compute({"op": "t"}, lambda: value) is value
    fresh = DiskCache(tmp_path)
    found, loaded = fresh.lookup({"op": "t"})
    assert found
    np.testing.assert_array_equal(loaded["scores"], value["scores"])
    assert loaded["scores"].dtype == np.float32
    assert loaded["names"] == ["a", "b"] and loaded["pair"] == (1, 2.5) and loaded["int_keys"] == {3: "c"}
    assert loaded["nested"] == {"x": [0.25, None, True]}
    for entry in (tmp_path / "results").rglob("*"):
        if entry.is_file() and not entry.name.endswith(".lock"):
            assert b"\x80\x04\x95" not in entry.read_bytes() and b"\x80\x05\x95" not in entry.read_bytes()


class _Trap:
    def __reduce__(self):
        return (os.system, (f"touch {_Trap.marker}",))


def test_a_pickle_planted_in_the_cache_is_never_loaded(tmp_path):
    import hashlib

    from unlearnbench.cache import DiskCache, cache_key

    cache = DiskCache(tmp_path)
    _Trap.marker = tmp_path / "pwned"
    parts = {"op": "planted"}
    cache.get_or_compute(parts, lambda: {"v": 1})
    entry = next(p for p in (tmp_path / "results").rglob(f"{cache_key(parts)}*") if not p.name.endswith(".lock"))
    # Old-format entry: magic, checksum, pickle: a valid-looking entry that runs code when unpickled.
    payload = pickle.dumps({"parts": parts, "value": _Trap()})
    entry.write_bytes(b"UNLEARNBENCH-CACHE-1\n" + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)
    found, _ = DiskCache(tmp_path).lookup(parts)
    assert not found and not _Trap.marker.exists()


def test_fingerprint_memo_keeps_every_concurrent_update(tmp_path):
    import multiprocessing

    files = []
    for i in range(8):
        files.append(tmp_path / f"w{i}.bin")
        files[-1].write_bytes(os.urandom(1 << 16))
    memo = tmp_path / "fingerprints.json"
    with multiprocessing.get_context("fork").Pool(8) as pool:
        pool.starmap(_fingerprint_one, [(f, memo) for f in files for _ in range(3)])
    assert len(json.loads(memo.read_text())) == 8


def _fingerprint_one(path, memo):
    from unlearnbench.models.checkpoint import fingerprint

    fingerprint((path,), memo)


def test_openai_judge_sends_the_api_key_only_over_https_or_to_loopback(monkeypatch):
    from unlearnbench.judge_endpoint import OpenAIJudge

    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    with pytest.raises(UnlearnbenchError, match="OPENAI_API_KEY.*https"):
        OpenAIJudge("http://judge.example.com/v1")
    OpenAIJudge("https://judge.example.com/v1")
    OpenAIJudge("http://127.0.0.1:8000/v1")
    OpenAIJudge("http://localhost:8000/v1")
    monkeypatch.delenv("OPENAI_API_KEY")
    OpenAIJudge("http://judge.example.com/v1")  # no key: nothing to leak


def test_openai_judge_reads_replies_with_a_size_bound():
    from unlearnbench.judge_endpoint import OpenAIJudge
    from unlearnbench.metrics.judges import JudgeRequest

    class Huge(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's name
            self.rfile.read(int(self.headers["Content-Length"]))
            body = b'{"choices": [{"message": {"content": "' + b"5" * (3 << 20) + b'"}}]}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Huge)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        judge = OpenAIJudge(f"http://127.0.0.1:{server.server_port}/v1", retries=1)
        [judgement] = judge.judge([JudgeRequest("harm", "q", "r", "ref", "harmful", "benign")])
    finally:
        server.shutdown()
    assert judgement.score is None and "reply larger than" in judgement.error


def test_report_items_caps_per_item_details_in_the_report(tmp_path):
    from unlearnbench.report.schema import cap_items

    metric = {"name": "m", "value": 0.5, "per_item": {f"q{i}": i / 10 for i in range(10)},
              "details": {"generations": {f"q{i}": f"answer {i}" for i in range(10)}, "note": "kept"}}
    capped = cap_items(metric, 3)
    assert list(capped["per_item"]) == ["q0", "q1", "q2"] and list(capped["details"]["generations"]) == ["q0", "q1", "q2"]
    assert capped["details"]["note"] == "kept" and capped["items_capped"] == {"kept": 3, "of": 10}
    assert capped["value"] == 0.5 and len(metric["per_item"]) == 10  # the value is not recomputed, input untouched
    assert math.isclose(cap_items(metric, 100)["per_item"]["q9"], 0.9) and "items_capped" not in cap_items(metric, 100)
