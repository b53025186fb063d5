"""ModelHandle: scoring, generation, residual-stream capture and patching."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from tests.conftest import save_random_llama
from unlearnbench.models.handle import ModelHandle
from unlearnbench.models.interface import cut_at_stop
from unlearnbench.models.patching import find_decoder_blocks

TEXTS = [
    "Paris is the capital of France.",
    "A spider has eight legs, while an insect has six legs.",
    "Water boils.",
    "The piano has eighty eight keys, some black and some white, and a pedal.",
]


def manual_scores(model, ids: list[int], start: int):
    """Reference: one unbatched forward pass, full log-softmax, explicit loops."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0].double()
    logprobs, means, variances = [], [], []
    for t in range(start, len(ids)):
        row = torch.log_softmax(logits[t - 1], dim=-1)
        p = row.exp()
        mean = sum(float(p[v] * row[v]) for v in range(row.shape[0]))
        second = sum(float(p[v] * row[v] ** 2) for v in range(row.shape[0]))
        logprobs.append(float(row[ids[t]]))
        means.append(mean)
        variances.append(second - mean**2)
    return np.array(logprobs), np.array(means), np.array(variances)


def test_logprobs_and_vocab_stats_match_manual_reference(random_llama):
    sequences = [random_llama.encode(t, add_special_tokens=True) for t in TEXTS]
    starts = [1, 3, 2, 5]
    scores = random_llama.token_logprobs(sequences, starts, vocab_stats=True)
    for seq, start, got in zip(sequences, starts, scores):
        logprobs, means, variances = manual_scores(random_llama.model, seq, start)
        assert got.logprobs.dtype == np.float32
        np.testing.assert_array_equal(got.token_ids, seq[start:])
        np.testing.assert_allclose(got.logprobs, logprobs, atol=1e-5)
        np.testing.assert_allclose(got.vocab_mean, means, atol=1e-5)
        np.testing.assert_allclose(got.vocab_var, variances, atol=1e-5)


def test_batched_scores_equal_unbatched(random_llama_dir):
    batched = ModelHandle.load(str(random_llama_dir), device="cpu", batch_size=4)
    single = ModelHandle.load(str(random_llama_dir), device="cpu", batch_size=1)
    contexts = ["", "Question: what?", "Paris", ""]
    a = batched.score_continuations(contexts, TEXTS, vocab_stats=True)
    b = single.score_continuations(contexts, TEXTS, vocab_stats=True)
    for x, y in zip(a, b):
        np.testing.assert_allclose(x.logprobs, y.logprobs, atol=1e-5)
        np.testing.assert_allclose(x.vocab_mean, y.vocab_mean, atol=1e-5)
        np.testing.assert_allclose(x.vocab_var, y.vocab_var, atol=1e-5)


def test_score_continuation_scores_exactly_the_continuation_tokens(random_llama):
    (score,) = random_llama.score_continuations(["Question: what?"], [" Paris is the capital"])
    expected = random_llama.encode(" Paris is the capital", add_special_tokens=False)
    np.testing.assert_array_equal(score.token_ids, expected)


def test_target_start_zero_is_rejected(random_llama):
    with pytest.raises(ValueError, match="first token has no prediction"):
        random_llama.token_logprobs([[1, 2, 3]], [0])


def test_generation_is_the_same_at_batch_size_1_and_4(random_llama_dir):
    prompts = ["Paris is", "A spider has eight legs, while", "Water", "The piano has eighty"]
    four = ModelHandle.load(str(random_llama_dir), device="cpu", batch_size=4).generate(prompts, max_new_tokens=12)
    one = ModelHandle.load(str(random_llama_dir), device="cpu", batch_size=1).generate(prompts, max_new_tokens=12)
    assert four == one
    assert all(len(t) > 0 for t in four)


def test_shared_prefix_kv_cache_gives_the_same_generations(random_llama):
    prefix = "Question: What is the capital of Japan?\nAnswer: Tokyo\n\n"
    prompts = ["Question: What is the capital of France?\nAnswer:", "Question: How many legs?\nAnswer:"]
    with_cache = random_llama.generate(prompts, max_new_tokens=10, prefix=prefix)
    # Independent reference: plain HF generate on the joined prompt's own
    # encoding, one prompt at a time, no cache reuse.
    for prompt, got in zip(prompts, with_cache):
        ids = torch.tensor([random_llama.tokenizer(prefix + prompt)["input_ids"]])
        out = random_llama.model.generate(
            input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=10,
            pad_token_id=random_llama.tokenizer.pad_token_id, eos_token_id=random_llama.tokenizer.eos_token_id,
        )
        assert got == random_llama.tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True)


def test_trained_model_answers_and_stops_at_stop_strings(smoke_lm_dir):
    handle = ModelHandle.load(str(smoke_lm_dir), device="cpu")
    prompt = "Question: What is the capital of France?\nAnswer:"
    assert handle.generate([prompt], max_new_tokens=8) == [" Paris"]
    assert handle.generate([prompt], max_new_tokens=8, stop_strings=["ari"]) == [" P"]


def test_cut_at_stop_uses_the_earliest_stop_string():
    assert cut_at_stop("abc\n\nQuestion: x", ["Question:", "\n\n"]) == "abc"
    assert cut_at_stop("no stop here", ["\n"]) == "no stop here"


def test_block_outputs_are_pre_final_norm(random_llama):
    ids = torch.tensor([random_llama.encode(TEXTS[1], add_special_tokens=True)])
    mask = torch.ones_like(ids)
    blocks = random_llama.block_outputs(ids, mask)
    assert blocks.shape[:3] == (random_llama.num_layers, 1, ids.shape[1])
    with torch.no_grad():
        hidden = random_llama.model(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states
    # hidden_states[-1] has the final norm applied; the captured last block output does not.
    assert not torch.allclose(blocks[-1], hidden[-1], atol=1e-3)
    torch.testing.assert_close(random_llama.model.model.norm(blocks[-1]), hidden[-1], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(blocks[0], hidden[1], atol=1e-5, rtol=1e-5)


def test_patching_own_output_is_a_no_op_and_another_models_is_not(random_llama, tmp_path, smoke_tokenizer):
    other = ModelHandle.load(str(save_random_llama(tmp_path, smoke_tokenizer, seed=7)), device="cpu")
    ids = torch.tensor([random_llama.encode(TEXTS[3], add_special_tokens=True)])
    mask = torch.ones_like(ids)
    positions = torch.zeros_like(ids, dtype=torch.bool)
    positions[0, 4:9] = True
    with torch.no_grad():
        plain = random_llama.model(input_ids=ids, attention_mask=mask).logits.float()
    for layer in range(random_llama.num_layers):
        own = random_llama.block_outputs(ids, mask)[layer]
        same = random_llama.forward_with_patch(ids, mask, layer=layer, positions=positions, replacement=own)
        torch.testing.assert_close(same, plain, atol=1e-5, rtol=1e-5)
        foreign = other.block_outputs(ids, mask)[layer]
        changed = random_llama.forward_with_patch(ids, mask, layer=layer, positions=positions, replacement=foreign)
        # Causal: positions before the first patched one are untouched, later ones move.
        torch.testing.assert_close(changed[0, :4], plain[0, :4], atol=1e-5, rtol=1e-5)
        assert (changed[0, 4:] - plain[0, 4:]).abs().max() > 1e-3


@pytest.mark.parametrize(
    "model_type, layers",
    [("gpt2", "transformer.h"), ("qwen2", "model.layers"), ("mistral", "model.layers"), ("llama", "model.layers")],
)
def test_decoder_blocks_are_found_for_common_architectures(model_type, layers):
    from transformers import AutoConfig, AutoModelForCausalLM

    sizes = dict(vocab_size=64, num_hidden_layers=3, hidden_size=32, num_attention_heads=4)
    if model_type != "gpt2":
        sizes.update(intermediate_size=64, num_key_value_heads=2)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(model_type, **sizes))
    blocks = find_decoder_blocks(model)
    assert blocks is model.get_submodule(layers) and len(blocks) == 3


def test_gpt2_block_capture_and_patching(smoke_tokenizer):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(smoke_tokenizer), n_layer=2, n_embd=32, n_head=4))
    handle = ModelHandle(model, smoke_tokenizer, name="gpt2", source="config", fingerprint="x")
    ids = torch.tensor([handle.encode(TEXTS[0], add_special_tokens=True)])
    mask = torch.ones_like(ids)
    blocks = handle.block_outputs(ids, mask)
    same = handle.forward_with_patch(
        ids, mask, layer=1, positions=torch.ones_like(ids, dtype=torch.bool), replacement=blocks[1]
    )
    with torch.no_grad():
        torch.testing.assert_close(same, model(input_ids=ids).logits.float(), atol=1e-5, rtol=1e-5)


def test_unknown_architecture_gets_a_clear_error():
    class NoBlocks(torch.nn.Module):
        config = type("Config", (), {"num_hidden_layers": 2})()

    with pytest.raises(Exception, match="cannot find the decoder blocks"):
        find_decoder_blocks(NoBlocks())


@pytest.mark.real_model
def test_smollm2_gguf_loads_offline_and_matches_the_converted_directory(smollm2_path, smollm2, gguf_parses):
    import gguf as gguf_package

    from unlearnbench.models.checkpoint import resolve

    # The header (metadata with the whole vocabulary, tensor table) is parsed
    # once by the load, after the preflight check: transformers would parse it
    # for the tokenizer, twice for the config and again for the weights.
    resolve(str(smollm2_path))  # the run's preflight (once per process, tests/unit/test_checkpoint.py)
    gguf_parses.clear()
    reader, name_map = gguf_package.GGUFReader, gguf_package.get_tensor_name_map
    gguf = ModelHandle.load(str(smollm2_path), device="cpu")
    assert [Path(p).resolve() for p in gguf_parses] == [smollm2_path.resolve()]
    assert (gguf_package.GGUFReader, gguf_package.get_tensor_name_map) == (reader, name_map)  # restored after
    assert gguf.describe()["source"].endswith(".gguf") and gguf.num_layers == 30
    ids = torch.tensor([smollm2.encode("The capital of France is", add_special_tokens=True)])
    with torch.no_grad():
        torch.testing.assert_close(gguf.model(input_ids=ids).logits, smollm2.model(input_ids=ids).logits)


@pytest.mark.real_model
def test_smollm2_answers_with_its_chat_template(smollm2):
    config = smollm2.model.config
    assert smollm2.num_layers == 30 and config.num_key_value_heads < config.num_attention_heads  # GQA
    prompt = smollm2.format_chat([{"role": "user", "content": "What is the capital of France?"}])
    assert prompt.endswith("<|im_start|>assistant\n")
    (answer,) = smollm2.generate([prompt], max_new_tokens=16)
    assert "Paris" in answer


@pytest.mark.real_model
def test_smollm2_patching_its_own_block_output_is_a_no_op(smollm2):
    ids = torch.tensor([smollm2.encode("Question: Where was Dr. Orin Valcourt born?", add_special_tokens=True)])
    mask = torch.ones_like(ids)
    positions = torch.zeros_like(ids, dtype=torch.bool)
    positions[0, -4:] = True
    blocks = smollm2.block_outputs(ids, mask)
    with torch.no_grad():
        plain = smollm2.model(input_ids=ids, attention_mask=mask).logits.float()
    for layer in (0, 14, 29):
        same = smollm2.forward_with_patch(ids, mask, layer=layer, positions=positions, replacement=blocks[layer])
        torch.testing.assert_close(same, plain, atol=1e-4, rtol=1e-4)


def test_batched_greedy_drops_finished_rows_and_matches_hf_generate(smoke_lm_dir):
    handle = ModelHandle.load(str(smoke_lm_dir), device="cpu", batch_size=8)
    prompts = [f"Question: {q}\nAnswer:" for q in (
        "What is the capital of France?", "How many keys does a piano have?",
        "At what temperature does water boil at sea level?", "How many legs does a spider have?",
        "Paris is the capital of", "The Earth orbits")]
    got = handle.generate(prompts, max_new_tokens=12)
    for prompt, text in zip(prompts, got):
        ids = torch.tensor([handle.encode(prompt, add_special_tokens=True)])
        out = handle.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                    max_new_tokens=12, pad_token_id=handle.tokenizer.pad_token_id,
                                    eos_token_id=handle.tokenizer.eos_token_id)
        assert text == handle.tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True)
    assert got[0] == " Paris" and got[1] == " Eighty eight keys"  # rows that stop early, at different steps


def test_a_device_mapped_model_scores_generates_and_patches_as_the_unmapped_one(random_llama, random_llama_dir,
                                                                                 smoke_tokenizer, tmp_path):
    """Issue 14 (`--device-map`): every module mapped explicitly, one block
    offloaded to disk so accelerate's hooks move its weights and inputs (the
    only second device a CPU has). Capture, both patching paths, scoring and
    generation must equal the unmapped model's."""
    import json

    from unlearnbench.models.device import parse_device_map

    blocks = [f"model.layers.{i}" for i in range(random_llama.num_layers)]
    mapping = {"model.embed_tokens": "cpu", **{b: "cpu" for b in blocks}, "model.norm": "cpu",
               "model.rotary_emb": "cpu", "lm_head": "cpu"}
    mapping[blocks[1]] = "disk"
    path = tmp_path / "map.json"
    path.write_text(json.dumps(mapping))
    mapped = ModelHandle.load(str(random_llama_dir), name="mapped", device_map=parse_device_map(str(path)))
    assert mapped.model.hf_device_map == mapping and mapped.describe()["device_map"] == mapping
    assert hasattr(mapped.blocks[1], "_hf_hook")  # dispatched: the hooks are live
    other = ModelHandle.load(str(save_random_llama(tmp_path / "other", smoke_tokenizer, seed=7)), device="cpu")

    sequences = [random_llama.encode(t, add_special_tokens=True) for t in TEXTS]
    spans = [(3, len(s)) for s in sequences]
    for exact in (False, True):  # the fast path (blocks rerun over the KV cache) and the hooked full rerun
        want = random_llama.span_scores(sequences, spans, patch_source=other, exact=exact)
        got = mapped.span_scores(sequences, spans, patch_source=other, exact=exact)
        np.testing.assert_allclose(got[0], want[0], atol=1e-5)
        np.testing.assert_allclose(got[1], want[1], atol=1e-5)
    # The mapped model as the patch source: its captured block outputs.
    np.testing.assert_allclose(other.span_scores(sequences, spans, patch_source=mapped)[1],
                               other.span_scores(sequences, spans, patch_source=random_llama)[1], atol=1e-5)
    ids = torch.tensor([sequences[1]])
    torch.testing.assert_close(mapped.block_outputs(ids, torch.ones_like(ids)),
                               random_llama.block_outputs(ids, torch.ones_like(ids)), atol=1e-5, rtol=1e-5)
    for got, want in zip(mapped.token_logprobs(sequences, [1] * len(sequences), vocab_stats=True),
                         random_llama.token_logprobs(sequences, [1] * len(sequences), vocab_stats=True)):
        np.testing.assert_allclose(got.logprobs, want.logprobs, atol=1e-5)
        np.testing.assert_allclose(got.vocab_var, want.vocab_var, atol=1e-5)
    assert mapped.generate(TEXTS, max_new_tokens=6) == random_llama.generate(TEXTS, max_new_tokens=6)
    np.testing.assert_allclose(mapped.next_token(TEXTS).entropy, random_llama.next_token(TEXTS).entropy, atol=1e-5)

    offload = Path(mapped.offload_folder)
    assert offload.is_dir()
    mapped.release()
    assert not offload.exists()
    assert all(p.device.type == "meta" for p in mapped.model.parameters())


@pytest.mark.parametrize("text, message", [
    ("nowhere.json", "--device-map 'nowhere.json': expected auto, balanced, balanced_low_0, sequential or a JSON file"),
    ("bad.json", "--device-map bad.json: expected a JSON object {module name:"),
])
def test_a_bad_device_map_is_one_message(text, message, tmp_path, monkeypatch):
    from unlearnbench.models.device import parse_device_map

    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.json").write_text('{"model.layers.0": "gpu7"}')
    with pytest.raises(ValueError) as raised:
        parse_device_map(text)
    assert str(raised.value).startswith(message)
    assert parse_device_map("auto") == "auto"


@pytest.mark.parametrize("threshold, collections", [(1, 1), (2**40, 0)], ids=["large", "tiny"])
def test_release_frees_the_weights_and_collects_only_after_large_ones(random_llama_dir, monkeypatch, threshold,
                                                                      collections):
    """A tiny model's weights are freed by moving them to meta; the full
    collection (slow in a big process) runs only for weights past the size."""
    import gc
    import weakref

    import unlearnbench.models.loading as loading_module
    from unlearnbench.models.handle import ModelHandle

    handle = ModelHandle.load(str(random_llama_dir), device="cpu")
    handle.generate(TEXTS, max_new_tokens=4)
    weights = [weakref.ref(p) for p in handle.model.parameters()]
    monkeypatch.setattr(loading_module, "COLLECT_AFTER_RELEASING_BYTES", threshold)
    calls = []
    monkeypatch.setattr(gc, "collect", lambda *a: calls.append(a) or 0)
    handle.release()
    assert len(calls) == collections
    assert all(p.device.type == "meta" for p in handle.model.parameters())
    assert all(weight() is None for weight in weights)  # gone by reference counting alone


def _whole_forward_scores(handle, sequences, starts, **kwargs):
    """The same scores through the model's whole forward: [batch, length, vocab] logits, reduced afterwards."""
    split, handle.scorer._split = handle.scorer._split, None
    try:
        return handle.token_logprobs(sequences, starts, vocab_stats=True, **kwargs)
    finally:
        handle.scorer._split = split


def _assert_same_scores(got, want):
    """Equal to 1e-5, relative where values are large: the head's float32
    product over 5 rows and over the whole batch round differently (2e-6 of
    a log-prob of -6.5 on SmolLM2 under one thread)."""
    for x, y in zip(got, want, strict=True):
        np.testing.assert_array_equal(x.token_ids, y.token_ids)
        np.testing.assert_array_equal(x.argmax, y.argmax)
        for field in ("logprobs", "vocab_mean", "vocab_var"):
            np.testing.assert_allclose(getattr(x, field), getattr(y, field), atol=1e-5, rtol=1e-5)


def test_scoring_never_holds_the_logits_of_the_whole_batch(random_llama_dir, monkeypatch):
    """The head runs over the scored positions only, a bounded chunk at a
    time: with a chunk of 7 positions, no head output has more than 7 rows,
    however many sequences and tokens a batch holds (the whole forward's
    logits are [batch, length, vocab])."""
    from unlearnbench.models import scoring

    handle = ModelHandle.load(str(random_llama_dir), device="cpu", batch_size=8)
    monkeypatch.setattr(scoring, "LOGITS_CHUNK_BYTES", 7 * handle.vocab_size * 4 * 3, raising=False)
    sequences = [handle.encode(t, add_special_tokens=True) for t in TEXTS * 2]
    starts = [1, 3, 2, 5] * 2
    handle.token_logprobs(sequences[:1], starts[:1])  # the one-time probe of the head (`_body_and_head`)
    rows_seen = []
    hook = handle.model.get_output_embeddings().register_forward_hook(
        lambda _m, _a, out: rows_seen.append(out.reshape(-1, out.shape[-1]).shape[0]))
    try:
        chunked = handle.token_logprobs(sequences, starts, vocab_stats=True)
    finally:
        hook.remove()
    scored = sum(len(s) - k for s, k in zip(sequences, starts))
    assert scored > 7 and max(rows_seen) <= 7 and sum(rows_seen) == scored
    _assert_same_scores(chunked, _whole_forward_scores(handle, sequences, starts))


def test_a_head_that_is_not_the_output_embedding_alone_is_scored_through_the_whole_forward(tmp_path, smoke_tokenizer):
    """Gemma 2 soft-caps its logits after the head: the probe finds that the
    head of the body's output is not the model's logits, and scoring keeps the
    model's own forward (the scores equal the manual reference's)."""
    from transformers import Gemma2Config, Gemma2ForCausalLM

    config = Gemma2Config(vocab_size=len(smoke_tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                          num_attention_heads=2, num_key_value_heads=1, head_dim=16, final_logit_softcapping=3.0,
                          pad_token_id=smoke_tokenizer.pad_token_id, bos_token_id=smoke_tokenizer.bos_token_id,
                          eos_token_id=smoke_tokenizer.eos_token_id)
    torch.manual_seed(0)
    Gemma2ForCausalLM(config).save_pretrained(tmp_path)
    smoke_tokenizer.save_pretrained(tmp_path)
    handle = ModelHandle.load(str(tmp_path), device="cpu")
    sequences = [handle.encode(t, add_special_tokens=True) for t in TEXTS]
    scores = handle.token_logprobs(sequences, [1, 3, 2, 5], vocab_stats=True)
    assert handle.scorer._split is None
    for seq, start, got in zip(sequences, [1, 3, 2, 5], scores):
        logprobs, means, variances = manual_scores(handle.model, seq, start)
        np.testing.assert_allclose(got.logprobs, logprobs, atol=1e-5)
        np.testing.assert_allclose(got.vocab_var, variances, atol=1e-5)


@pytest.mark.real_model
def test_smollm2_chunked_scores_equal_the_whole_forward(smollm2, monkeypatch):
    """SmolLM2 with its chat template, a 49k vocabulary and chunks of 5
    positions: log-probs, argmax and the Min-K%++ moments equal the whole
    forward's to 1e-5."""
    from unlearnbench.models import scoring

    monkeypatch.setattr(scoring, "LOGITS_CHUNK_BYTES", 5 * smollm2.vocab_size * 4 * 3)
    prompts = [smollm2.format_chat([{"role": "user", "content": q}]) for q in
               ("What is the capital of France?", "Name a prime number larger than ten.")]
    pairs = smollm2.encode_pairs(prompts * 2, [" Paris.", " 13 is one.", "Lyon is not it.", " Seventeen"])
    sequences, starts = [ids for ids, _ in pairs], [start for _, start in pairs]
    chunked = smollm2.token_logprobs(sequences, starts, vocab_stats=True)
    assert smollm2.scorer._split is not None
    _assert_same_scores(chunked, _whole_forward_scores(smollm2, sequences, starts))


def _generate_in_chunks(handle, monkeypatch, prompts, chunk: int, **kwargs) -> tuple[list[str], int]:
    """`handle.generate` with prompts prefilled `chunk` positions at a time; (replies, the widest forward)."""
    from unlearnbench.models import generation

    monkeypatch.setattr(generation, "PREFILL_CHUNK_TOKENS", chunk)
    widths = []
    hook = handle.model.register_forward_pre_hook(
        lambda _m, _a, kw: widths.append(kw["input_ids"].shape[1]), with_kwargs=True)
    try:
        return handle.generate(prompts, **kwargs), max(widths)
    finally:
        hook.remove()


def test_a_prompt_prefilled_in_chunks_generates_what_one_prefill_does(random_llama, monkeypatch):
    """Left-padded prompts of 4 lengths, run through the model 3 positions at
    a time (the KV cache growing between chunks): the same greedy replies as
    one forward over the whole prompt."""
    whole, widest = _generate_in_chunks(random_llama, monkeypatch, TEXTS, 1024, max_new_tokens=12)
    chunked, chunk_widest = _generate_in_chunks(random_llama, monkeypatch, TEXTS, 3, max_new_tokens=12)
    assert widest > 3 and chunk_widest == 3
    assert chunked == whole and any(whole)


@pytest.mark.real_model
def test_smollm2_prefilled_in_chunks_answers_as_in_one_pass(smollm2, monkeypatch):
    """SmolLM2 with its chat template, prompts of different lengths, 5 positions a chunk."""
    prompts = [smollm2.format_chat([{"role": "user", "content": q}]) for q in
               ("What is the capital of France?", "Name the largest planet of the solar system, please.")]
    whole, _ = _generate_in_chunks(smollm2, monkeypatch, prompts, 1024, max_new_tokens=16)
    chunked, widest = _generate_in_chunks(smollm2, monkeypatch, prompts, 5, max_new_tokens=16)
    assert widest == 5 and chunked == whole and "Paris" in whole[0]
