"""Robustness probes (issue 16, docs/suites/robustness.md): the attacks against hand-worked
quantization and the published NF4 code book, relearning determinism, the
zoo gate separating a shallow unlearning from retain, and bad input."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from unlearnbench import attacks
from unlearnbench.errors import DataError
from unlearnbench.models.checkpoint import resolve
from unlearnbench.suites.robustness import data as rb_data

ROOT = Path(__file__).resolve().parents[2]

# The NF4 code book as published with QLoRA (Dettmers et al. 2023, appendix E).
NF4_CODE_BOOK = (-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635,
                 -0.18477343022823334, -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725,
                 0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
                 0.7229568362236023, 1.0)


def nf4_by_hand(weight: torch.Tensor) -> torch.Tensor:
    """Blocks of 64 in row-major order, each scaled by its absmax and every
    value replaced by the nearest code of the book, scaled back."""
    flat = weight.flatten().double()
    book = torch.tensor(NF4_CODE_BOOK, dtype=torch.float64)
    out = torch.empty_like(flat)
    for start in range(0, flat.numel(), 64):
        block = flat[start: start + 64]
        absmax = block.abs().max()
        codes = book[(block[:, None] / absmax - book[None]).abs().argmin(-1)]
        out[start: start + 64] = codes * absmax
    return out.reshape(weight.shape).float()


def test_quant4_equals_the_published_nf4_code_book_by_hand():
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(8, 128, generator=generator) * 0.05
    exact = attacks.nf4_roundtrip(weight, double_quant=False)
    torch.testing.assert_close(exact, nf4_by_hand(weight), atol=1e-6, rtol=0)
    # The study's setting also quantizes the block scales (8-bit): the same
    # codes, scales off by a fraction of a percent.
    doubled = attacks.nf4_roundtrip(weight)
    assert (doubled - exact).abs().max() < 0.01 * weight.abs().max()
    assert not torch.equal(exact, weight)


def test_quantizing_prints_no_warning_about_an_optional_hub_kernel():
    # bitsandbytes' CPU backend asks the Hugging Face Hub at import for a 4-bit
    # matrix-product kernel (on CPUs with AVX512-BF16) and warns when it does not
    # load; quantizing does not use it, and the warning landed in the middle of a
    # first run's zoo build.
    import subprocess
    import sys

    # peft imports bitsandbytes too, so applying an adapter must stay quiet as well.
    done = subprocess.run([sys.executable, "-c", "import torch; from unlearnbench import attacks; "
                           "from unlearnbench import libraries; libraries.peft(); "
                           "attacks.nf4_roundtrip(torch.ones(64, 64)); attacks.int8_roundtrip(torch.ones(64, 64))"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout == "" and done.stderr == "", done.stderr


def test_the_sentence_embedder_does_not_ask_the_hub_for_a_bitsandbytes_kernel():
    # sentence-transformers imports transformers' trainer utilities, which import
    # peft, which imports bitsandbytes: every DUSK, MUSE and ConceptGuard run loaded it.
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", "from unlearnbench.metrics.text import Embedder; "
                           "print(Embedder('all-MiniLM-L6-v2').cosine(['a cat'], ['a cat'])[0])"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and abs(float(done.stdout) - 1) < 1e-5, done.stderr
    assert "kernels-community" not in done.stderr and "publisher trust" not in done.stderr, done.stderr


def test_quant8_is_row_wise_absmax_int8_by_hand():
    generator = torch.Generator().manual_seed(1)
    weight = torch.randn(16, 96, generator=generator) * 0.05
    half = weight.half().float()  # LLM.int8() quantizes float16 weights
    absmax = half.abs().amax(dim=1, keepdim=True)
    by_hand = torch.round(half / absmax * 127) * absmax / 127
    torch.testing.assert_close(attacks.int8_roundtrip(weight), by_hand, atol=1e-6, rtol=0)


def test_quant4_quantizes_every_linear_layer_but_the_output_head(zoo_family, tmp_path):
    from transformers import AutoModelForCausalLM

    out = attacks.build(resolve(str(zoo_family["full"])), tmp_path / "q4", attacks.Attack("quant4"))
    before = AutoModelForCausalLM.from_pretrained(str(zoo_family["full"]))
    after = AutoModelForCausalLM.from_pretrained(str(out))
    changed = {name for name, p in after.named_parameters() if not torch.equal(p, before.get_parameter(name))}
    linears = {f"{n}.weight" for n, m in before.named_modules()
               if isinstance(m, torch.nn.Linear) and m is not before.get_output_embeddings()}
    assert changed == linears
    for name in linears:  # each block of 64 holds at most 16 distinct values (codes x one scale)
        blocks = after.get_parameter(name).detach().flatten().reshape(-1, 64)
        assert max(len(torch.unique(b)) for b in blocks) <= 16


def test_relearning_is_seeded_and_trains_on_the_relearning_set(zoo_family, tmp_path, cache_dir):
    from safetensors.torch import load_file

    from unlearnbench.fixtures import zoo

    data = rb_data.load(zoo.data_dir(cache_dir), {"relearn_steps": "3"})
    attack = attacks.Attack("relearn", {"steps": 3, "seed": 0}, texts=data.attacks["relearn"].texts)
    source = resolve(str(zoo_family["ga"]))
    first = load_file(attacks.build(source, tmp_path / "a", attack) / "model.safetensors")
    second = load_file(attacks.build(source, tmp_path / "b", attack) / "model.safetensors")
    original = load_file(Path(zoo_family["ga"]) / "model.safetensors")
    assert first.keys() == second.keys() == original.keys()  # LoRA merged back: a plain checkpoint
    assert all(torch.equal(first[k], second[k]) for k in first)
    assert any(not torch.equal(first[k], original[k]) for k in first)
    # The relearning set holds the forget questions, never with their own answers.
    for item in data.probe_data["ufk"].qa["unique_forget"]:
        own = rb_data.dusk_qa(item.question, item.answer)
        assert own not in data.attacks["relearn"].texts
        assert any(text.startswith(f"Question: {item.question}\n") for text in data.attacks["relearn"].texts)


@pytest.mark.parametrize("options,problem", [
    ({"attacks": "quant4,quant2"}, "expected a comma-separated list of quant4, quant8, relearn"),
    ({"probes": "ufk,mmlu"}, "expected a comma-separated list of ufk, leak, uds"),
    ({"relearn_set": "forget"}, "expected one of forget_questions, retain"),
    ({"relearn_steps": "many"}, "'relearn_steps' must be an integer >= 1"),
])
def test_bad_robustness_options_are_one_data_error(options, problem, cache_dir):
    from unlearnbench.fixtures import zoo

    with pytest.raises(DataError, match=problem):
        rb_data.load(zoo.data_dir(cache_dir), options)


def test_a_missing_attack_library_is_named_before_any_model_loads(monkeypatch, cache_dir):
    import importlib.util

    from unlearnbench.fixtures import zoo

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "peft" else real(name, *a))
    with pytest.raises(DataError, match="attack 'relearn' needs peft, which is not installed"):
        rb_data.load(zoo.data_dir(cache_dir))
    rb_data.load(zoo.data_dir(cache_dir), {"attacks": "quant4"})  # the other attacks still run


def test_an_empty_relearning_set_is_refused(tmp_path, cache_dir):
    import shutil

    from unlearnbench.fixtures import zoo

    data = tmp_path / "data"
    shutil.copytree(zoo.data_dir(cache_dir), data)
    forget_qa = data / "dusk" / "eval" / "SpecificForgetQA.jsonl"
    forget_qa.write_text(forget_qa.read_text().splitlines()[0] + "\n")  # one question: no other answer to pair
    with pytest.raises(DataError, match="relearning set .* is empty"):
        rb_data.load(data)


def test_the_zoo_gate_fails_the_shallow_unlearning_and_passes_retain(zoo_gate):
    gate = zoo_gate("robustness")
    shallow, retain = gate.verdicts("shallow"), gate.verdicts("retain")
    assert shallow["forget_knowledge_stays_gone_after_quant4"] == "fail"
    assert retain["forget_knowledge_stays_gone_after_quant4"] == "skip"  # relative to itself: n/a (reference)
    # Every check passes but the WMDP ones, which need the opt-in wmdp probe.
    hazard = {"hazard_stays_gone_after_quant4", "hazard_stays_gone_after_relearning"}
    # Every check is relative to the retain model: n/a on it (the hazard ones are skipped before that).
    assert {v for c, v in retain.items() if c not in hazard} == {"skip"}
    assert {retain[c] for c in hazard} == {"skip"}
    metrics = {name: gate.metrics(name) for name in ("shallow", "retain", "ga")}
    # Before the attack the shallow checkpoint looks forgotten; quant4 maps it back.
    assert metrics["shallow"]["ufk_before"].value < 0.3 < 0.9 < metrics["shallow"]["ufk_after_quant4"].value
    assert metrics["shallow"]["ufk_recovery_quant4"].value > 0.6
    # Relearning brings back more for GA-style unlearning than for retain (0.20 against 0.02 measured).
    assert metrics["shallow"]["ufk_recovery_relearn"].value > metrics["retain"]["ufk_recovery_relearn"].value + 0.15
    # UDS sees what the outputs hide: the shallow checkpoint's knowledge is still in its internals.
    assert metrics["shallow"]["uds_before"].value < 0.5 < metrics["retain"]["uds_before"].value


def test_the_wmdp_probe_sees_quant4_bring_back_what_shallow_unlearning_hid(cache_dir, zoo_family):
    """Issue 28: robustness reuses the WMDP suite's evaluator as a probe."""
    from unlearnbench.fixtures import zoo
    from unlearnbench.models.checkpoint import CheckpointSpec
    from unlearnbench.session import Bench, BenchOptions

    specs = [CheckpointSpec(name=n, source=f"zoo:{n}", zoo=n) for n in ("shallow", "retain")]
    run = Bench(BenchOptions(models=specs, full=CheckpointSpec("full", "zoo:full", zoo="full"),
                             retain=CheckpointSpec("retain", "zoo:retain", zoo="retain"),
                             data_dirs={"robustness": str(zoo.data_dir(cache_dir))}, cache_dir=cache_dir,
                             device="cpu", suite_options={"robustness": {"probes": "wmdp", "attacks": "quant4"}}))
    run.prepare_suites(["robustness"], {"robustness": ROOT / "thresholds" / "robustness.yaml"})
    shallow, retain = (run.run(spec, "robustness").metrics for spec in specs)
    # The same number the wmdp suite computes on the same data.
    from unlearnbench.models.handle import ModelHandle
    from unlearnbench.suites.wmdp import data as wmdp_data, metrics as wmdp

    direct = wmdp.evaluate(ModelHandle.load(str(zoo.build("shallow", cache_dir)), device="cpu"),
                           wmdp_data.load(zoo.data_dir(cache_dir)))["wmdp"]
    assert shallow["wmdp_before"].value == pytest.approx(direct.value)
    assert shallow["wmdp_before"].value < 0.8 and shallow["wmdp_after_quant4"].value > 0.9
    assert shallow["wmdp_recovery_quant4"].value > 0.2 > retain["wmdp_recovery_quant4"].value
    verdicts = {spec.name: run.judge(spec, "robustness", "hazard_stays_gone_after_quant4")[0].outcome for spec in specs}
    # The retain model is the relative yardstick, so it is judged on the absolute or_bound alone.
    assert verdicts == {"shallow": "fail", "retain": "pass"}
