"""The Hugging Face backend's parts, each built alone with only what it needs
(issue 27): the padding helper, the Batcher, the Scorer, the Generator, the
Patcher, the non-finite check and the loader. Values are checked against a
hand-worked example or an independent computation (one unbatched forward
pass, transformers' own `generate`)."""

from __future__ import annotations

import pytest
import torch

from unlearnbench.models.batching import CPU_BUDGET_BYTES, MAX_BATCH, Batcher, pad

PAD = 0


@pytest.fixture(scope="module")
def tiny_llama(smoke_tokenizer):
    """A randomly initialised 2-layer Llama over the smoke tokenizer's vocabulary."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(3)
    config = LlamaConfig(vocab_size=len(smoke_tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                         bos_token_id=smoke_tokenizer.bos_token_id, eos_token_id=smoke_tokenizer.eos_token_id,
                         pad_token_id=smoke_tokenizer.pad_token_id)
    return LlamaForCausalLM(config).eval()


def cache_kwarg(model) -> str:
    """The forward's KV-cache argument, as the handle finds it."""
    import inspect

    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def batcher(vocab_size: int = 384, **kwargs) -> Batcher:
    return Batcher(device=torch.device("cpu"), vocab_size=vocab_size, **kwargs)


def test_pad_right_left_and_behind_a_shared_head():
    ids, mask = pad([[5, 6, 7], [8]], PAD)
    assert ids.tolist() == [[5, 6, 7], [8, 0, 0]] and mask.tolist() == [[1, 1, 1], [1, 0, 0]]
    ids, mask = pad([[5, 6, 7], [8]], PAD, left=True)
    assert ids.tolist() == [[5, 6, 7], [0, 0, 8]] and mask.tolist() == [[1, 1, 1], [0, 0, 1]]
    ids, mask = pad([[5, 6], [8]], PAD, left=True, head=[1, 2])
    assert ids.tolist() == [[1, 2, 5, 6], [1, 2, 0, 8]] and mask.tolist() == [[1, 1, 1, 1], [1, 1, 0, 1]]


def test_batcher_budgets_cpu_logits_and_honours_a_fixed_size():
    # 3 float32 copies of (positions x vocabulary) per row: 100 x 50,000 x 12 bytes = 60 MB -> 17 rows in 1 GiB.
    assert batcher(50_000).size(100, full_vocab_logits=True) == CPU_BUDGET_BYTES // (100 * 50_000 * 12) == 17
    assert batcher(50_000).size(100, full_vocab_logits=False) == MAX_BATCH  # one logit row per sequence
    # Generation budgets the KV cache: an 8B-shaped model (32 layers x 8 KV heads x 128 x 2 x 4 bytes = 256 KiB a
    # token) at 600 tokens takes 150 MiB + one logit row a sequence -> 6 rows in 1 GiB.
    per_row = 600 * 32 * 8 * 128 * 2 * 4 + 128_256 * 12
    assert batcher(128_256, kv_bytes_per_token=32 * 8 * 128 * 2 * 4).size(600, full_vocab_logits=False) == \
        CPU_BUDGET_BYTES // per_row == 6
    # Scoring that reduces its logits in chunks budgets one layer's activations and each row's float32 attention
    # mask besides: Llama-3.2-1B's width (2048, MLP 8192) in float32 is (6 x 2048 + 3 x 8192) x 4 = 144 KiB a
    # token, the KV cache (16 layers x 8 x 64 x 2 x 4 bytes) 64 KiB: at 512 tokens 104 MiB + 1 MiB of mask -> 9 rows.
    kv, activations = 16 * 8 * 64 * 2 * 4, (6 * 2048 + 3 * 8192) * 4
    per_row = 512 * (kv + activations) + 512 * 512 * 4 + 128_256 * 12
    assert batcher(128_256, kv_bytes_per_token=kv, activation_bytes_per_token=activations).size(
        512, full_vocab_logits=False) == CPU_BUDGET_BYTES // per_row == 9
    assert batcher(50_000, fixed_batch_size=3).size(100, full_vocab_logits=True) == 3
    seen = []
    out = batcher(fixed_batch_size=2).map([1, 5, 3], lambda b: seen.append(list(b)) or [f"x{i}" for i in b],
                                          full_vocab_logits=True)
    assert out == ["x0", "x1", "x2"] and seen == [[1, 2], [0]]  # longest first, results in input order


def test_a_memory_budget_sizes_batches_on_cpu_and_cuda_alike(monkeypatch):
    """--memory-budget replaces the default on either device; without it CUDA
    budgets 80% of the memory free now (the driver's free memory and what
    torch's allocator holds unused), asked again before every batch."""
    from unlearnbench.models import batching

    per_row = 100 * 50_000 * 12 + 100 * 100 * 4  # the whole forward's logits of 100 positions, the mask
    assert batcher(50_000, memory_budget=per_row * 5).size(100, full_vocab_logits=True) == 5
    assert batcher(50_000, memory_budget=per_row // 2).size(100, full_vocab_logits=True) == 1  # never 0 rows
    free = [per_row * 10]
    monkeypatch.setattr(batching.torch.cuda, "mem_get_info", lambda device: (free[0], 80 << 30))
    monkeypatch.setattr(batching.torch.cuda, "memory_reserved", lambda device: 3 * per_row)
    monkeypatch.setattr(batching.torch.cuda, "memory_allocated", lambda device: per_row)
    cuda = Batcher(device=torch.device("cuda"), vocab_size=50_000)
    assert cuda.budget() == int(0.8 * 12 * per_row) and cuda.size(100, full_vocab_logits=True) == 9
    free[0] = per_row * 3  # another model loaded beside it: the next batch is smaller
    assert cuda.size(100, full_vocab_logits=True) == 4
    assert Batcher(device=torch.device("cuda"), vocab_size=50_000, memory_budget=per_row * 2).size(
        100, full_vocab_logits=True) == 2


@pytest.mark.parametrize("text, size", [("auto", None), ("512MiB", 512 << 20), ("4GB", 4 * 10**9),
                                        ("1.5g", int(1.5 * (1 << 30))), ("2 GiB", 2 << 30)])
def test_memory_budget_sizes_are_read_with_their_units(text, size):
    from unlearnbench.options import memory_budget_of

    assert memory_budget_of(text) == size


@pytest.mark.parametrize("text", ["1024", "lots", "-1GB", "2 parsecs"])
def test_a_memory_budget_that_is_no_size_is_one_message(text):
    from unlearnbench.options import memory_budget_of
    from unlearnbench.errors import UnlearnbenchError

    with pytest.raises(UnlearnbenchError, match=r"--memory-budget must be 'auto' or a size of at least 1 MiB"):
        memory_budget_of(text)


def test_batcher_halves_on_cuda_out_of_memory_and_keeps_the_smaller_size():
    cuda = Batcher(device=torch.device("cuda"), vocab_size=384, memory_budget=1 << 40)
    cuda.cap = 16
    calls = []

    def run(batch):
        calls.append(len(batch))
        if len(batch) > 3:
            raise torch.cuda.OutOfMemoryError("fake")
        return [f"item{i}" for i in batch]

    assert cuda.map(list(range(10, 0, -1)), run, full_vocab_logits=True) == [f"item{i}" for i in range(10)]
    assert calls[:3] == [10, 5, 2] and cuda.cap == 2


def test_scorer_equals_one_unbatched_forward_pass(tiny_llama):
    from unlearnbench.models.scoring import Scorer

    scorer = Scorer(tiny_llama, batcher(), pad_id=PAD, name="tiny", keeps_logits=True)
    sequences = [[1, 9, 14, 22, 30, 41], [1, 7, 8], [1, 50, 60, 70]]
    scored = scorer.token_logprobs(sequences, [2, 1, 3], vocab_stats=True)
    nxt = scorer.next_token(sequences, [[3, 4], [5], [6, 7, 8]])
    for seq, start, got, logprobs, entropy in zip(sequences, [2, 1, 3], scored, nxt.logprobs, nxt.entropy):
        with torch.no_grad():
            logp = torch.log_softmax(tiny_llama(torch.tensor([seq])).logits[0].float(), dim=-1)
        want = logp[start - 1 : len(seq) - 1].gather(-1, torch.tensor(seq[start:])[:, None])[:, 0]
        torch.testing.assert_close(torch.from_numpy(got.logprobs), want, atol=1e-5, rtol=1e-5)
        p = logp[start - 1 : len(seq) - 1].exp()
        torch.testing.assert_close(torch.from_numpy(got.vocab_mean), (p * logp[start - 1 : len(seq) - 1]).sum(-1),
                                   atol=1e-5, rtol=1e-5)
        last = logp[-1]
        assert float(entropy) == pytest.approx(float(-(last.exp() * last).sum()), abs=1e-5)
    torch.testing.assert_close(torch.from_numpy(nxt.logprobs[0]), torch.log_softmax(
        tiny_llama(torch.tensor([sequences[0]])).logits[0, -1].float(), -1)[[3, 4]].detach(), atol=1e-5, rtol=1e-5)


def test_generator_equals_transformers_generate_with_and_without_a_shared_prefix(tiny_llama, smoke_tokenizer):
    from unlearnbench.models.generation import Generator

    generator = Generator(tiny_llama, smoke_tokenizer, batcher(), name="tiny", cache_kwarg=cache_kwarg(tiny_llama),
                          keeps_logits=True)
    head = smoke_tokenizer("The capital of", add_special_tokens=True)["input_ids"]
    rests = [smoke_tokenizer(t, add_special_tokens=False)["input_ids"] for t in (" France is", " a", " the old city")]
    expected = []
    for rest in rests:
        ids = torch.tensor([head + rest])
        out = tiny_llama.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=6, do_sample=False,
                                  pad_token_id=smoke_tokenizer.pad_token_id)
        expected.append(smoke_tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True))
    assert generator.generate(head, rests, max_new_tokens=6) == expected
    generator.reuse_prefix_cache = False
    assert generator.generate(head, rests, max_new_tokens=6) == expected


@pytest.mark.parametrize("clean_up", [False, True])
def test_the_stop_check_decodes_as_the_tokenizer_does(tiny_llama, smoke_tokenizer, clean_up):
    """One batched call to the Rust tokenizer where `decode` is exactly that
    (no space clean-up), one `decode` a row otherwise: the same strings."""
    import copy

    from unlearnbench.models.generation import Generator

    tokenizer = copy.deepcopy(smoke_tokenizer)
    tokenizer.clean_up_tokenization_spaces = clean_up
    generator = Generator(tiny_llama, tokenizer, batcher(), name="tiny", cache_kwarg=cache_kwarg(tiny_llama),
                          keeps_logits=True)
    rows = [tokenizer(t, add_special_tokens=True)["input_ids"] for t in ("Hello , world .", "Question: it isn't", "")]
    assert generator._decode(rows) == [tokenizer.decode(r, skip_special_tokens=True) for r in rows]


def test_patcher_reads_pre_norm_block_outputs_and_a_self_patch_changes_nothing(tiny_llama):
    from unlearnbench.models.patching import Patcher

    patcher = Patcher(tiny_llama, batcher(), pad_id=PAD, name="tiny", cache_kwarg=cache_kwarg(tiny_llama),
                      keeps_logits=True)
    ids = torch.tensor([[1, 9, 14, 22, 30], [1, 7, 8, 9, 10]])
    mask = torch.ones_like(ids)
    blocks = patcher.block_outputs(ids, mask)
    with torch.no_grad():
        plain = tiny_llama(input_ids=ids, attention_mask=mask, output_hidden_states=True)
    assert blocks.shape[0] == patcher.num_layers == 2
    torch.testing.assert_close(tiny_llama.model.norm(blocks[-1]), plain.hidden_states[-1], atol=1e-5, rtol=1e-5)
    positions = torch.zeros_like(ids, dtype=torch.bool)
    positions[:, 2:4] = True
    same = patcher.forward_with_patch(ids, mask, layer=0, positions=positions, replacement=blocks[0])
    torch.testing.assert_close(same, plain.logits.float(), atol=1e-5, rtol=1e-5)
    scores = patcher.span_scores([[1, 9, 14, 22, 30]], [(2, 4)], patch_source=patcher)
    torch.testing.assert_close(torch.from_numpy(scores.patched[0]).float(),
                               torch.full((2,), float(scores.scores[0])), atol=1e-5, rtol=1e-5)


def test_finite_check_names_the_first_broken_pass_and_ignores_padding():
    from unlearnbench.errors import NonFiniteOutputError
    from unlearnbench.models.handle import FiniteLogitsCheck

    check = FiniteLogitsCheck("ckpt")
    output = type("Out", (), {})
    output.logits = torch.tensor([[[0.0, 1.0], [float("nan"), 0.0]]])
    check(None, (), {"attention_mask": torch.tensor([[1, 0]])}, output)  # the NaN sits on a padded position
    assert check.finite_forwards == 1
    with pytest.raises(NonFiniteOutputError, match=r"non-finite logits \(NaN\) in forward pass 2 \(the earlier"):
        check(None, (), {"attention_mask": torch.tensor([[1, 1]])}, output)


def test_loader_returns_the_weights_and_names_a_broken_checkpoint(smoke_lm_dir, tmp_path):
    import json
    import shutil

    from unlearnbench.errors import CheckpointError
    from unlearnbench.models.loading import load_weights

    loaded = load_weights(str(smoke_lm_dir), name="lm", device="cpu")
    assert loaded.name == "lm" and loaded.tokenizer is not None and len(loaded.fingerprint) >= 16
    assert next(loaded.model.parameters()).device.type == "cpu" and loaded.offload_folder is None
    broken = shutil.copytree(smoke_lm_dir, tmp_path / "broken")
    config = json.loads((broken / "config.json").read_text())
    (broken / "config.json").write_text(json.dumps({**config, "vocab_size": 10}))
    with pytest.raises(CheckpointError, match=r"lm2 \(.*broken\).*tokenizer has \d+ tokens, model embeds only 10"):
        load_weights(str(broken), name="lm2", device="cpu")


def test_the_handle_sizes_the_kv_cache_from_the_config(tiny_llama, smoke_tokenizer):
    """2 layers x 2 KV heads x head dim 8 (32 / 4 heads) x (key + value) x 4 bytes = 256 bytes a token."""
    from unlearnbench.models.handle import ModelHandle

    handle = ModelHandle(tiny_llama, smoke_tokenizer, name="tiny", source="config", fingerprint="tiny")
    assert handle.kv_bytes_per_token == 2 * 2 * 8 * 2 * 4 == handle.batcher.kv_bytes_per_token
