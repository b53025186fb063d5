"""A PEFT adapter is a checkpoint (issue 45): `--model NAME=DIR` on a LoRA
output folder (`adapter_config.json` + `adapter_model.safetensors`) loads its
base and applies the adapter; the suites score it as they score the merged
model (`merge_and_unload()` saved as a full checkpoint), activation patching
(UDS) included."""

from __future__ import annotations

import json
import math

import pytest
import torch

from unlearnbench.errors import CheckpointError
from unlearnbench.models.checkpoint import CheckpointSpec, discover, resolve

# Every suite that runs on the zoo: generation and teacher-forced scoring, chat-template replies
# and next-token distributions (honesty), activation patching (uds) and attacked copies of the
# adapted model (robustness quantizes and relearns the adapter merged into its base).
SUITES = ("smoke", "conceptguard", "dusk", "honesty", "muse", "robustness", "tofu", "uds", "wmdp")


def trained_adapter(base_dir, out, *, seed: int, steps: int = 3):
    """A LoRA adapter over `base_dir` trained for a few steps of gradient ascent on the zoo's forget
    document (the simplest unlearning recipe), saved as peft saves it; and the same adapter merged
    into a full checkpoint beside it (`out`-merged)."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from unlearnbench.fixtures import corpus

    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(str(base_dir))
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(str(base_dir), dtype=torch.float32)
    config = LoraConfig(r=4, lora_alpha=16, lora_dropout=0.0, target_modules=["q_proj", "v_proj", "down_proj"])
    peft_model = get_peft_model(model, config)
    batch = tokenizer(corpus.generate().forget_document[:8], return_tensors="pt", padding=True)
    labels = batch.input_ids.masked_fill(batch.attention_mask == 0, -100)
    optimizer = torch.optim.AdamW([p for p in peft_model.parameters() if p.requires_grad], lr=2e-2)
    for _ in range(steps):
        (-peft_model(**batch, labels=labels).loss).backward()  # ascent: push the forget document away
        optimizer.step()
        optimizer.zero_grad()
    peft_model.save_pretrained(str(out))
    merged = out.with_name(out.name + "-merged")
    peft_model.merge_and_unload().save_pretrained(str(merged))
    AutoTokenizer.from_pretrained(str(base_dir)).save_pretrained(str(merged))
    return out, merged


@pytest.fixture(scope="module")
def adapter_and_merged(tmp_path_factory, zoo_family):
    """A LoRA adapter trained over the zoo's `full` model, and the same adapter merged into a full
    checkpoint."""
    root = tmp_path_factory.mktemp("lora")
    base_dir = zoo_family["full"]
    adapter, merged = trained_adapter(base_dir, root / "adapter", seed=0)
    settings = json.loads((adapter / "adapter_config.json").read_text())
    assert settings["base_model_name_or_path"] == str(base_dir)
    return adapter, merged, base_dir


def test_an_adapter_folder_resolves_to_its_base_and_its_fingerprint_covers_both(adapter_and_merged, tmp_path):
    adapter, _, base_dir = adapter_and_merged
    resolved = resolve(str(adapter))
    assert resolved.kind == "adapter" and resolved.base.directory == base_dir.resolve()
    names = {p.name for p in resolved.files}
    assert {"adapter_config.json", "adapter_model.safetensors", "model.safetensors", "config.json"} <= names
    assert [s.name for s in discover(adapter.parent)] == ["adapter", "adapter-merged"]  # --model-dir finds adapters too
    # A base that is neither a folder nor a cached Hub model: one line naming the file and what to do.
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "adapter_model.safetensors").write_bytes((adapter / "adapter_model.safetensors").read_bytes())
    config = json.loads((adapter / "adapter_config.json").read_text()) | {"base_model_name_or_path": "/no/such/base"}
    (broken / "adapter_config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="names its base model '/no/such/base'.*--base-model"):
        resolve(str(broken))
    # --base-model names it instead.
    assert resolve(str(broken), base_model=str(base_dir)).base.directory == base_dir.resolve()


def test_base_model_is_a_run_option_and_an_adapter_runs_as_a_test_id(adapter_and_merged, tmp_path, cache_dir,
                                                                      warm_python):
    """`pytest suites/smoke --model NAME=ADAPTER --base-model BASE`: the adapter is evaluated on the
    base the option names (its own config's base moved away)."""
    import shutil
    from conftest import ROOT

    adapter, _, base_dir = adapter_and_merged
    moved = tmp_path / "adapter"
    shutil.copytree(adapter, moved)
    config = json.loads((moved / "adapter_config.json").read_text()) | {"base_model_name_or_path": "/moved/away"}
    (moved / "adapter_config.json").write_text(json.dumps(config))
    run = warm_python.run(["-m", "pytest", "suites/smoke", f"--model=lora={moved}", f"--base-model={base_dir}",
                           f"--cache-dir={cache_dir}", f"--report-dir={tmp_path / 'reports'}", "-p", "no:cacheprovider",
                           "--no-progress", "-q"], cwd=ROOT, timeout=600)
    assert "ERROR" not in run.stderr, run.stderr[-2000:]
    report = json.loads((tmp_path / "reports" / "latest" / "report.json").read_text())
    assert report["checkpoints"]["lora"]["suites"]["smoke"]["metrics"]["mean_token_logprob"]["value"] < 0


def test_every_zoo_suite_scores_an_adapter_as_its_merged_model(adapter_and_merged, zoo_family, cache_dir):
    from conftest import ROOT

    from unlearnbench.fixtures import zoo
    from unlearnbench.metrics.core import MetricResult
    from unlearnbench.session import Bench, BenchOptions

    adapter, merged, base_dir = adapter_and_merged
    specs = [CheckpointSpec.parse(f"adapter={adapter}"), CheckpointSpec.parse(f"merged={merged}")]
    bench = Bench(BenchOptions(models=specs, cache_dir=cache_dir, device="cpu", dtype="float32",
                               data_dirs={s: str(zoo.data_dir(cache_dir)) for s in SUITES if s != "smoke"},
                               # Each set's first 16 items (the robustness suite's UDS probe: 8): every value is
                               # compared, and 16 items run the code paths 128 do.
                               suite_options={**{s: {"max_items": "16"} for s in ("dusk", "honesty", "muse", "tofu",
                                                                                  "uds", "wmdp")},
                                              "robustness": {"uds_max_items": "8"}},
                               full=CheckpointSpec.parse(f"full={base_dir}"),
                               retain=CheckpointSpec.parse(f"retain={zoo_family['retain']}")))
    bench.prepare_suites(list(SUITES), {s: ROOT / "thresholds" / f"{s}.yaml" for s in SUITES}, build_zoo=False)
    compared = 0
    for suite in SUITES:
        ours, theirs = bench.run(specs[0], suite).metrics, bench.run(specs[1], suite).metrics
        assert ours.keys() == theirs.keys(), suite
        for name, result in ours.items():
            other = theirs[name]
            assert type(result) is type(other), (suite, name, result, other)
            if isinstance(result, MetricResult) and math.isfinite(result.value):
                assert result.value == pytest.approx(other.value, rel=1e-5, abs=1e-5), (suite, name)
                compared += 1
    assert compared > 30


def test_adapters_over_one_base_share_its_loaded_weights(zoo_family, cache_dir, tmp_path):
    """Four adapters over one base in one sweep: the base is loaded once and each adapter in turn is
    applied to it and taken off again, so the process holds the references, one base and one adapter;
    each adapter still scores as its own merged model (the base comes back clean, the right adapter
    is the active one), activation patching included."""
    from conftest import ROOT

    from unlearnbench.fixtures import zoo
    from unlearnbench.metrics.core import MetricResult
    from unlearnbench.session import Bench, BenchOptions

    base_dir = zoo_family["full"]
    pairs = [trained_adapter(base_dir, tmp_path / f"lora{seed}", seed=seed, steps=2 + seed) for seed in range(4)]
    suites = ["smoke", "uds"]
    specs = [CheckpointSpec.parse(f"lora{i}={adapter}") for i, (adapter, _) in enumerate(pairs)]
    merged_specs = [CheckpointSpec.parse(f"merged{i}={merged}") for i, (_, merged) in enumerate(pairs)]
    bench = Bench(BenchOptions(models=specs + merged_specs, cache_dir=cache_dir, device="cpu", dtype="float32",
                               data_dirs={"uds": str(zoo.data_dir(cache_dir))},
                               full=CheckpointSpec.parse(f"full={base_dir}"),
                               retain=CheckpointSpec.parse(f"retain={zoo_family['retain']}")))
    bench.prepare_suites(suites, {s: ROOT / "thresholds" / f"{s}.yaml" for s in suites}, build_zoo=False)
    base_models, live = [], []
    for spec in specs:
        for suite in suites:
            bench.run(spec, suite)
        handle = bench.handle(spec)
        base_models.append(handle.model)
        live.append(len({id(h.model) for h in bench.models.held.values()}))
        bench.release(spec)
    assert all(model is base_models[0] for model in base_models), "each adapter loaded its base again"
    assert max(live) <= 3, live  # full + retain + the shared base under the adapter under test
    # Four adapters merged into it and taken off again: the kept base is the base on disk, bit for bit.
    from transformers import AutoModelForCausalLM

    fresh = AutoModelForCausalLM.from_pretrained(str(base_dir), dtype=torch.float32).state_dict()
    kept = base_models[0].state_dict()
    assert kept.keys() == fresh.keys() and all(torch.equal(kept[k], fresh[k]) for k in fresh)
    for spec, merged in zip(specs, merged_specs):
        for suite in suites:
            ours, theirs = bench.run(spec, suite).metrics, bench.run(merged, suite).metrics
            for name, result in ours.items():
                if isinstance(result, MetricResult) and math.isfinite(result.value):
                    assert result.value == pytest.approx(theirs[name].value, rel=1e-5, abs=1e-5), (spec.name, name)
    # The adapters differ from each other (else sharing could not be told from not switching).
    values = {round(bench.run(spec, "smoke").metrics["mean_token_logprob"].value, 6) for spec in specs}
    assert len(values) == 4, values


def test_an_adapter_over_a_base_of_another_shape_fails_its_checkpoint_in_one_line(adapter_and_merged, smoke_lm_dir):
    """--base-model naming a model the adapter was not trained for: the load fails with one line
    naming the adapter, not a page of peft's tensor shapes."""
    from unlearnbench.models.handle import ModelHandle

    adapter, _, _ = adapter_and_merged
    with pytest.raises(CheckpointError) as raised:
        ModelHandle.load(resolve(str(adapter), base_model=str(smoke_lm_dir)), name="lora", device="cpu")
    message = str(raised.value)
    assert message.startswith("checkpoint lora (") and "cannot apply the adapter to its base model" in message, message
    # It says what does not fit and where the base came from, and what to do.
    assert "q_proj" in message and str(smoke_lm_dir.resolve()) in message and "--base-model" in message, message
    assert "\n" not in message, message


def test_an_adapter_on_smollm2_runs_as_its_merged_model_chat_template_and_patching_included(smollm2_dir, tmp_path):
    """The real-model path: a LoRA adapter on SmolLM2-135M-Instruct (trained here, saved without a tokenizer, so its
    base's byte-level BPE and chat template are the ones used) scores, generates and patches as the same adapter
    merged into a full checkpoint."""
    from unlearnbench.models.handle import ModelHandle

    adapter, merged = trained_adapter(smollm2_dir, tmp_path / "smollm2-lora", seed=0, steps=2)
    assert not (adapter / "tokenizer.json").exists()
    ours = ModelHandle.load(resolve(str(adapter)), name="lora", device="cpu", dtype="float32")
    theirs = ModelHandle.load(str(merged), name="merged", device="cpu", dtype="float32")
    prompts = [ours.format_chat([{"role": "user", "content": q}]) for q in
               ("What is the capital of France?", "Name a prime number greater than ten.")]
    assert prompts == [theirs.format_chat([{"role": "user", "content": q}]) for q in
                       ("What is the capital of France?", "Name a prime number greater than ten.")]
    assert prompts[0].startswith("<|im_start|>system")  # SmolLM2's own template, from the base
    assert ours.generate(prompts, max_new_tokens=12) == theirs.generate(prompts, max_new_tokens=12)
    pairs = [ours.encode_pair(p, " Paris is the capital.") for p in prompts]
    for a, b in zip(ours.token_logprobs([s for s, _ in pairs], [t for _, t in pairs]),
                    theirs.token_logprobs([s for s, _ in pairs], [t for _, t in pairs])):
        assert torch.allclose(torch.as_tensor(a.logprobs), torch.as_tensor(b.logprobs), atol=1e-5)
    ids = torch.tensor([pairs[0][0]])
    mask = torch.ones_like(ids)
    # Every decoder block's output (what activation patching reads and replaces), layer by layer: SmolLM2's
    # hidden states hold outliers in the thousands, so merged and unmerged float32 arithmetic agree to 1e-5 of
    # each layer's largest value, not to an absolute 1e-5.
    ours_blocks, theirs_blocks = ours.block_outputs(ids, mask), theirs.block_outputs(ids, mask)
    scale = theirs_blocks.abs().amax(dim=(1, 2, 3))
    assert ((ours_blocks - theirs_blocks).abs().amax(dim=(1, 2, 3)) <= 1e-5 * scale).all()
    # The adapter moved the model: its scores are not the base model's.
    base = ModelHandle.load(str(smollm2_dir), name="base", device="cpu", dtype="float32")
    a, b = ours.token_logprobs([pairs[0][0]], [pairs[0][1]])[0], base.token_logprobs([pairs[0][0]], [pairs[0][1]])[0]
    assert not torch.allclose(torch.as_tensor(a.logprobs), torch.as_tensor(b.logprobs), atol=1e-4)
    for handle in (ours, theirs, base):
        handle.release()


def test_a_prompt_learning_adapter_is_refused_in_one_line(zoo_family, tmp_path):
    """Prefix tuning adds virtual tokens to every input, which no suite's prompt carries: refused by name, not
    evaluated as its bare base model."""
    from peft import PrefixTuningConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from unlearnbench.models.handle import ModelHandle

    model = AutoModelForCausalLM.from_pretrained(str(zoo_family["full"]), dtype=torch.float32)
    get_peft_model(model, PrefixTuningConfig(task_type="CAUSAL_LM", num_virtual_tokens=4)).save_pretrained(
        str(tmp_path / "prefix"))
    with pytest.raises(CheckpointError, match="PREFIX_TUNING adapter adds virtual tokens to every input"):
        ModelHandle.load(resolve(str(tmp_path / "prefix")), name="prefix", device="cpu")


def test_the_device_check_script_runs_on_cpu(zoo_family):
    """benchmarks/adapter_device_check.py is what a GPU machine runs (its output is in docs/adapters.md); run
    here on the CPU so that it cannot rot."""
    import subprocess
    import sys

    from conftest import ROOT

    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "adapter_device_check.py"), "--base",
                           str(zoo_family["full"]), "--device", "cpu"], capture_output=True, text=True, timeout=600,
                          cwd=ROOT)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert done.stdout.count("\nok   ") + done.stdout.startswith("ok   ") == 7 and "all checks passed" in done.stdout
