"""Sequences that share their context are scored from one pass over it (the
context's KV cache copied to each of them): the scores equal those of each
sequence run whole, to 1e-5, on SmolLM2 with its chat template, for TOFU's
truth-ratio sets under both conventions and for multiple-choice options
scored teacher-forced (WMDP's cloze format).

The model runs in float64, as in tests/suites/test_openunlearning.py: in
float32 a 30-layer model's scores move by up to 3e-5 between any two batch
shapes (one context pass and its continuations are other shapes than
whole sequences), which would hide a difference of path."""

from __future__ import annotations

import numpy as np
import pytest

from unlearnbench.models.handle import ModelHandle


def _separately(handle: ModelHandle, score):
    """`score()` with each sequence run whole (no shared context)."""
    handle.scorer.share_prefixes = False
    try:
        return score()
    finally:
        handle.scorer.share_prefixes = True


def _positions_run(handle: ModelHandle, score) -> tuple[object, list[int]]:
    """`score()`'s result and the positions (padding included) each forward of the model's body ran."""
    widths = []
    body = handle.scorer._split[0]
    hook = body.register_forward_pre_hook(lambda _m, _a, kw: widths.append(kw["input_ids"].numel()),
                                          with_kwargs=True)
    try:
        return score(), widths
    finally:
        hook.remove()


def _assert_same(got: dict, want: dict):
    assert got.keys() == want.keys()
    for key in want:
        x, y = got[key], want[key]
        np.testing.assert_array_equal(x.token_ids, y.token_ids)
        np.testing.assert_array_equal(x.argmax, y.argmax)
        for field in ("logprobs", "vocab_mean", "vocab_var"):
            if getattr(y, field) is None:  # vocabulary statistics asked for only where Min-K%++ reads them
                assert getattr(x, field) is None
                continue
            np.testing.assert_allclose(getattr(x, field), getattr(y, field), atol=1e-5, rtol=1e-5, err_msg=str(key))


@pytest.fixture(scope="module")
def smollm2(smollm2_dir):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(str(smollm2_dir), dtype=torch.float64)
    return ModelHandle(model, AutoTokenizer.from_pretrained(str(smollm2_dir)), name="smollm2-float64",
                       source=str(smollm2_dir), fingerprint="smollm2-float64")


@pytest.fixture(scope="module")
def zoo_data(cache_dir):
    from unlearnbench.fixtures import zoo

    return zoo.data_dir(cache_dir)


@pytest.mark.real_model
@pytest.mark.parametrize("convention", ["spec", "reference"])
def test_tofu_truth_ratio_sets_scored_from_shared_contexts_equal_separate_scoring(smollm2, zoo_data, convention):
    """Each question's answer, paraphrase and three perturbed answers after
    SmolLM2's chat prompt (`reference`: OpenUnlearning's template, EOS
    appended and kept out of attention): the same token log-probs, argmax
    and Min-K%++ moments, and fewer positions run than whole sequences hold."""
    from unlearnbench.suites.tofu import data as tofu_data
    from unlearnbench.suites.tofu import metrics as tofu

    data = tofu_data.load(zoo_data / "tofu", {"max_items": "6", "convention": convention})
    sets = ["forget", "retain"]
    smollm2.token_logprobs([[1, 2]], [1])  # the body/head probe runs before the count
    shared, shared_positions = _positions_run(smollm2, lambda: tofu.teacher_forced(smollm2, data, sets)[0])
    separate, separate_positions = _positions_run(
        smollm2, lambda: _separately(smollm2, lambda: tofu.teacher_forced(smollm2, data, sets)[0]))
    assert len(separate) == 2 * 6 * 5  # answer, paraphrase and 3 perturbed answers of 6 questions a set
    _assert_same(shared, separate)
    assert sum(shared_positions) < 0.7 * sum(separate_positions)


@pytest.mark.real_model
@pytest.mark.parametrize("chat", [True, False], ids=["chat-template", "plain"])
def test_multiple_choice_options_scored_from_the_shared_question_equal_separate_scoring(smollm2, zoo_data, chat):
    """WMDP's cloze questions, each with its four answer texts (in SmolLM2's
    chat template, and as the wmdp suite asks them: plain text), summed
    log-likelihoods as lm-eval defines them."""
    from unlearnbench.metrics.continuations import continuation_loglikelihoods
    from unlearnbench.suites.wmdp import data as wmdp_data
    from unlearnbench.suites.wmdp import metrics as wmdp

    data = wmdp_data.load(zoo_data / "wmdp", {"format": "cloze", "max_items": "3"})
    items = [item for subset in data.wmdp.values() for item in subset]
    assert len(items) == 9
    if chat:
        contexts = [smollm2.format_chat([{"role": "user", "content": wmdp.context(item, "cloze")}]) for item in items]
    else:
        contexts = [wmdp.context(item, "cloze") for item in items]
    contexts = [c for c in contexts for _ in range(4)]
    options = [x for item in items for x in wmdp.continuations(item, "cloze")]
    assert any(len(smollm2.encode(x, add_special_tokens=False)) > 1 for x in options)  # scored teacher-forced

    def score():
        return continuation_loglikelihoods(smollm2, contexts, options)

    (shared, shared_greedy), shared_positions = _positions_run(smollm2, score)
    (separate, separate_greedy), separate_positions = _positions_run(smollm2, lambda: _separately(smollm2, score))
    np.testing.assert_allclose(shared, separate, atol=1e-5, rtol=1e-5)
    assert (shared.reshape(-1, 4).argmax(1) == separate.reshape(-1, 4).argmax(1)).all()
    assert (shared_greedy == separate_greedy).all()
    assert sum(shared_positions) < 0.7 * sum(separate_positions)
