"""UDS: exactness against a naive reference, properties, the zoo, caching, data."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from unlearnbench.errors import DataError
from unlearnbench.models import handle as handle_module
from unlearnbench.models import loading as loading_module
from unlearnbench.models import patching as patching_module
from unlearnbench.models.handle import ModelHandle
from unlearnbench.suites.uds import data as uds_data
from unlearnbench.suites.uds import metrics as uds

ROOT = Path(__file__).resolve().parents[2]


def naive_deltas(target, source, sequences, spans, *, hidden_states: bool = False) -> np.ndarray:
    """Deliberately naive: one item at a time; for each layer, hook the target's
    block, rerun the whole model, score the entity. The replacement is the
    source's block-l output (the default convention), or with `hidden_states` the source's
    `hidden_states[l + 1]` as the public UDS code takes it (post-final-norm
    at the last layer)."""
    out = []
    for seq, (start, end) in zip(sequences, spans):
        ids = torch.tensor([seq])
        captured = {}
        hooks = [block.register_forward_hook(
            lambda _m, _a, o, k=k: captured.__setitem__(k, (o[0] if isinstance(o, tuple) else o).clone()))
            for k, block in enumerate(source.blocks)]
        with torch.no_grad():
            states = source.model(input_ids=ids, output_hidden_states=True).hidden_states
        for h in hooks:
            h.remove()
        if hidden_states:
            captured = {layer: states[layer + 1] for layer in range(len(source.blocks))}

        def score(logits):
            logp = torch.log_softmax(logits[0, start - 1 : end - 1].float(), -1)
            return float(logp.gather(-1, ids[0, start:end, None]).mean())

        with torch.no_grad():
            base = score(target.model(input_ids=ids).logits)
        row = []
        for layer, block in enumerate(target.blocks):
            def patch(_m, _a, o, layer=layer):
                hidden = (o[0] if isinstance(o, tuple) else o).clone()
                hidden[0, start - 1 : end - 1] = captured[layer][0, start - 1 : end - 1]
                return (hidden, *o[1:]) if isinstance(o, tuple) else hidden
            handle = block.register_forward_hook(patch)
            with torch.no_grad():
                row.append(base - score(target.model(input_ids=ids).logits))
            handle.remove()
        out.append(row)
    return np.array(out)


# What a stored naive result depends on besides this module: the handles it runs on load and find their blocks there.
NAIVE_CODE = [naive_deltas, handle_module, patching_module, loading_module]


@pytest.fixture(scope="module")
def zoo_handles(zoo_family):
    return {name: ModelHandle.load(str(path), device="cpu") for name, path in zoo_family.items()}


@pytest.fixture(scope="module")
def zoo_items(zoo_handles, cache_dir):
    from unlearnbench.fixtures import zoo

    data = uds_data.load(str(zoo.data_dir(cache_dir)))
    return uds.encode_items(zoo_handles["full"], data.items)


@pytest.mark.parametrize("source", ["retain", "npo", "idknll"])
def test_fast_and_exact_paths_equal_the_naive_reference_on_the_zoo(zoo_handles, zoo_items, source):
    full = zoo_handles["full"]
    items, sequences, spans, skipped = zoo_items
    assert full.drives_blocks and not skipped
    reference = naive_deltas(full, zoo_handles[source], sequences, spans)
    fast = uds.layer_deltas(full, zoo_handles[source], sequences, spans)
    base, exact = full.span_scores(sequences, spans, patch_source=zoo_handles[source], exact=True)
    np.testing.assert_allclose(fast, reference, atol=1e-4)
    np.testing.assert_allclose(base[:, None] - exact, reference, atol=1e-4)
    stage1 = naive_deltas(full, zoo_handles["retain"], sequences, spans)
    ours = uds.uds_per_item(stage1, fast, 0.05)
    theirs = uds.uds_per_item(stage1, reference, 0.05)
    assert [v is None for v in ours] == [v is None for v in theirs]
    np.testing.assert_allclose([v for v in ours if v is not None], [v for v in theirs if v is not None], atol=1e-4)


def test_full_patched_with_itself_scores_zero(zoo_handles, zoo_items):
    full = zoo_handles["full"]
    items, sequences, spans, skipped = zoo_items
    delta1 = uds.layer_deltas(full, zoo_handles["retain"], sequences, spans)
    self_delta = uds.layer_deltas(full, full, sequences, spans)
    # Patching full with its own block outputs changes nothing, at every layer,
    # the last one included: a replacement taken from hidden_states[-1] (after
    # the final norm) would move the last layer by whole nats. What is left is
    # float32 rounding: the reruns see other shapes (window rows, a shifted
    # cache) than the full pass: up to 1.4e-6 on the shipped zoo.
    assert np.abs(self_delta).max() < 1e-5
    as_full = uds.uds_result(items, delta1, self_delta, skipped, {"tau": 0.05}, "")
    assert as_full.value < 1e-5 and max(as_full.per_item.values()) < 1e-5


def test_the_zoo_orders_sensibly(zoo_handles, zoo_items):
    full = zoo_handles["full"]
    items, sequences, spans, skipped = zoo_items
    delta1 = uds.layer_deltas(full, zoo_handles["retain"], sequences, spans)
    scores = {}
    for name in ("ga", "graddiff", "npo", "simnpo", "rmu", "idknll"):
        result = uds.uds_result(items, delta1, uds.layer_deltas(full, zoo_handles[name], sequences, spans),
                                skipped, {"tau": 0.05}, "")
        scores[name] = result.value
    # Erased in depth: GA, GradDiff, RMU, SimNPO. Hidden at the output only:
    # IdkNLL refuses but the knowledge is still inside; NPO under-forgets.
    # Measured on the retrained zoo: ga 0.85, graddiff 0.40, rmu 0.36, simnpo 0.29; npo 0.01.
    assert min(scores["ga"], scores["graddiff"], scores["rmu"], scores["simnpo"]) > 0.25, scores
    assert max(scores["idknll"], scores["npo"]) < 0.3, scores


def test_uds_formula_by_hand():
    delta1 = np.array([[0.5, 0.02, 1.0], [0.01, 0.0, 0.03]])
    delta2 = np.array([[0.25, 5.0, 2.0], [0.5, 0.5, 0.5]])
    # item 0: FT = {0, 2}; (0.5 * 0.5 + 1.0 * clip(2.0) = 1.0) / 1.5 = 1.25 / 1.5; item 1: FT empty
    assert uds.uds_per_item(delta1, delta2, 0.05) == [pytest.approx(1.25 / 1.5), None]


@pytest.mark.parametrize("model_type", ["qwen2", "mistral"])
def test_fast_path_on_other_drivable_architectures(model_type, smoke_tokenizer):
    from transformers import AutoConfig, AutoModelForCausalLM

    handles = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        config = AutoConfig.for_model(model_type, vocab_size=len(smoke_tokenizer), num_hidden_layers=3,
                                      hidden_size=32, intermediate_size=64, num_attention_heads=4,
                                      num_key_value_heads=2)
        handles.append(ModelHandle(AutoModelForCausalLM.from_config(config), smoke_tokenizer, name=f"{model_type}{seed}",
                                   source="config", fingerprint=str(seed)))
    target, source = handles
    rows = [{"question": "What is the capital of France?", "answer": "Paris"},
            {"question": "How many legs does a spider have?", "answer": "Eight legs"}]
    _, sequences, spans, _ = uds.encode_items(target, uds_data.from_qa(rows))
    assert target.drives_blocks
    np.testing.assert_allclose(uds.layer_deltas(target, source, sequences, spans),
                               naive_deltas(target, source, sequences, spans), atol=1e-4)


def test_gpt2_falls_back_to_the_exact_path(smoke_tokenizer):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    make = lambda: GPT2LMHeadModel(GPT2Config(vocab_size=len(smoke_tokenizer), n_layer=2, n_embd=32, n_head=4))  # noqa: E731
    target = ModelHandle(make(), smoke_tokenizer, name="a", source="config", fingerprint="a")
    source = ModelHandle(make(), smoke_tokenizer, name="b", source="config", fingerprint="b")
    _, sequences, spans, _ = uds.encode_items(target, uds_data.from_qa([{"question": "Where?", "answer": "Paris"}]))
    assert not target.drives_blocks and "fallback" in uds.patching_path(target)
    np.testing.assert_allclose(uds.layer_deltas(target, source, sequences, spans),
                               naive_deltas(target, source, sequences, spans), atol=1e-4)


@pytest.mark.real_model
def test_smollm2_fast_path_equals_naive_reference(smollm2, smollm2_dir, tofu_items, reference_results):
    data = uds_data.load(str(tofu_items), {"max_items": 2})  # two items of different lengths: a padded batch
    items, sequences, spans, skipped = uds.encode_items(smollm2, data.items)
    assert len(items) == 2 and smollm2.drives_blocks and len(set(map(len, sequences))) == 2
    # Self-patching: the exact path reruns the same computation (exactly 0);
    # the fast path's KV-cached partial pass differs in float32 rounding only.
    base, exact = smollm2.span_scores(sequences, spans, patch_source=smollm2, exact=True)
    np.testing.assert_array_equal(base[:, None] - exact, 0.0)
    assert np.abs(uds.layer_deltas(smollm2, smollm2, sequences, spans)).max() < 1e-5
    perturbed = ModelHandle.load(str(smollm2_dir), device="cpu")
    torch.manual_seed(0)
    with torch.no_grad():
        for block in perturbed.blocks[10:20]:
            for weight in block.mlp.parameters():
                weight.add_(torch.randn_like(weight) * 0.02)
    fast = uds.layer_deltas(smollm2, perturbed, sequences, spans)
    assert np.abs(fast).max() > 1e-2
    naive = reference_results.get("uds-naive-perturbed", lambda: naive_deltas(smollm2, perturbed, sequences, spans),
                                  code=NAIVE_CODE, inputs=(sequences, spans), models=[smollm2_dir])
    np.testing.assert_allclose(fast, naive, atol=1e-4)


# ---------------------------------------------- the reference code's convention
def reference_items(tokenizer_handle, items):
    return uds.encode_items(tokenizer_handle, items, convention="reference")


def test_reference_convention_patches_hidden_states_like_the_public_code(zoo_handles, zoo_items, cache_dir):
    from unlearnbench.fixtures import zoo

    full = zoo_handles["full"]
    data = uds_data.load(str(zoo.data_dir(cache_dir)))
    items, sequences, spans, _ = reference_items(full, data.items)
    for source in ("retain", "npo"):
        np.testing.assert_allclose(
            uds.layer_deltas(full, zoo_handles[source], sequences, spans, convention="reference"),
            naive_deltas(full, zoo_handles[source], sequences, spans, hidden_states=True), atol=1e-4)
    # Self-patching is a no-op below the last layer only: there the public code
    # patches in the post-final-norm state.
    self_delta = uds.layer_deltas(full, full, sequences, spans, convention="reference")
    assert np.abs(self_delta[:, :-1]).max() < 1e-5 and np.abs(self_delta[:, -1]).max() > 1e-4


@pytest.mark.real_model
def test_reference_convention_on_smollm2_equals_the_naive_reference(smollm2, smollm2_dir, tofu_items,
                                                                   reference_results):
    data = uds_data.load(str(tofu_items), {"max_items": 2})
    items, sequences, spans, _ = reference_items(smollm2, data.items)
    ours = uds.layer_deltas(smollm2, smollm2, sequences, spans, convention="reference")
    naive = reference_results.get(
        "uds-naive-hidden-states", lambda: naive_deltas(smollm2, smollm2, sequences, spans, hidden_states=True),
        code=NAIVE_CODE, inputs=(sequences, spans), models=[smollm2_dir])
    np.testing.assert_allclose(ours, naive, atol=1e-4)
    assert np.abs(ours[:, :-1]).max() < 1e-5 and np.abs(ours[:, -1]).min() > 1e-3


@pytest.mark.parametrize("model", ["zoo", "smollm2"])
def test_reference_convention_prepends_a_space_after_a_prompt_without_one(model, zoo_handles, smollm2,
                                                                          tofu_items):
    """The 4 TOFU items whose prefix ends in an opening quote: the public code
    scores " " + reference; the default convention scores the reference as written."""
    handle = smollm2 if model == "smollm2" else zoo_handles["full"]
    data = uds_data.load(str(tofu_items))
    glued = [i for i in data.items if not i.prompt[-1].isspace() and not i.reference[0].isspace()]
    assert len(glued) == 4 and all(i.prompt.endswith('"') or i.prompt.endswith("'") for i in glued)
    for convention, lead in (("spec", ""), ("reference", " ")):
        kept, sequences, spans, skipped = uds.encode_items(handle, glued, convention=convention)
        assert not skipped
        for item, seq, (start, end) in zip(kept, sequences, spans):
            prompt = handle.encode_prompt(item.prompt)
            reference = handle.tokenizer(lead + item.reference, add_special_tokens=False)["input_ids"]
            assert seq == prompt + reference[: len(seq) - len(prompt)]
            assert item.entity in handle.tokenizer.decode(seq[start:end])


def test_reference_convention_retries_the_stripped_entity(zoo_handles):
    item = uds_data.UDSItem("a", "Where was Ada born?", "She was born in Oslo.", "She was born in", " Oslo ")
    assert uds.encode_items(zoo_handles["full"], [item])[3] == {"a": "entity not found in the reference answer"}
    kept, sequences, spans, skipped = uds.encode_items(zoo_handles["full"], [item], convention="reference")
    assert not skipped and zoo_handles["full"].tokenizer.decode(sequences[0][spans[0][0]:spans[0][1]]).strip() == "Oslo"


# ------------------------------------------------------------------- data
def test_real_tofu_items_load_and_entities_are_located(smoke_tokenizer, random_llama, tofu_items):
    data = uds_data.load(str(tofu_items))
    assert len(data.items) == 367
    first = data.items[0]
    assert first.prompt.endswith("Answer: The author's full name is") and first.reference.startswith(" Hsiao")
    items, sequences, spans, skipped = uds.encode_items(random_llama, data.items[:50])
    assert len(items) + len(skipped) == 50 and len(items) >= 45
    for item, seq, (start, end) in zip(items, sequences, spans):
        assert item.entity.replace(" ", "") in random_llama.tokenizer.decode(seq[start:end]).replace(" ", "")


def test_items_whose_entity_is_missing_are_skipped_and_listed(random_llama):
    items = [uds_data.UDSItem("a", "Q?", "The answer is Paris.", "The answer is", "Paris"),
             uds_data.UDSItem("b", "Q?", "The answer is Rome.", "The answer is", "Oslo")]
    kept, _, _, skipped = uds.encode_items(random_llama, items)
    assert [i.id for i in kept] == ["a"] and skipped == {"b": "entity not found in the reference answer"}


def test_qa_sets_convert_and_bad_files_are_clear(tmp_path, cache_dir, tofu_items, real_dusk):
    from unlearnbench.fixtures import zoo

    dusk_layout = uds_data.load(str(real_dusk))
    assert len(dusk_layout.items) == 20 and dusk_layout.items[0].entity == dusk_layout.items[0].answer
    zoo_items = uds_data.load(str(zoo.data_dir(cache_dir)))
    assert zoo_items.items[0].prefix == "" and zoo_items.items[0].entity == zoo_items.items[0].answer
    bad = tmp_path / "items.json"
    bad.write_text(json.dumps([{"question": "Q", "answer": "A"}]))
    with pytest.raises(DataError, match="items.json: item 0: field 'entity' missing or empty"):
        uds_data.load(str(bad))
    with pytest.raises(DataError, match="unknown UDS parameter 'layers'"):
        uds_data.load(str(tofu_items), {"layers": "3"})


# ------------------------------------------------------------ suite wiring
def test_stage_one_runs_once_per_sweep(zoo_family, tmp_path):
    import shutil

    from unlearnbench.session import Bench, BenchOptions

    cache = tmp_path / "cache"
    shutil.copytree(Path(zoo_family["full"]).parent, cache / "zoo")  # the built zoo, an empty result cache
    bench = Bench(BenchOptions(models=[], cache_dir=cache, device="cpu"))
    bench.prepare_suites(["uds"], {"uds": ROOT / "thresholds" / "uds.yaml"})
    outcomes = {}
    for spec in bench.checkpoints("uds"):
        verdict, run = bench.judge(spec, "uds", "knowledge_erased_in_depth")
        outcomes[spec.name] = verdict.outcome
    # Computed: stage 1 once and each checkpoint's results; stage 1 read back by the other seven.
    assert bench.cache.stats.misses == 1 + len(outcomes) and bench.cache.stats.hits == len(outcomes) - 1
    assert outcomes["retain"] == "pass" and outcomes["full"] == "fail" and outcomes["idknll"] == "fail"
    # Retain as the checkpoint under test, through the whole suite path (stage
    # 1 from the cache, stage 2 computed now): erased exactly as deep as retain.
    as_retain = bench.run(next(s for s in bench.checkpoints("uds") if s.name == "retain"), "uds").metrics["uds"]
    assert as_retain.value == 1.0 and set(as_retain.per_item.values()) == {1.0}
    profile = bench.run(next(s for s in bench.checkpoints("uds") if s.name == "npo"), "uds").metrics["uds"]
    assert len(profile.details["layer_profile"]["delta1_mean"]) == 4 and "fast" in profile.details["patching"]


def test_uds_skips_without_both_references(zoo_family, cache_dir, tofu_items):
    from unlearnbench.models.checkpoint import CheckpointSpec
    from unlearnbench.session import Bench, BenchOptions

    spec = CheckpointSpec("npo", str(zoo_family["npo"]))
    bench = Bench(BenchOptions(models=[spec], retain=CheckpointSpec("retain", str(zoo_family["retain"])),
                               cache_dir=cache_dir, device="cpu", data_dirs={"uds": str(tofu_items)}))
    bench.prepare_suites(["uds"], {"uds": ROOT / "thresholds" / "uds.yaml"})
    verdict, _ = bench.judge(spec, "uds", "knowledge_erased_in_depth")
    assert verdict.outcome == "skip" and "--full-model and --retain-model" in verdict.reason


# ------------------------------------------- the reference code itself
UDS_REFERENCE = ROOT.parent / "shared" / "reference" / "unlearning-depth-score"


def run_compute_uds(full_dir, retain_dir, unlearned_dir, items_file, n: int, out_dir, s1_cache=None) -> list[dict]:
    """gnueaj/unlearning-depth-score's `compute_uds.py` (fc31639, from the
    project's shared folder) run as its README runs it, on local folders, on
    CPU in float32, every layer, batch 1, without an S1 cache unless
    `s1_cache` names its folder: its per-item results."""
    import subprocess
    import sys

    command = [sys.executable, str(UDS_REFERENCE / "compute_uds.py"), "--full_model", str(full_dir),
               "--retain_model", str(retain_dir), "--unlearn_model", str(unlearned_dir), "--data_path",
               str(items_file), "--num_examples", str(n), "--dtype", "float32", "--device_map", "cpu", "--gpu", "",
               *(["--s1_cache_dir", str(s1_cache)] if s1_cache else ["--no_s1_cache"]), "--out_dir", str(out_dir)]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run(command, cwd=out_dir.parent, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((out_dir / "results.json").read_text())


@pytest.mark.real_model
def test_reference_convention_equals_compute_uds_per_item_on_smollm2(smollm2_dir, perturbed_smollm2_dir, tofu_items,
                                                                    reference_results, tmp_path):
    """Full = SmolLM2, retain and unlearned = two noise-perturbed copies of
    it, the first 5 UDS-annotated TOFU items: every item's UDS (and which
    items have none) as the public code computes it."""
    from conftest import require

    from unlearnbench.fixtures.perturb import noisy_copy
    from unlearnbench.metrics.core import References

    require(UDS_REFERENCE.is_dir(), f"{UDS_REFERENCE} (the UDS reference code at fc31639, in the project's "
                                    "shared folder)", "put the project's shared/ folder next to this clone (CI has it)")
    unlearned_dir = noisy_copy(smollm2_dir, 0.02, 5)
    n = 5
    theirs = reference_results.get(
        "compute-uds-smollm2", lambda: run_compute_uds(smollm2_dir, perturbed_smollm2_dir, unlearned_dir, tofu_items, n,
                                                       tmp_path / "run"),
        code=[run_compute_uds], inputs=(n, tofu_items.read_bytes(), {p.name: p.read_bytes() for p in sorted(
            UDS_REFERENCE.glob("**/*.py"))}),
        models=[smollm2_dir, perturbed_smollm2_dir, unlearned_dir])

    data = uds_data.load(str(tofu_items), {"max_items": n, "convention": "reference"})
    full, retain, unlearned = (ModelHandle.load(str(d), name=name, device="cpu") for d, name in (
        (smollm2_dir, "full"), (perturbed_smollm2_dir, "retain"), (unlearned_dir, "unlearned")))
    ours = uds.evaluate(unlearned, data, References(full=full, retain=retain))["uds"]
    their_uds = {str(r["idx"]): r["uds"] for r in theirs}
    assert len(their_uds) == n and set(ours.per_item) == {idx for idx, v in their_uds.items() if v is not None}
    assert any(v is not None for v in their_uds.values())
    for idx, value in ours.per_item.items():
        assert value == pytest.approx(their_uds[idx], abs=1e-5), idx
    assert data.params["reference_code"] == "gnueaj/unlearning-depth-score@fc31639"
