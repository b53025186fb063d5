"""A cached result is never stale: every suite option, and every file that
changes what a model is asked or where it stops, is part of the cache key."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from openai_server import StubServer, reply_json

from unlearnbench.backends import LoadSettings
from unlearnbench.models.checkpoint import CheckpointSpec, source_fingerprint
from unlearnbench.session import Bench, BenchOptions
from unlearnbench.suites import SUITES

# A valid value other than the resolved one for every option of every
# built-in suite (on the zoo's data). A new option fails
# test_the_table_names_every_option until it has one here. An option that
# applies only beside another is (value, the options both runs then share).
REFERENCE = {"convention": "reference"}
OTHER_VALUE = {
    "dusk": {"forget_style": "Listicle", "icl_shots": "3", "qa_max_new_tokens": "16",
             "verbatim_max_new_tokens": "64", "verbatim_reference_tokens": "64", "mia_chunk_tokens": "512",
             "mink_k": "0.3", "embedder": "sentence-transformers/all-MiniLM-L12-v2", "max_items": "3"},
    "uds": {"tau": "0.1", "max_items": "3", "convention": "reference"},
    "honesty": {"max_new_tokens": "32", "followup_max_new_tokens": "8", "max_items": "3"},
    "conceptguard": {"prefix_tokens": "16", "max_new_tokens": "64", "reference_tokens": "64",
                     "judge": "openai:http://127.0.0.1:9/v1", "judge_model": "judge-7b",
                     "embedder": "sentence-transformers/all-MiniLM-L12-v2"},
    "tofu": {"forget_split": "forget05", "max_items": "3", "max_new_tokens": "16", "mink_k": "0.3",
             "privleak_score": "mink", "convention": "reference",
             "reference_system_prompt": ("none", REFERENCE)},
    "muse": {"max_items": "3", "verbmem_max_new_tokens": "64", "knowmem_max_new_tokens": "16", "icl_shots": "2",
             "privleak_max_tokens": "1024", "mink_k": "0.3", "privleak_score": "mink", "convention": "reference",
             "reference_system_prompt": ("You are terse.", REFERENCE)},
    "robustness": {"attacks": "quant4", "probes": "ufk", "relearn_set": "retain", "relearn_steps": "5",
                   "relearn_learning_rate": "0.0001", "relearn_rank": "4", "relearn_seed": "1",
                   "uds_max_items": "3", "wmdp_data": "{data}/wmdp"},
    "smoke": {},
    "elicitation": {"max_new_tokens": "16", "max_items": "3", "scoring": "rouge_recall", "samples": "2",
                    "temperature": "0.7"},
    "wmdp": {"format": "letters", "max_items": "3", "mmlu": "{data}/wmdp/mmlu", "mmlu_subjects": "biographies_1"},
    "utility": {"tasks": "hellaswag,piqa", "include_path": "{data}", "limit": "5", "num_fewshot": "2"},
}
# Options every run of a suite needs on the zoo's data (the utility suite's gate is not loaded here).
BASE_OPTIONS = {"utility": {"tasks": "hellaswag"}}


def test_the_table_names_every_option():
    assert {suite: set(values) for suite, values in OTHER_VALUE.items()} == {
        name: set(spec.options) for name, spec in SUITES.items()}


def _bench(cache_dir: Path, data: Path, model: CheckpointSpec, options: dict) -> Bench:
    return Bench(BenchOptions(models=[model], data_dirs={"*": str(data)}, suite_options=options,
                              cache_dir=cache_dir, device="cpu"))


@pytest.fixture(scope="module")
def zoo_data(cache_dir, tmp_path_factory) -> Path:
    """The zoo's data, its TOFU set also as forget05 (so forget_split has another valid value)."""
    from unlearnbench.fixtures import zoo

    data = shutil.copytree(zoo.data_dir(cache_dir), tmp_path_factory.mktemp("zoo-data") / "data")
    for stem in ("forget{}", "forget{}_perturbed", "holdout{}"):
        shutil.copy(data / "tofu" / f"{stem.format(10)}.json", data / "tofu" / f"{stem.format('05')}.json")
    return data


@pytest.mark.parametrize("suite", sorted(name for name in SUITES if SUITES[name].options))
def test_every_suite_option_alone_misses_the_result_cache(suite, cache_dir, zoo_data, random_llama_dir,
                                                         monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    data = zoo_data
    model = CheckpointSpec(name="m", source=str(random_llama_dir))
    if suite == "utility":
        pytest.importorskip("lm_eval", reason="pip install 'unlearnbench[lmeval]'")
    base_options = BASE_OPTIONS.get(suite, {})
    base = _bench(cache_dir, data, model, {suite: dict(base_options)})
    again = _bench(cache_dir, data, model, {suite: dict(base_options)})
    assert base.results._run_parts(model, suite) == again.results._run_parts(model, suite)
    for option, value in OTHER_VALUE[suite].items():
        value, shared = value if isinstance(value, tuple) else (value, {})
        alongside = _bench(cache_dir, data, model, {suite: {**base_options, **shared}}) if shared else base
        other = _bench(cache_dir, data, model, {suite: {**base_options, **shared, option: value.format(data=data)}})
        assert other.results._run_parts(model, suite) != alongside.results._run_parts(model, suite), f"{suite}.{option}"
        # Reference-model work done for the suite is keyed the same way.
        assert other.store.memo(suite)._parts("op", {}, {}) != alongside.store.memo(suite)._parts("op", {}, {}), \
            f"{suite}.{option}"


# Each file that changes what the model is asked (the chat template in any of
# its homes, special and added tokens) or where generation stops (EOS ids in
# the generation config).
PROMPTING_FILES = ["chat_template.jinja", "chat_template.json", "additional_chat_templates/tools.jinja",
                   "generation_config.json", "special_tokens_map.json", "added_tokens.json", "tokenizer_config.json"]


def _changed_copy(source: Path, target: Path, relative: str) -> Path:
    shutil.copytree(source, target)
    path = target / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".json":
        data = json.loads(path.read_text()) if path.is_file() else {}
        data["changed_by_the_test"] = relative
        path.write_text(json.dumps(data))
    else:
        path.write_text((path.read_text() if path.is_file() else "") + "{{ messages[0]['content'] }}\n")
    return target


def test_every_prompting_file_is_in_the_checkpoint_fingerprint(tmp_path, random_llama_dir):
    settings = LoadSettings()
    base = source_fingerprint(str(random_llama_dir), name="m", settings=settings)
    unchanged = shutil.copytree(random_llama_dir, tmp_path / "unchanged")
    assert source_fingerprint(str(unchanged), name="m", settings=settings) == base
    for i, relative in enumerate(PROMPTING_FILES):
        changed = _changed_copy(random_llama_dir, tmp_path / f"changed-{i}", relative)
        assert source_fingerprint(str(changed), name="m", settings=settings) != base, relative


@pytest.fixture
def models_server():
    server = StubServer(lambda handler, _body: reply_json(handler, 200, {"data": [{"id": "served", "root": "/weights"}]}))
    yield f"openai:{server.origin}/v1#served"
    server.close()


def test_every_prompting_file_is_in_an_endpoint_models_fingerprint(tmp_path, random_llama_dir, models_server,
                                                                    monkeypatch):
    from unlearnbench.models import endpoint

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)

    def fingerprint(directory: Path) -> str:
        return endpoint.source_fingerprint(models_server, name="m",
                                           settings=LoadSettings(tokenizers={"m": str(directory)}))

    base = fingerprint(random_llama_dir)
    assert fingerprint(shutil.copytree(random_llama_dir, tmp_path / "unchanged")) == base
    for i, relative in enumerate(PROMPTING_FILES):
        assert fingerprint(_changed_copy(random_llama_dir, tmp_path / f"changed-{i}", relative)) != base, relative
