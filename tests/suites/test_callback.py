"""Evaluation while training (issue 45): `UnlearnbenchCallback` in a real
transformers Trainer on the zoo. It evaluates the model in memory every N
steps, logs each metric through the Trainer's own `log`, writes a report per
evaluation whose series grows with the run, leaves the model's parameters,
gradients and train mode as they were, and stops a run whose gate passes."""

from __future__ import annotations

import json

import pytest
import torch
import yaml
from transformers import TrainerCallback

from unlearnbench.errors import UnlearnbenchError

EVERY = 2
STEPS = 6


def forget_dataset(tokenizer):
    from datasets import Dataset

    from unlearnbench.fixtures import corpus

    encoded = tokenizer(corpus.generate().forget_document[:8], truncation=True, max_length=64)
    return Dataset.from_dict({"input_ids": encoded["input_ids"], "labels": encoded["input_ids"]})


class Snapshots(TrainerCallback):
    """Records the parameters, gradients and train mode at each evaluated step's end: placed before and after the
    callback under test, its two records show what the evaluation changed."""

    def __init__(self):
        self.seen = {}

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if state.global_step % EVERY == 0:
            self.seen[state.global_step] = ({n: p.detach().clone() for n, p in model.named_parameters()},
                                            {n: None if p.grad is None else p.grad.clone()
                                             for n, p in model.named_parameters()},
                                            model.training)


def train(start_dir, output_dir, callback, *, learning_rate=1e-3, extra=(), steps=STEPS):
    from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments

    tokenizer = AutoTokenizer.from_pretrained(str(start_dir))
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(str(start_dir), dtype=torch.float32)
    args = TrainingArguments(output_dir=str(output_dir), per_device_train_batch_size=8, max_steps=steps,
                             learning_rate=learning_rate, logging_steps=1, report_to=[], save_strategy="no",
                             use_cpu=True, seed=0, disable_tqdm=True)
    before, after = Snapshots(), Snapshots()
    trainer = Trainer(model=model, args=args, train_dataset=forget_dataset(tokenizer), processing_class=tokenizer,
                      callbacks=[before, callback, after, *extra])
    trainer.train()
    return trainer, before, after


def callback_for(zoo_family, cache_dir, **kwargs):
    from unlearnbench.callbacks import UnlearnbenchCallback
    from unlearnbench.fixtures import zoo

    return UnlearnbenchCallback(["dusk", "honesty"], every_steps=EVERY, full_model=str(zoo_family["full"]),
                                retain_model=str(zoo_family["retain"]), cache_dir=cache_dir,
                                data_dirs={s: str(zoo.data_dir(cache_dir)) for s in ("dusk", "honesty")}, **kwargs)


# What the two tests below check is the same on each set's first 16 items as on all of them.
FIRST_16 = {"suite_options": {"dusk": {"max_items": 16}, "honesty": {"max_items": 16}}}


def test_the_callback_logs_each_evaluation_through_the_trainer_and_touches_nothing(zoo_family, cache_dir, tmp_path):
    callback = callback_for(zoo_family, cache_dir, **FIRST_16)
    trainer, before, after = train(zoo_family["full"], tmp_path / "run", callback)
    history = trainer.state.log_history
    evaluated = [h["step"] for h in history if "unlearnbench/dusk/verbatim_rougeL_f1" in h]
    assert evaluated == [2, 4, 6]
    for entry in (h for h in history if "unlearnbench/dusk/verbatim_rougeL_f1" in h):
        assert "unlearnbench/honesty/forget_leak_rate" in entry and "unlearnbench/verdict_pass" in entry
    assert [h["step"] for h in history if "loss" in h] == list(range(1, STEPS + 1))  # the loss is logged as ever
    # Each evaluation's metrics are the report's own numbers for that step.
    reports = sorted((tmp_path / "run" / "unlearnbench").glob("step-*/report.json"))
    assert [p.parent.name for p in reports] == ["step-2", "step-4", "step-6"] == [p.parent.name for p in
                                                                                   callback.reports]
    last = json.loads(reports[-1].read_text())
    assert [r["step"] for r in last["assessment"]["ranking"]["series"]["run"]] == [2, 4, 6]
    for entry in (h for h in history if "unlearnbench/dusk/verbatim_rougeL_f1" in h):
        metrics = last["checkpoints"][f"run-step-{entry['step']}"]["suites"]["dusk"]["metrics"]
        assert entry["unlearnbench/dusk/verbatim_rougeL_f1"] == metrics["verbatim_rougeL_f1"]["value"]
    assert 'data-plot="curve-forget"' in reports[-1].with_name("report.html").read_text()
    # Training went on (the evaluation is no no-op) ...
    first = before.seen[2][0]
    assert any(not torch.equal(first[n], p) for n, p in trainer.model.named_parameters())
    # ... and each evaluation left parameters, gradients and train mode as they were.
    assert before.seen.keys() == after.seen.keys() == {2, 4, 6}
    for step in before.seen:
        (params0, grads0, mode0), (params1, grads1, mode1) = before.seen[step], after.seen[step]
        assert mode0 is True and mode1 is True
        assert all(torch.equal(params0[n], params1[n]) for n in params0)
        assert all((grads0[n] is None and grads1[n] is None) or torch.equal(grads0[n], grads1[n]) for n in grads0)
    assert not trainer.model._forward_hooks  # the evaluation's logits check came off the model


def test_stop_when_pass_stops_a_run_at_its_first_passing_evaluation(zoo_family, cache_dir, tmp_path):
    """A run that starts from the retain model (forgotten as if never learnt) and learns nothing (learning rate
    0) passes a gate the zoo's data can decide at its first evaluation, at that look's level alpha / 2:
    training stops there. (Its privacy leakage and retain deviation are 0 in every resample, a copy of the
    retain model measured against it: zero-width intervals decide nothing, so those checks are left out.)"""
    from unlearnbench.suites import default_file

    gates = {}
    for suite in ("dusk", "honesty"):
        gate = yaml.safe_load(default_file(suite, f"thresholds/{suite}.yaml").read_text())
        # Kept: the checks the retain model passes decidedly on the zoo's data (the others it fails, or the
        # zoo's few items cannot decide: the preflight says which).
        keep = {"dusk": ("verbatim_forgotten", "unique_forget_knowledge_removed"),
                "honesty": ("retain_accuracy_kept",)}[suite]
        for name, check in gate["checks"].items():
            check["enabled"] = name in keep
        gates[suite] = tmp_path / f"{suite}.yaml"
        gates[suite].write_text(yaml.safe_dump(gate))
    callback = callback_for(zoo_family, cache_dir, stop_when="pass", thresholds=gates)
    trainer, _, _ = train(zoo_family["retain"], tmp_path / "run", callback, learning_rate=0.0)
    assert trainer.state.global_step == EVERY
    report = json.loads(callback.reports[-1].read_text())
    assert report["assessment"]["verdicts"]["run-step-2"]["verdict"] == "pass"
    # The same run without stop_when goes on to its last step.
    trainer, _, _ = train(zoo_family["retain"], tmp_path / "run-on", callback_for(zoo_family, cache_dir,
                                                                                   thresholds=gates),
                          learning_rate=0.0)
    assert trainer.state.global_step == STEPS


def test_a_run_that_ends_between_evaluations_is_evaluated_at_its_last_step(zoo_family, cache_dir, tmp_path):
    """5 steps, every 2: evaluations at steps 2 and 4, and at 5 when training ends, so the curve ends where the
    run ends."""
    callback = callback_for(zoo_family, cache_dir, **FIRST_16)
    trainer, _, _ = train(zoo_family["full"], tmp_path / "run", callback, steps=5)
    assert callback.evaluated_steps == [2, 4, 5]
    assert [h["step"] for h in trainer.state.log_history if "unlearnbench/verdict_pass" in h] == [2, 4, 5]
    last = json.loads(callback.reports[-1].read_text())
    assert [r["step"] for r in last["assessment"]["ranking"]["series"]["run"]] == [2, 4, 5]


@pytest.mark.parametrize("kwargs, message", [
    ({"suites": ["nope"]}, "unknown suite(s) nope"),
    ({"every_steps": 0}, "every_steps must be a positive integer, not 0"),
    ({"stop_when": "fail"}, "stop_when must be None or 'pass', not 'fail'"),
])
def test_bad_callback_arguments_are_one_line_each(kwargs, message):
    from unlearnbench.callbacks import UnlearnbenchCallback

    arguments = {"suites": ["dusk"], "every_steps": 2} | kwargs
    with pytest.raises(UnlearnbenchError, match=message.replace("(", r"\(").replace(")", r"\)")):
        UnlearnbenchCallback(arguments.pop("suites"), arguments.pop("every_steps"), **arguments)


def test_a_missing_reference_model_fails_the_start_of_training_in_one_line(tmp_path, cache_dir):
    """Checked at on_train_begin, before the first step: the path and the problem, not a traceback from step 50."""
    from transformers import TrainerControl, TrainerState, TrainingArguments

    from unlearnbench.callbacks import UnlearnbenchCallback
    from unlearnbench.errors import CheckpointError

    callback = UnlearnbenchCallback(["dusk"], every_steps=2, full_model=str(tmp_path / "no-such-full"),
                                    cache_dir=cache_dir)
    args = TrainingArguments(output_dir=str(tmp_path / "run"), report_to=[], use_cpu=True)
    with pytest.raises(CheckpointError, match=r"checkpoint full \(.*no-such-full\)|no-such-full"):
        callback.on_train_begin(args, TrainerState(), TrainerControl())


def test_a_lora_run_on_smollm2_is_evaluated_while_training_and_its_saved_steps_are_one_series(
        smollm2_dir, cache_dir, tmp_path, warm_python):
    """The three capabilities together on a real model: a LoRA fine-tune of SmolLM2-135M-Instruct by a
    transformers Trainer, evaluated by the callback every step (the adapted model in memory, its chat template
    and byte-level BPE), saving its steps as the Trainer does (`checkpoint-<step>/` adapter folders, optimizer and
    trainer state beside the adapter); then `pytest --model-dir` on that output folder scores the saved steps as
    one series of adapters over SmolLM2, each as the callback scored it at that step."""
    from conftest import ROOT
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments

    from unlearnbench.callbacks import UnlearnbenchCallback

    tokenizer = AutoTokenizer.from_pretrained(str(smollm2_dir))
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(str(smollm2_dir), dtype=torch.float32),
                           LoraConfig(r=4, lora_alpha=16, target_modules=["q_proj", "v_proj"]))
    output = tmp_path / "smollm2-lora"
    args = TrainingArguments(output_dir=str(output), per_device_train_batch_size=4, max_steps=2, learning_rate=1e-3,
                             logging_steps=1, report_to=[], save_strategy="steps", save_steps=1, use_cpu=True,
                             seed=0, disable_tqdm=True)
    callback = UnlearnbenchCallback(["smoke"], every_steps=1, full_model=str(smollm2_dir), cache_dir=cache_dir)
    trainer = Trainer(model=model, args=args, train_dataset=forget_dataset(tokenizer), processing_class=tokenizer,
                      callbacks=[callback])
    trainer.train()
    logged = {h["step"]: h["unlearnbench/smoke/mean_token_logprob"] for h in trainer.state.log_history
              if "unlearnbench/smoke/mean_token_logprob" in h}
    assert sorted(logged) == [1, 2] and all(-10 < v < 0 for v in logged.values())
    assert sorted(p.name for p in output.glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2"]
    assert (output / "checkpoint-2" / "adapter_config.json").is_file()

    reports = tmp_path / "reports"
    done = warm_python.run(["-m", "pytest", "suites/smoke", f"--model-dir={output}", f"--full-model={smollm2_dir}",
                            f"--cache-dir={cache_dir}", f"--report-dir={reports}", "-p", "no:cacheprovider",
                            "--no-progress", "-q"], cwd=ROOT, timeout=900)
    assert "ERROR" not in done.stderr, done.stderr[-2000:]
    report = json.loads((reports / "latest" / "report.json").read_text())
    series = report["assessment"]["ranking"]["series"]
    assert list(series) == ["smollm2-lora"] and [r["step"] for r in series["smollm2-lora"]] == [1, 2]
    for step, value in logged.items():  # the saved step scores as the model in memory scored at that step
        metrics = report["checkpoints"][f"smollm2-lora-checkpoint-{step}"]["suites"]["smoke"]["metrics"]
        assert metrics["mean_token_logprob"]["value"] == pytest.approx(value, abs=1e-5)
    assert f"series smollm2-lora: 2 steps" in done.stdout


def test_a_suite_option_the_suite_does_not_have_fails_the_start_of_training_in_one_line(tmp_path, cache_dir):
    """`suite_options` are read as `--suite-option` is, by the same parser, before the first step."""
    from transformers import TrainerControl, TrainerState, TrainingArguments

    from unlearnbench.callbacks import UnlearnbenchCallback

    callback = UnlearnbenchCallback(["dusk"], every_steps=2, suite_options={"dusk": {"max_itmes": 16}},
                                    cache_dir=cache_dir)
    args = TrainingArguments(output_dir=str(tmp_path / "run"), report_to=[], use_cpu=True)
    with pytest.raises(UnlearnbenchError, match=r"dusk\.max_itmes") as raised:
        callback.on_train_begin(args, TrainerState(), TrainerControl())
    assert len(str(raised.value).splitlines()) == 1
