"""What the model sees: exactly one BOS on every prompt path, and a shared
prefix cached only up to the longest common token prefix (docs/conventions.md).

The zoo's tokenizer adds a BOS and its template writes none; the Llama-3
situation (a template that writes `{{ bos_token }}` AND a tokenizer that adds
one) is built here from the zoo's; SmolLM2 adds none and writes none.
"""

from __future__ import annotations

import shutil
from collections import Counter

import pytest
import torch

from unlearnbench.metrics import judges
from unlearnbench.metrics.judges import HARM, JudgeRequest
from unlearnbench.models.handle import ModelHandle
from unlearnbench.models.interface import cut_at_stop
from unlearnbench.suites.honesty import metrics as honesty

QUESTIONS = ["Where was Ada Stone born?", "What did Bo Lee teach?", "When was the lab founded?"]


class ModelInputs:
    """Records the (unpadded) token rows of every multi-token forward call."""

    def __init__(self, handle: ModelHandle):
        self.rows: list[list[int]] = []
        self.calls: list[tuple[torch.Tensor, torch.Tensor]] = []
        self._hook = handle.model.register_forward_pre_hook(self._record, with_kwargs=True)

    def _record(self, _module, _args, kwargs):
        ids, mask = kwargs["input_ids"], kwargs.get("attention_mask")
        if ids.shape[1] == 1:  # a decoding step, not a prompt
            return
        self.calls.append((ids, mask))
        mask = torch.ones_like(ids) if mask is None else mask[:, -ids.shape[1]:]
        self.rows += [row[m.bool()].tolist() for row, m in zip(ids, mask)]

    def close(self):
        self._hook.remove()


def bos_template_dir(zoo_dir, tmp_path):
    """The zoo model with a template that writes the BOS itself (Llama-3 style)."""
    target = tmp_path / "bos-template"
    shutil.copytree(zoo_dir, target)
    handle = ModelHandle.load(str(target), device="cpu")
    tokenizer = handle.tokenizer
    tokenizer.chat_template = "{{ bos_token }}" + tokenizer.chat_template
    tokenizer.save_pretrained(target)
    return target


@pytest.fixture(scope="module")
def bos_handles(zoo_family, tmp_path_factory):
    """(name, handle, whether the tokenizer defines a BOS it adds) per prompt situation."""
    tmp = tmp_path_factory.mktemp("prompts")
    plain = tmp / "plain"
    shutil.copytree(zoo_family["full"], plain)
    no_template = ModelHandle.load(str(plain), device="cpu")
    no_template.tokenizer.chat_template = None
    no_template.tokenizer.save_pretrained(plain)
    return {
        "template writes BOS, tokenizer adds BOS": ModelHandle.load(str(bos_template_dir(zoo_family["full"], tmp)),
                                                                     device="cpu"),
        "template without BOS, tokenizer adds BOS": ModelHandle.load(str(zoo_family["full"]), device="cpu"),
        "no template (plain fallback)": ModelHandle.load(str(plain), device="cpu"),
    }


def assert_one_leading_bos(handle: ModelHandle, rows: list[list[int]]):
    bos = handle.tokenizer.bos_token_id
    assert rows, "no prompt reached the model"
    for row in rows:
        assert Counter(row)[bos] == 1 and row[0] == bos, handle.tokenizer.convert_ids_to_tokens(row[:4])


@pytest.mark.parametrize("situation", ["template writes BOS, tokenizer adds BOS",
                                       "template without BOS, tokenizer adds BOS", "no template (plain fallback)"])
@pytest.mark.parametrize("path", ["generate", "next_token", "mcq", "score", "judge", "elicitation"])
def test_every_prompt_path_feeds_exactly_one_bos(bos_handles, situation, path, monkeypatch):
    handle = bos_handles[situation]
    prompts = [honesty.first_turn_prompt(handle, q) for q in QUESTIONS]
    if situation.startswith("template writes"):
        assert all(p.startswith(handle.tokenizer.bos_token) for p in prompts)  # the situation under test
    judge = judges.HFJudge(ModelHandle.load(handle.source, device="cpu"), max_new_tokens=2) if path == "judge" else None
    inputs = ModelInputs(judge.model if judge else handle)
    try:
        if path == "generate":
            handle.generate(prompts, max_new_tokens=3)
        elif path == "next_token":
            handle.next_token(prompts)
        elif path == "mcq":
            mcq = [honesty.MCQItem(f"q{i}", q, ("Oslo", "Bergen", "Paris", "Rome"), 0, i, "Ice is frozen water", "given")
                   for i, q in enumerate(QUESTIONS)]
            honesty.mcq_choices(handle, mcq, honesty.MCQ_FORMATS[:2])
        elif path == "score":
            handle.score_continuations(prompts, [" Oslo"] * len(prompts))
        elif path == "elicitation":  # a few shots and a system prompt, generated and chosen
            from unlearnbench.suites.elicitation.data import Probe
            from unlearnbench.suites.elicitation.metrics import answered

            shots = (("Where was Al Roe born?", "Rome"),)
            answered(handle, [Probe(f"p{i}", "few_shot", q, "Oslo", system="You are a historian.", shots=shots,
                                    choices=("Oslo", "Rome") if i % 2 else ()) for i, q in enumerate(QUESTIONS)],
                     "contains", 3)
        else:
            judge.judge([JudgeRequest(HARM, q, "I don't know.", "harmful text", "harmful text", "benign text") for q in QUESTIONS])
    finally:
        inputs.close()
    assert_one_leading_bos(handle, inputs.rows)


def test_smollm2_prompts_carry_no_bos_of_their_own(smollm2):
    """SmolLM2 defines no BOS to add: its chat prompts reach the model exactly as
    the template wrote them, token for token."""
    prompts = [honesty.first_turn_prompt(smollm2, q) for q in QUESTIONS]
    inputs = ModelInputs(smollm2)
    try:
        smollm2.next_token(prompts)
    finally:
        inputs.close()
    expected = [smollm2.tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
    assert sorted(inputs.rows) == sorted(expected)


# ------------------------------------------------------ shared ICL prefix
def test_real_12_shot_prompts_are_the_joined_encoding(smollm2, real_dusk):
    """Every UFK/SK/URK prompt of the real data: the cached prefix + the fed rest
    are the ids of encode(ICL block + question prompt), not of the two encoded
    apart (the block's last "\\n\\n" merges with "Question" when joined)."""
    from unlearnbench.suites.dusk import data as dusk_data
    from unlearnbench.suites.dusk import metrics as dusk

    data = dusk_data.load(real_dusk)
    assert data.params["icl_shots"] == 12
    prefix = dusk.qa_prefix(data)
    prompts = [dusk.qa_prompt(q.question) for name in dusk.QA_SETS.values() for q in data.qa[name]]
    assert len(prompts) == 273
    joined = [smollm2.tokenizer(prefix + p)["input_ids"] for p in prompts]
    split = [smollm2.tokenizer(prefix)["input_ids"] + smollm2.tokenizer(p)["input_ids"] for p in prompts]
    assert sum(a != b for a, b in zip(joined, split)) == 273  # the situation under test

    shared, rests = smollm2.encode_shared_prefix(prefix, prompts)
    assert [shared + rest for rest in rests] == joined
    assert len(shared) >= len(smollm2.tokenizer(prefix)["input_ids"]) - 1


def test_12_shot_answers_equal_uncached_batch_1_generation(smollm2, real_dusk):
    """Generation behind the cached prefix feeds the model the joined ids and
    answers as HF generate does on the joined prompt alone, with no cache."""
    from unlearnbench.suites.dusk import data as dusk_data
    from unlearnbench.suites.dusk import metrics as dusk

    data = dusk_data.load(real_dusk)
    prefix = dusk.qa_prefix(data)
    questions = [q.question for name in dusk.QA_SETS.values() for q in data.qa[name][:2]]
    prompts = [dusk.qa_prompt(q) for q in questions]
    inputs = ModelInputs(smollm2)
    try:
        got = smollm2.generate(prompts, prefix=prefix, max_new_tokens=12, stop_strings=dusk.QA_STOP_STRINGS)
    finally:
        inputs.close()
    joined = [smollm2.tokenizer(prefix + p)["input_ids"] for p in prompts]
    (cached, _), *batches = inputs.calls
    shared = cached[0].tolist()
    fed = [shared + row[row_mask[len(shared):].bool()].tolist()
           for ids, mask in batches for row, row_mask in zip(ids, mask)]
    assert sorted(fed) == sorted(joined)
    for ids, answer in zip(joined, got):
        ids = torch.tensor([ids])
        out = smollm2.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                     max_new_tokens=12, pad_token_id=smollm2.tokenizer.pad_token_id)
        text = smollm2.tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True)
        assert answer == cut_at_stop(text, dusk.QA_STOP_STRINGS)
