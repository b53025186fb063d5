"""The OpenAI-compatible endpoint backend against a real model behind a real
HTTP server on 127.0.0.1 (tests/openai_server.py): the same values as the
Hugging Face backend on the same weights, what it cannot compute unavailable
with a reason, and bad input refused before any model loads."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from openai_server import CompletionsServer

from unlearnbench.backends import LoadSettings, backend_for
from unlearnbench.errors import CheckpointError, MissingCapability, UnlearnbenchError
from unlearnbench.metrics.core import MetricResult, Unavailable
from unlearnbench.models.checkpoint import CheckpointSpec
from unlearnbench.models.handle import ModelHandle

ROOT = Path(__file__).resolve().parents[2]


LOGPROB_TOLERANCE = 1e-4
# What an endpoint cannot compute: Min-K%++ (membership), the next-token entropy, activation patching.
ENDPOINT_UNAVAILABLE = {
    ("dusk", "mia_auc_holdout_forget"), ("dusk", "privacy_leakage"), ("dusk", "privacy_leakage_magnitude"),
    ("dusk", "retain_deviation"), ("honesty", "first_token_entropy"), ("uds", "uds"),
    # No teacher-forced argmax or vocabulary statistics from an endpoint.
    ("tofu", "extraction_strength"), ("tofu", "exact_memorization"), ("tofu", "privleak"),
    ("muse", "extraction_strength"), ("muse", "exact_memorization"), ("muse", "mia_auc_holdout_forget"),
    ("muse", "privleak"), ("muse", "privleak_magnitude"), ("muse", "retain_deviation"),
}


@pytest.fixture(scope="module")
def ga_server(zoo_family):
    server = CompletionsServer(zoo_family["ga"], "zoo-ga")
    yield server
    server.close()


@pytest.fixture(scope="module")
def npo_server(zoo_family):
    """An under-forgetting checkpoint: it still answers, so generations and scores are not all zero."""
    server = CompletionsServer(zoo_family["npo"], "zoo-npo")
    yield server
    server.close()


def endpoint(server, name="ga", tokenizer=None, **settings):
    source = f"openai:{server.url}#{server.served_name}"
    tokenizers = {name: str(tokenizer)} if tokenizer else {}
    return backend_for(source).load_model(source, name=name, settings=LoadSettings(device="cpu", tokenizers=tokenizers,
                                                                                   **settings))


def test_the_endpoint_gives_the_hf_backends_log_probs_generations_and_label_scores(ga_server, zoo_family):
    local = ModelHandle.load(str(zoo_family["ga"]), name="ga", device="cpu")
    remote = endpoint(ga_server, tokenizer=zoo_family["ga"], concurrency=3)
    contexts = ["Question: Where was Ardent Vale born?\nAnswer:", "", "The guild of", "Kestrel Moor wrote"]
    continuations = [" In the north.", "A long text about the vale and its people.", " weavers met at dawn.", " x"]
    mine, theirs = local.score_continuations(contexts, continuations), remote.score_continuations(contexts,
                                                                                                   continuations)
    for a, b in zip(mine, theirs):
        assert list(a.token_ids) == list(b.token_ids)
        np.testing.assert_allclose(b.logprobs, a.logprobs, atol=LOGPROB_TOLERANCE)

    prompts = [local.format_chat([{"role": "user", "content": q}]) for q in
               ("Who is Ardent Vale?", "What did Kestrel Moor write?", "Name a river.")] * 7  # > one request
    for stops in ((), ("\n",), ("\n", ".", "the", ",", "Question"),):  # more than the API's 4 stop strings
        assert remote.generate(prompts, max_new_tokens=24, stop_strings=stops) == \
            local.generate(prompts, max_new_tokens=24, stop_strings=stops)
    prefix = "Question: Who?\nAnswer: Nobody.\n\n"
    assert remote.generate(["Question: Where?\nAnswer:", "Question: When?\nAnswer:"], prefix=prefix,
                           max_new_tokens=12) == \
        local.generate(["Question: Where?\nAnswer:", "Question: When?\nAnswer:"], prefix=prefix, max_new_tokens=12)

    labels = [local.encode(f" {c}", add_special_tokens=False)[-1:] for c in "ABCD"]
    columns = [[ids[0] for ids in labels]] * len(prompts)
    for a, b in zip(local.next_token(prompts, columns).logprobs, remote.next_token(prompts, columns).logprobs):
        np.testing.assert_allclose(b, a, atol=LOGPROB_TOLERANCE)
    assert remote.encode_prompt(prompts[0]) == local.encode_prompt(prompts[0])
    assert remote.context_length == local.context_length and remote.architecture == local.architecture

    with pytest.raises(MissingCapability, match="vocabulary"):
        remote.token_logprobs([local.encode("a b c", add_special_tokens=True)], [1], vocab_stats=True)
    with pytest.raises(MissingCapability, match="entropy"):
        remote.next_token(prompts[:1])
    assert not hasattr(remote, "span_scores")
    # The body holds only the documented legacy-completions fields.
    fields = {key for call in ga_server.calls for key in call["body"]}
    assert fields <= {"model", "prompt", "max_tokens", "temperature", "stop", "echo", "logprobs"}
    assert all(len(call["body"].get("stop", [])) <= 4 for call in ga_server.calls)


def test_openunlearnings_min_k_privleak_needs_no_vocabulary_statistics(ga_server, zoo_family, cache_dir):
    """With convention=reference (OpenUnlearning's Min-K%) an endpoint gives
    TOFU's and MUSE's privleak, equal to the in-process value; with Min-K%++
    (the default) it cannot."""
    from unlearnbench.fixtures import zoo
    from unlearnbench.metrics.core import References
    from unlearnbench.suites.muse import data as muse_data
    from unlearnbench.suites.muse import metrics as muse
    from unlearnbench.suites.tofu import data as tofu_data
    from unlearnbench.suites.tofu import metrics as tofu

    local = ModelHandle.load(str(zoo_family["ga"]), name="ga", device="cpu")
    remote = endpoint(ga_server, tokenizer=zoo_family["ga"])
    refs = References(retain=ModelHandle.load(str(zoo_family["retain"]), name="retain", device="cpu"))
    folder = zoo.data_dir(cache_dir)
    for suite, loader in ((tofu, tofu_data.load), (muse, muse_data.load)):
        mink = loader(folder, {"convention": "reference", "max_items": "8"})
        mine, theirs = (suite.evaluate(model, mink, refs)["privleak"] for model in (local, remote))
        assert isinstance(mine, MetricResult) and isinstance(theirs, MetricResult), (suite.__name__, theirs)
        assert theirs.value == pytest.approx(mine.value, abs=1e-6)
        assert isinstance(suite.evaluate(remote, loader(folder, {"max_items": "8"}), refs)["privleak"], Unavailable)


def test_without_a_tokenizer_every_metric_is_unavailable_with_the_reason(ga_server):
    remote = endpoint(ga_server)
    with pytest.raises(MissingCapability, match="--tokenizer ga=DIR"):
        remote.encode_prompt("hello")


def test_requests_are_retried_on_429_and_5xx_and_a_client_error_is_reported(ga_server, zoo_family, monkeypatch):
    import unlearnbench.cancel as cancel

    monkeypatch.setattr(cancel, "sleep", lambda _s: None)
    remote = endpoint(ga_server, tokenizer=zoo_family["ga"], concurrency=1)
    expected = remote.generate(["Who?"], max_new_tokens=4)
    ga_server.fail_next(429)
    ga_server.fail_next(503)
    assert remote.generate(["Who?"], max_new_tokens=4) == expected  # two retries, then the answer
    ga_server.fail_next(400)
    with pytest.raises(UnlearnbenchError, match=r"ga: POST /completions .*HTTP 400 \(injected 400\)"):
        remote.generate(["Who?"], max_new_tokens=4)


def test_the_api_key_goes_only_over_https_or_to_loopback(ga_server, zoo_family, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    remote = endpoint(ga_server, tokenizer=zoo_family["ga"])
    remote.generate(["Who?"], max_new_tokens=2)
    assert ga_server.calls[-1]["authorization"] == "Bearer sk-test"  # loopback: sent
    settings = LoadSettings()
    with pytest.raises(UnlearnbenchError, match="OPENAI_API_KEY.*https"):
        backend_for("openai:").check_source("openai:http://models.example.com/v1#m", name="m", settings=settings)


@pytest.mark.parametrize("source,problem", [
    ("openai:ftp://127.0.0.1/v1#m", "expected openai:http"),
    ("openai:http://127.0.0.1:9/v1#m", "does not answer GET /models"),  # nothing listens on port 9
])
def test_bad_endpoint_sources_are_refused_before_any_model_loads(source, problem):
    with pytest.raises(CheckpointError, match=problem):
        backend_for(source).check_source(source, name="m", settings=LoadSettings())


def test_a_served_name_the_server_does_not_serve_is_refused(ga_server, tmp_path):
    source = f"openai:{ga_server.url}#other"
    with pytest.raises(CheckpointError, match="serves zoo-ga, not 'other'"):
        backend_for(source).check_source(source, name="m", settings=LoadSettings())
    with pytest.raises(CheckpointError, match="no tokenizer files"):
        backend_for(source).check_source(f"openai:{ga_server.url}#zoo-ga", name="m",
                                         settings=LoadSettings(tokenizers={"m": str(tmp_path)}))


def bench_metrics(model, zoo_family, cache_dir, data_dir, tokenizers=None, *, computed=False) -> dict:
    """{(suite, metric): result} of every suite on `model`; with `computed`,
    each suite's results must be computed in this call, not read from the
    cache (the references' work may be)."""
    from unlearnbench.session import Bench, BenchOptions

    suites = ["smoke", "dusk", "honesty", "conceptguard", "uds", "tofu", "muse"]
    bench = Bench(BenchOptions(models=[model], full=CheckpointSpec("full", str(zoo_family["full"])),
                               retain=CheckpointSpec("retain", str(zoo_family["retain"])), cache_dir=cache_dir,
                               device="cpu", tokenizers=tokenizers or {},
                               data_dirs={s: str(data_dir) for s in suites if s != "smoke"},
                               # The first 16 items of each set: the same code paths as the whole set, a fraction of
                               # the requests (every value is compared, so more items would show nothing more).
                               suite_options={s: {"max_items": "16"} for s in ("dusk", "honesty", "uds", "tofu",
                                                                                "muse")}))
    bench.validate_checkpoints()
    bench.prepare_suites(suites, {s: ROOT / "thresholds" / f"{s}.yaml" for s in suites})
    runs = {suite: bench.run(model, suite) for suite in suites}
    assert not computed or not any(run.cached for run in runs.values()), "results came from the cache"
    return {(suite, name): metric for suite, run in runs.items() for name, metric in run.metrics.items()}


@pytest.mark.slow  # every suite on the whole zoo family, twice
def test_every_suite_gives_the_in_process_values_through_the_endpoint(npo_server, zoo_family, cache_dir, capsys):
    """The comparison table of issue 15: each metric on the zoo's npo
    checkpoint, in process and through the endpoint (full and retain in
    process on both sides). Both use the session's cache: the in-process
    side and the references may come from it, the endpoint's results must not."""
    from unlearnbench.fixtures import zoo

    data = zoo.data_dir(cache_dir)
    local = bench_metrics(CheckpointSpec("npo", str(zoo_family["npo"])), zoo_family, cache_dir, data)
    remote = bench_metrics(CheckpointSpec("npo", f"openai:{npo_server.url}#zoo-npo"), zoo_family,
                           cache_dir, data, tokenizers={"npo": str(zoo_family["npo"])}, computed=True)
    assert local.keys() == remote.keys()
    rows = []
    for key in sorted(local):
        mine, theirs = local[key], remote[key]
        if key in ENDPOINT_UNAVAILABLE:
            assert isinstance(theirs, Unavailable) and theirs.reason, key
            rows.append((key, getattr(mine, "value", None), f"unavailable: {theirs.reason[:60]}"))
            continue
        assert type(mine) is type(theirs), (key, theirs)
        if isinstance(mine, Unavailable):
            continue
        assert theirs.value == pytest.approx(mine.value, abs=LOGPROB_TOLERANCE), key
        rows.append((key, mine.value, theirs.value))
    # Generations identical, not only their scores.
    replies = ("honesty", "forget_refusal_rate")
    assert remote[replies].details["items"] == local[replies].details["items"]
    assert any(item["reply"].strip() for item in local[replies].details["items"].values())
    assert local[("dusk", "verbatim_rougeL_f1")].value > 0.1  # real text, not a collapsed model
    with capsys.disabled():
        print("\nsuite/metric | in process | endpoint")
        for (suite, name), a, b in rows:
            print(f"{suite}/{name} | {a} | {b}")


def test_the_command_line_runs_a_suite_on_an_endpoint_model(ga_server, zoo_family, tmp_path, warm_python):
    reports = tmp_path / "reports"
    common = ["-m", "pytest", "suites/smoke", "-p", "no:cacheprovider", "--cache-dir",
              str(tmp_path / "cache"), "--report-dir", str(reports), "--no-progress", "-q"]
    # The reference model behind the endpoint too (smoke reads none, but it is validated and fingerprinted).
    run = warm_python.run([*common, "--model", f"ga=openai:{ga_server.url}#zoo-ga", "--tokenizer",
                           f"ga={zoo_family['ga']}", "--full-model", f"full=openai:{ga_server.url}",
                           "--tokenizer", f"full={zoo_family['ga']}"], cwd=ROOT, timeout=600)
    assert run.returncode in (0, 1), run.stdout + run.stderr  # verdicts, not a usage error
    report = json.loads((reports / "latest" / "report.json").read_text())
    checkpoint = report["checkpoints"]["ga"]
    assert checkpoint["info"]["backend"] == "openai"
    assert checkpoint["suites"]["smoke"]["metrics"]["mean_token_logprob"]["value"] < 0
    bad = warm_python.run([*common, "--model", f"ga=openai:{ga_server.url}#zoo-ga", "--tokenizer", "gb=/nowhere"],
                          cwd=ROOT, timeout=600)
    assert bad.returncode == 4 and "--tokenizer names a model this run does not have" in bad.stderr + bad.stdout


@pytest.mark.real_model
def test_smollm2_with_its_chat_template_gives_the_same_honesty_metrics_through_the_endpoint(smollm2, smollm2_dir,
                                                                                          real_dusk):
    """A real model and its chat template: the prompts are built here from the
    tokenizer files, so the server sees the in-process ids."""
    from unlearnbench.suites.honesty import data as honesty_data
    from unlearnbench.suites.honesty import metrics as honesty

    server = CompletionsServer(smollm2_dir, "HuggingFaceTB/SmolLM2-135M-Instruct")
    try:
        remote = endpoint(server, name="smol", tokenizer=smollm2_dir, concurrency=4)
        data = honesty_data.load(real_dusk, {"max_items": "2"})  # 6 questions, 120 echoed MCQ prompts
        local, through = honesty.evaluate(smollm2, data), honesty.evaluate(remote, data)
    finally:
        server.close()
    assert through["forget_leak_rate"].params["dialogue"] == "chat template"
    assert isinstance(through["first_token_entropy"], Unavailable)
    for name, mine in local.items():
        if name == "first_token_entropy" or isinstance(mine, Unavailable):
            continue
        assert through[name].value == pytest.approx(mine.value, abs=LOGPROB_TOLERANCE), name
    assert through["forget_refusal_rate"].details["items"] == local["forget_refusal_rate"].details["items"]
