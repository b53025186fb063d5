"""The per-machine store of independent implementations' results reads a
result back only under the same code, inputs, model files and libraries."""

from __future__ import annotations

import importlib.util

from reference_results import ReferenceResults


def module_from(path, text):
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_result_is_read_back_only_under_the_same_code_inputs_and_model_files(tmp_path, monkeypatch):
    monkeypatch.delenv("UNLEARNBENCH_TEST_RECOMPUTE_REFERENCES", raising=False)
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"weights")
    code = module_from(tmp_path / "naive_reference.py", "def score(x):\n    return x + 1\n")
    store = ReferenceResults(tmp_path / "store", tmp_path / "fingerprints.json")
    calls = []

    def get(inputs, name="naive"):
        return store.get(name, lambda: calls.append(inputs) or code.score(inputs), code=[code.score], inputs=inputs,
                         models=[model])

    assert get(1) == 2 and get(1) == 2 and calls == [1]  # computed once, read back once
    assert get(2) == 3 and calls == [1, 2]  # other inputs
    assert get(1, "other") == 2 and len(calls) == 3  # another reference
    (model / "model.safetensors").write_bytes(b"other weights")
    assert get(1) == 2 and len(calls) == 4  # other weights
    code = module_from(tmp_path / "naive_reference.py", "def score(x):\n    return x + 10\n")
    assert get(1) == 11 and len(calls) == 5  # other reference code
    monkeypatch.setenv("UNLEARNBENCH_TEST_RECOMPUTE_REFERENCES", "1")
    assert ReferenceResults(tmp_path / "store", tmp_path / "fingerprints.json").get(
        "naive", lambda: calls.append(1) or 11, code=[code.score], inputs=1, models=[model]) == 11
    assert len(calls) == 6  # recomputed on request
    assert not list((tmp_path / "store").glob("*.tmp"))
