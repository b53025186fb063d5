"""The model protocol is closed: what the session and the metrics call on a
model is declared in models/interface.py, the in-process and endpoint
backends implement it, and a backend written from scratch against it alone
(tests/bigram_backend.py) is a `LanguageModel` that computes what it should."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from conftest import metric_modules
from unlearnbench.models.interface import ActivationPatching, LanguageModel, members

PACKAGE = Path(__file__).resolve().parents[2] / "unlearnbench"
# The names metric and session code give the models they are handed.
METRIC_MODEL_NAMES = {"model", "target", "full", "retain", "other", "source", "patch_source"}
SESSION_MODEL_NAMES = {"model", "handle", "loaded"}  # its `full`, `retain`, `other` are specs and runs


def attributes_read_on_models(module: Path, names: set[str]) -> dict[str, str]:
    return {node.attr: f"{module.name}:{node.lineno}" for node in ast.walk(ast.parse(module.read_text()))
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in names}


def test_session_and_metrics_read_only_the_protocol():
    used = {}
    for module in [PACKAGE / "session.py", *sorted((PACKAGE / "engine").glob("*.py"))]:
        used |= attributes_read_on_models(module, SESSION_MODEL_NAMES)
    for module in metric_modules():
        used |= attributes_read_on_models(module, METRIC_MODEL_NAMES)
    assert {"generate", "token_logprobs", "span_scores", "describe", "release"} <= set(used)  # the scan sees them
    outside = {attr: where for attr, where in used.items() if attr not in members(ActivationPatching)}
    assert not outside, f"code reaches past the model protocol: {outside}"


def test_metric_code_calls_its_model_model():
    """Issue 27: `handle` was the in-process class's word; metric code is backend-blind."""
    for module in metric_modules():
        names = {n.id for n in ast.walk(ast.parse(module.read_text())) if isinstance(n, ast.Name)}
        names |= {a.arg for n in ast.walk(ast.parse(module.read_text())) if isinstance(n, ast.arguments)
                  for a in n.args + n.kwonlyargs}
        assert "handle" not in names, module.name


def test_backends_implement_it_and_capabilities_are_checked_with_isinstance():
    from unlearnbench.models.endpoint import EndpointModel
    from unlearnbench.models.handle import ModelHandle

    for cls, patching in ((ModelHandle, True), (EndpointModel, False)):
        missing = sorted(m for m in members(LanguageModel) - {"name", "fingerprint"} if not hasattr(cls, m))
        assert not missing, f"{cls.__name__} lacks {missing}"
        assert all(hasattr(cls, m) for m in members(ActivationPatching) - members(LanguageModel)) == patching
    # The test- and benchmark-only parameters are gone from the protocol.
    import inspect

    assert "logits_processor" not in inspect.signature(LanguageModel.next_token).parameters
    assert "reuse_prefix_cache" not in inspect.signature(LanguageModel.generate).parameters
    uds = (PACKAGE / "suites" / "uds" / "metrics.py").read_text()
    assert "isinstance(m, ActivationPatching)" in uds and "getattr(" not in uds


def test_the_bigram_backend_is_exactly_a_language_model():
    import bigram_backend

    model = bigram_backend.BigramModel("tiny", "bigram:tiny", ["the cat sat", "the dog sat"])
    assert isinstance(model, LanguageModel) and not isinstance(model, ActivationPatching)
    assert all(hasattr(bigram_backend.BigramModel, m) for m in members(LanguageModel) - {"name", "fingerprint"})
    imported = {alias.name for node in ast.walk(ast.parse(Path(bigram_backend.__file__).read_text()))
                if isinstance(node, (ast.Import, ast.ImportFrom))
                for alias in ([ast.alias(node.module)] if isinstance(node, ast.ImportFrom) else node.names)}
    assert "unlearnbench.models.interface" in imported
    assert not {m for m in imported if m.split(".")[0] in ("torch", "transformers") or
                m.startswith("unlearnbench.models.") and m != "unlearnbench.models.interface"}


def test_the_bigram_backend_computes_bigram_log_probabilities():
    """Worked by hand: after " the", the training texts continue with " cat"
    once and " dog" once; with add-k smoothing k over a vocabulary of V,
    p(" cat" | " the") = (1 + k) / (2 + V k)."""
    import bigram_backend

    pieces = (*bigram_backend.SPECIALS, "the", " cat", " dog", " sat", " ", "z", "e", "b", "r", "a")
    model = bigram_backend.BigramModel("tiny", "bigram:tiny", ["the cat sat", "the dog sat"], pieces)
    k, size = bigram_backend.SMOOTHING, len(model.pieces)
    ids, start = model.encode_pair("the", " cat")
    assert model.decode(ids) == "the cat" and ids[0] == bigram_backend.BOS
    scores = model.token_logprobs([ids], [start], vocab_stats=True)[0]
    assert scores.logprobs[0] == pytest.approx(np.log((1 + k) / (2 + size * k)), rel=1e-6)
    row = np.exp(model.logp[model.index["the"]])
    assert scores.vocab_mean[0] == pytest.approx(float((row * np.log(row)).sum()))
    # A masked token is kept out of the context: " cat" is then predicted from "the" over " dog".
    dog = model.index[" dog"]
    masked = model.token_logprobs([[*ids[:2], dog, ids[2]]], [3], masked_ids={dog})[0]
    assert masked.logprobs[0] == pytest.approx(scores.logprobs[0])
    assert model.generate(["the"], max_new_tokens=2) == [" cat sat"]  # ties go to the lower id: " cat" < " dog"
    offsets = model.encode_with_offsets("the zebra")[1]
    assert offsets[0] == (0, 3) and offsets[1] == (3, 4)  # an unseen word falls back to characters
    nxt = model.next_token(["the"], [[model.index[" cat"], model.index[" sat"]]])
    assert nxt.logprobs[0][0] > nxt.logprobs[0][1] and nxt.argmax[0] == model.index[" cat"]
