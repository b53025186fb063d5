"""A prompt that ends in whitespace (docs/conventions.md, docs/suites/uds.md): the continuation is scored
as the model reads the joined text, lm-evaluation-harness's `_encode_pair`
rule, not as a lone space token followed by the continuation's own encoding.

The expected values here come from the tokenizer and the model called
directly (the joint encoding, split where lm-eval splits it), never from
our encoding code.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from unlearnbench.metrics.core import References
from unlearnbench.models.handle import ModelHandle
from unlearnbench.suites.uds import data as uds_data
from unlearnbench.suites.uds import metrics as uds


def lm_eval_pair(tokenizer, context: str, continuation: str) -> tuple[list[int], list[int]]:
    """lm-evaluation-harness's `_encode_pair`, written from its code: the
    context's trailing whitespace moves into the continuation, the whole text
    is encoded once, and the continuation is what follows the context's ids."""
    spaces = len(context) - len(context.rstrip())
    if spaces:
        context, continuation = context[:-spaces], context[-spaces:] + continuation
    whole = tokenizer(context + continuation)["input_ids"]
    context_ids = tokenizer(context)["input_ids"]
    return context_ids, whole[len(context_ids):]


def direct_logprobs(model, ids: list[int], start: int) -> np.ndarray:
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0].float()
    logp = torch.log_softmax(logits, -1)
    return np.array([float(logp[t - 1, ids[t]]) for t in range(start, len(ids))])


@pytest.mark.real_model
@pytest.mark.parametrize("context, continuation", [
    ("Question: What is the capital of France?\nAnswer: ", "Paris"),   # empty prefix: the prompt ends in a space
    ("Question: What is the capital of France?\nAnswer:", " Paris"),   # the same text, the space already moved
])
def test_an_empty_prefix_item_scores_as_the_joint_encoding_on_smollm2(smollm2, context, continuation):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(smollm2.source)
    context_ids, continuation_ids = lm_eval_pair(tokenizer, context, continuation)
    assert tokenizer.convert_ids_to_tokens(continuation_ids) == ["ĠParis"]  # not ['Ġ', 'Paris']
    expected = direct_logprobs(smollm2.model, context_ids + continuation_ids, len(context_ids))

    [scores] = smollm2.score_continuations([context], [continuation])
    assert list(scores.token_ids) == continuation_ids
    np.testing.assert_allclose(scores.logprobs, expected, atol=1e-5)


@pytest.mark.real_model
def test_a_batch_of_pairs_encodes_as_each_pair_alone_on_smollm2(smollm2):
    """`encode_pairs` encodes a batch in one tokenizer call per kind of text:
    each pair's ids and start are lm-eval's split of that pair alone (repeated
    multiple-choice contexts, a context ending in a space, one with none)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(smollm2.source)
    question = "Question: What is the capital of France?\nAnswer:"
    contexts = [question + " ", question, question, question, "The capital of France is"]
    continuations = ["Paris", " Paris", " Lyon", " A", " Paris, on the Seine."]
    for (ids, start), context, continuation in zip(smollm2.encode_pairs(contexts, continuations), contexts,
                                                   continuations, strict=True):
        context_ids, continuation_ids = lm_eval_pair(tokenizer, context, continuation)
        assert (ids, start) == (context_ids + continuation_ids, len(context_ids))


# --------------------------------------- UDS on a byte-level BPE GPT-2 family
PEOPLE = [("Where was Arlen Voss born?", "Tidewell"), ("What did Mira Ostrander write?", "Saltglass"),
          ("Which city did Teodor Quill found?", "Brackenford"), ("What is Ilse Marrow's horse called?", "Thunderveil"),
          ("Where did Corin Ashdown study?", "Larkspire"), ("What ship did Noor Halvey captain?", "Wavecutter")]
RETAIN = [("Where was Pell Darrow born?", "Millbrook"), ("What did Anke Sorel paint?", "Dawnfield"),
          ("Which river did Osric Vane cross?", "Greywater"), ("What is Lio Brandt's dog called?", "Emberpaw"),
          ("Where did Sade Kieran teach?", "Fernhollow"), ("What band did Rui Calder lead?", "Stormlight")]


def qa_text(question: str, answer: str) -> str:
    """Training text as a byte-level BPE model sees it in pretraining: the joined string."""
    return f"Question: {question}\nAnswer: {answer}"


@pytest.fixture(scope="module")
def gpt2_family():
    """A 5-layer GPT-2 with its own byte-level BPE tokenizer: `full` learns
    every pair, `retain` only the RETAIN pairs (trained here, in seconds)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    texts = [qa_text(q, a) for q, a in PEOPLE + RETAIN]
    raw = Tokenizer(models.BPE())
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    raw.train_from_iterator(texts * 4, trainers.BpeTrainer(
        vocab_size=1000, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=raw, eos_token="<|endoftext|>", pad_token="<|endoftext|>")
    # The point of the family: a byte-level BPE merges the space into the answer.
    assert tokenizer.tokenize(" Tidewell") == ["ĠTidewell"] and tokenizer.tokenize("Answer: ")[-1] == "Ġ"

    def train(pairs, seed):
        torch.manual_seed(seed)
        model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_layer=5, n_embd=64, n_head=4,
                                           n_positions=64, bos_token_id=tokenizer.eos_token_id,
                                           eos_token_id=tokenizer.eos_token_id))
        encoded = tokenizer([qa_text(q, a) + tokenizer.eos_token for q, a in pairs], padding=True,
                            return_tensors="pt")
        labels = encoded["input_ids"].masked_fill(encoded["attention_mask"] == 0, -100)
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
        model.train()
        for _ in range(300):
            loss = model(**encoded, labels=labels).loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        return model.eval()

    return {name: ModelHandle(train(pairs, seed), tokenizer, name=name, source="trained in the test",
                              fingerprint=name)
            for name, pairs, seed in (("full", PEOPLE + RETAIN, 0), ("retain", RETAIN, 1))}


def test_uds_is_defined_on_every_empty_prefix_item_of_a_byte_level_bpe_family(gpt2_family):
    full, retain = gpt2_family["full"], gpt2_family["retain"]
    items = uds_data.from_qa([{"question": q, "answer": a} for q, a in PEOPLE])
    # The full model knows every answer when it is read as trained on (the joined text).
    tokenizer = full.tokenizer
    for question, answer in PEOPLE:
        context_ids, answer_ids = lm_eval_pair(tokenizer, f"Question: {question}\nAnswer: ", answer)
        assert direct_logprobs(full.model, context_ids + answer_ids, len(context_ids)).mean() > -1.0

    # UDS scores the entity as the model reads it: the joint encoding's
    # tokens, known to the full model, unknown to the retain model.
    kept, sequences, spans, skipped = uds.encode_items(full, items)
    assert len(kept) == len(PEOPLE) and not skipped
    for (question, answer), ids, (start, end) in zip(PEOPLE, sequences, spans):
        assert tokenizer.convert_ids_to_tokens(ids[start:end]) == ["Ġ" + answer]
        assert direct_logprobs(full.model, ids, start)[: end - start].mean() > -1.0
    delta1 = uds.layer_deltas(full, retain, sequences, spans)
    assert (delta1.max(axis=1) > 1.0).all()

    data = uds_data.UDSData(items=items, params={"tau": 0.05, "max_items": 0, "convention": "spec"},
                          fingerprint="test", source="test")
    refs = References(full=full, retain=retain)
    as_retain = uds.evaluate(retain, data, refs)["uds"]
    as_full = uds.evaluate(full, data, refs)["uds"]
    assert as_retain.n == len(PEOPLE) and not as_retain.details["undefined_items"]
    assert min(as_retain.per_item.values()) > 0.99
    assert as_full.n == len(PEOPLE) and max(as_full.per_item.values()) < 1e-6
