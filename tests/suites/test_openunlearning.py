"""TOFU and MUSE under `convention=reference` equal OpenUnlearning's own
code (locuslab/open-unlearning at d3d7cf9, run from the project's shared
folder by tests/openunlearning_code.py: its datasets, collator, metric
handlers and evaluator) on the same items, metric by metric, item by item
and generation by generation, on

- SmolLM2-135M-Instruct with its ChatML template, under the model config a
  user writes for it (OpenUnlearning ships none: `apply_chat_template: true`
  and no system prompt, so the template's own default system prompt is
  written), pad = EOS = `<|im_end|>` inside every conversation;
- a Llama-3-style model whose template writes the BOS its byte-level BPE
  tokenizer also adds, under OpenUnlearning's Llama-3.2 config (system
  prompt and date line);
- the same model under a config of the user's own, with another system
  prompt, stated to our side as `reference_system_prompt`;
- a base model (no chat template, byte-level BPE adding BOS) under its
  Llama-2 base config: `Question: ...\\nAnswer: `, a prompt ending in a space.

Both sides run the same float64 weights: float32 batches of different
shapes (their batches of 32 in file order, ours length-sorted) differ by
~1e-4 relative in a 30-layer model, so only float64 separates a difference
of path from rounding.
"""

from __future__ import annotations

import json

import pytest
import torch

import openunlearning_code as oc
from conftest import require, SHARED
from unlearnbench.metrics.core import References
from unlearnbench.models.handle import ModelHandle
from unlearnbench.suites import SUITES
from unlearnbench.suites.muse import data as muse_data
from unlearnbench.suites.muse import metrics as muse
from unlearnbench.suites.tofu import data as tofu_data
from unlearnbench.suites.tofu import metrics as tofu

ITEMS = 5  # per set: each set's first items, on both sides
TOFU_TOKENS = 32  # generation_args.max_new_tokens on both sides (OpenUnlearning's default is 200)
MUSE_TOKENS = (24, 16)  # VerbMem, KnowMem
REFERENCE = SHARED / "reference" / "open-unlearning"

# configs/model/*.yaml template_args at d3d7cf9 (the tag fields the chat path never reads left out).
NO_CONFIG_CHAT = {"apply_chat_template": True}  # what a user writes for a chat model OpenUnlearning has no config for
LLAMA3 = {"apply_chat_template": True, "system_prompt": "You are a helpful assistant.", "date_string": "10 Apr 2025"}
OWN_PROMPT = "Answer in one short line."
LLAMA2_BASE = {"apply_chat_template": False, "user_start_tag": "Question: ", "user_end_tag": "\n",
               "asst_start_tag": "Answer: ", "asst_end_tag": "\n\n"}

LLAMA3_TEMPLATE = (
    "{{ bos_token }}"
    "{% if messages[0]['role'] == 'system' %}{% set system = messages[0]['content'] %}"
    "{% set messages = messages[1:] %}{% else %}{% set system = '' %}{% endif %}"
    "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
    "Today Date: {{ date_string | default('26 Jul 2024') }}\n\n{{ system }}<|eot_id|>"
    "{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n{{ m['content'] | trim }}"
    "<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)

TOFU_ROUGE = {"forget": "forget_Q_A_ROUGE", "retain": "retain_Q_A_ROUGE", "ra": "ra_Q_A_ROUGE", "wf": "wf_Q_A_ROUGE"}


def llama3_style(source, target, seed: int):
    """A zoo checkpoint turned into the Llama-3 situation: the template writes
    the BOS the tokenizer adds, EOS = <|eot_id|> closes every turn, no pad
    token (so pad = EOS, as OpenUnlearning sets it)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(source))
    tokenizer.add_special_tokens({"additional_special_tokens": ["<|start_header_id|>", "<|end_header_id|>",
                                                                "<|eot_id|>"]})
    tokenizer.eos_token, tokenizer.pad_token = "<|eot_id|>", None
    tokenizer.chat_template = LLAMA3_TEMPLATE
    model = AutoModelForCausalLM.from_pretrained(str(source), dtype=torch.float32)
    torch.manual_seed(seed)
    model.resize_token_embeddings(len(tokenizer), mean_resizing=False)
    eot = tokenizer.convert_tokens_to_ids("<|eot_id|>")
    model.config.eos_token_id = model.generation_config.eos_token_id = eot
    model.config.pad_token_id = model.generation_config.pad_token_id = None
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    return target


def base_model(source, target):
    """A zoo checkpoint with its chat template removed: a base model whose
    byte-level BPE tokenizer adds BOS."""
    import shutil

    shutil.copytree(source, target)
    (target / "chat_template.jinja").unlink(missing_ok=True)
    config = json.loads((target / "tokenizer_config.json").read_text())
    config.pop("chat_template", None)
    (target / "tokenizer_config.json").write_text(json.dumps(config))
    return target


@pytest.fixture(scope="module")
def openunlearning():
    require(REFERENCE.is_dir(), f"{REFERENCE} (OpenUnlearning's code at {oc.COMMIT}, in the project's shared folder)",
            "put the project's shared/ folder next to this clone (CI has it)")
    return oc.load(REFERENCE)


@pytest.fixture(scope="module")
def families(smollm2_dir, perturbed_smollm2_dir, zoo_family, tmp_path_factory):
    """{family: (model dir, retain dir, OpenUnlearning's template_args for it,
    the reference template our side must pick, our suite options for it)}."""
    tmp = tmp_path_factory.mktemp("families")
    llama3 = (llama3_style(zoo_family["full"], tmp / "llama3-full", 0),
              llama3_style(zoo_family["retain"], tmp / "llama3-retain", 1))
    return {
        "smollm2": (smollm2_dir, perturbed_smollm2_dir, NO_CONFIG_CHAT, "a chat template no OpenUnlearning config",
                    {}),
        "llama3-bos": (*llama3, LLAMA3, "Llama-3.x (configs", {}),
        "llama3-own-prompt": (*llama3, {**LLAMA3, "system_prompt": OWN_PROMPT},
                              f"Llama-3.x (configs/model/Llama-3.*-Instruct.yaml); system prompt: {OWN_PROMPT!r}",
                              {"reference_system_prompt": OWN_PROMPT}),
        "base": (base_model(zoo_family["full"], tmp / "base-full"),
                 base_model(zoo_family["retain"], tmp / "base-retain"), LLAMA2_BASE, "base model", {}),
    }


@pytest.fixture(scope="module")
def data_root(cache_dir):
    from unlearnbench.fixtures import zoo

    return zoo.data_dir(cache_dir)


def hf(directory):
    """Model and tokenizer as OpenUnlearning's `get_model` loads them, in float64."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(directory))
    if tokenizer.pad_token_id is None:  # src/model/__init__.py get_tokenizer
        tokenizer.pad_token = tokenizer.eos_token
    return AutoModelForCausalLM.from_pretrained(str(directory), dtype=torch.float64).eval(), tokenizer


def ours_model(directory, name: str) -> ModelHandle:
    """Our backend over the same float64 weights (it takes float32 log-softmax of them)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(str(directory), dtype=torch.float64)
    return ModelHandle(model, AutoTokenizer.from_pretrained(str(directory)), name=name, source=str(directory),
                       fingerprint=f"{name}-float64")


def run_openunlearning(ou, name: str, metrics, model_dir, retain_dir, template, tmp):
    """OpenUnlearning's eval of the retain model, then of the model with the
    retain model's logs as `retain_logs_path`: its `{name}_EVAL.json` logs."""
    retain_logs = oc.evaluate(ou, name, metrics(None), *hf(retain_dir), template, tmp / "retain")
    assert retain_logs, "the retain model's run wrote no logs"
    return oc.evaluate(ou, name, metrics(tmp / "retain" / f"{name}_EVAL.json"), *hf(model_dir), template,
                       tmp / "model")


def assert_equal(ours: dict, theirs: dict) -> None:
    """Every value of `theirs` equal to ours to 1e-5 (relative 1e-4 below 1e-3)."""
    def equal(a, b):
        return a is not None and b is not None and (abs(a - b) <= 1e-5 if abs(b) >= 1e-3 else
                                                   abs(a - b) <= 1e-4 * abs(b) + 1e-12)
    assert theirs, "nothing compared"
    differ = [f"{name}: ours {ours.get(name)!r}, OpenUnlearning {value!r}" for name, value in theirs.items()
              if not equal(ours.get(name), value)]
    assert not differ, f"{len(differ)} of {len(theirs)} differ:\n" + "\n".join(differ)


def values(results: dict) -> dict:
    return {name: getattr(result, "value", None) for name, result in results.items()}


@pytest.mark.real_model
@pytest.mark.parametrize("family", ["smollm2", "llama3-bos", "llama3-own-prompt", "base"])
def test_tofu_reference_convention_equals_openunlearnings_own_code(openunlearning, families, family, data_root,
                                                                   reference_results, tmp_path):
    model_dir, retain_dir, template, our_template, options = families[family]
    files = {name: data_root / "tofu" / f"{stem}.json" for name, stem in oc.TOFU_SETS.items()}

    def metrics(retain_logs):
        return oc.tofu_metrics(files, ITEMS, TOFU_TOKENS, tmp_path / "datasets", 32, retain_logs)

    logs = reference_results.get(
        f"openunlearning-code-tofu-{family}",
        lambda: run_openunlearning(openunlearning, "TOFU", metrics, model_dir, retain_dir, template, tmp_path),
        code=[oc, hf, *openunlearning.modules], inputs=(metrics(None), template),
        models=[model_dir, retain_dir])

    data = tofu_data.load(data_root, {"convention": "reference", "max_items": ITEMS, "max_new_tokens": TOFU_TOKENS,
                                      **options})
    ours = tofu.evaluate(ours_model(model_dir, "model"), data, References(retain=ours_model(retain_dir, "retain")))
    assert_equal(values(ours), {ours_name: logs[name]["agg_value"] for ours_name, name in oc.TOFU_NAMES.items()})
    # forget_ks_distance is ours alone: the statistic behind forget quality, which the gate decides on.
    assert set(oc.TOFU_NAMES) == set(SUITES["tofu"].metric_names) - {"forget_ks_distance"}
    assert ours["forget_prob"].params["reference_template"].startswith(our_template)
    # Item by item: the truth ratios forget quality compares, and every generation ROUGE read, character for character.
    their_ratios = {f"forget-{i}": v["score"] for i, v in logs["forget_truth_ratio"]["value_by_index"].items()}
    assert_equal(ours["forget_truth_ratio"].details["truth_ratios"], their_ratios)
    for name, metric in TOFU_ROUGE.items():
        replies = [item["reply"] for item in ours[f"{name}_rouge"].details["items"].values()]
        assert replies == [v["generation"] for v in logs[metric]["value_by_index"].values()]


@pytest.mark.real_model
@pytest.mark.parametrize("family", ["smollm2", "llama3-bos", "llama3-own-prompt", "base"])
def test_muse_reference_convention_equals_openunlearnings_own_code(openunlearning, families, family, data_root,
                                                                   reference_results, tmp_path):
    model_dir, retain_dir, template, _, options = families[family]
    root = data_root / "muse"
    files = {"verbmem": root / "verbmem" / "forget.json",
             **{split: root / "knowmem" / f"{split}.json" for split in ("forget_qa", "retain_qa")},
             **{f"{split}_icl": root / "knowmem" / f"{split}_icl.json" for split in ("forget_qa", "retain_qa")},
             "privleak_forget": root / "privleak" / "forget.json",
             "privleak_holdout": root / "privleak" / "holdout.json"}

    def metrics(retain_logs):
        return oc.muse_metrics(files, ITEMS, *MUSE_TOKENS, tmp_path / "datasets", retain_logs)

    logs = reference_results.get(
        f"openunlearning-code-muse-{family}",
        lambda: run_openunlearning(openunlearning, "MUSE", metrics, model_dir, retain_dir, template, tmp_path),
        code=[oc, hf, *openunlearning.modules], inputs=(metrics(None), template),
        models=[model_dir, retain_dir])

    loaded = muse_data.load(data_root, {"convention": "reference", "max_items": ITEMS, "icl_shots": -1,
                                        "verbmem_max_new_tokens": MUSE_TOKENS[0],
                                        "knowmem_max_new_tokens": MUSE_TOKENS[1], **options})
    ours = muse.evaluate(ours_model(model_dir, "model"), loaded, References(retain=ours_model(retain_dir, "retain")))

    def mean_of(metric: str, key: str) -> float:
        rows = logs[metric]["value_by_index"].values()
        return sum(row[key] for row in rows) / len(rows)

    theirs = {"extraction_strength": logs["extraction_strength"]["agg_value"],
              "exact_memorization": logs["exact_memorization"]["agg_value"],
              "privleak": logs["privleak"]["agg_value"],
              # OpenUnlearning's mia AUC is forget-vs-holdout; MUSE's column is its complement.
              "mia_auc_holdout_forget": 1 - logs["mia_min_k"]["agg_value"],
              "verbmem_rougeL_f1": logs["forget_verbmem_ROUGE"]["agg_value"],
              **{f"verbmem_{key}": mean_of("forget_verbmem_ROUGE", key) for key in ("rougeL_recall", "rouge1_recall")},
              **{f"knowmem_{split}_{key}": mean_of(f"{split}_knowmem_ROUGE", key)
                 for split in ("forget", "retain") for key in ("rougeL_f1", "rougeL_recall")}}
    assert logs["forget_knowmem_ROUGE"]["agg_value"] == pytest.approx(theirs["knowmem_forget_rougeL_f1"])
    assert_equal(values(ours), theirs)
    assert ([item["generation"] for item in ours["verbmem_rougeL_f1"].details["items"].values()]
            == [v["generation"] for v in logs["forget_verbmem_ROUGE"]["value_by_index"].values()])


@pytest.mark.real_model
@pytest.mark.parametrize("family", ["smollm2", "llama3-bos", "llama3-own-prompt", "base"])
def test_every_item_is_the_token_ids_labels_and_attention_openunlearnings_datasets_give(openunlearning, families,
                                                                                        family, data_root, tmp_path):
    """The one place the reference convention builds tokens, item by item
    against OpenUnlearning's own `QADataset` (every TOFU answer kind, the
    generation prompts, MUSE's few-shot KnowMem) and `CompletionDataset`
    (VerbMem, PrivLeak): the same input ids, the same labelled positions and
    labels, and the same attention mask its collator builds."""
    from unlearnbench.metrics import openunlearning as ours

    model_dir, _, template, _, options = families[family]
    model = ModelHandle.load(str(model_dir), name="model", device="cpu")
    _, tokenizer = hf(model_dir)
    ou_tokenizer = oc.Tokenizer4(tokenizer)
    chosen = ours.template_for(model, options.get("reference_system_prompt", "auto"))
    cache = tmp_path / "datasets"

    def dataset(handler, path, n=ITEMS, **args):
        config = oc.dataset_config(handler, path, n, cache, **args)
        return getattr(openunlearning.data, handler)(**config["args"], template_args=template, tokenizer=ou_tokenizer)

    def assert_same(item, encoded, *, generate=False):
        theirs_ids = item["input_ids"].tolist()
        if generate:  # the prompt is what generation starts from; the labels are the whole conversation
            assert theirs_ids == encoded.prompt_ids and item["labels"].tolist() == encoded.ids
            return
        labels = item["labels"].tolist()
        assert theirs_ids == encoded.ids
        assert labels[encoded.start:] == encoded.ids[encoded.start:] and set(labels[:encoded.start]) == {-100}
        collated = openunlearning.data.DataCollatorForSupervisedDataset(ou_tokenizer)([item])
        masked = [int(t not in {ours.pad_id(model)}) for t in encoded.ids]
        assert collated["attention_mask"][0].long().tolist() == masked

    compared = 0
    for name, stem in oc.TOFU_SETS.items():
        path = data_root / "tofu" / f"{stem}.json"
        rows = [json.loads(line) for line in path.read_text().splitlines()][:ITEMS]
        keys = ["answer"] + [k for k in ("paraphrased_answer", "perturbed_answer") if k in rows[0]]
        for key in keys:
            for row, item in zip(rows, dataset("QADataset", path, question_key="question", answer_key=key)):
                answers = row[key] if isinstance(row[key], list) else [row[key]]
                items = [item[k] for k in range(len(answers))] if isinstance(row[key], list) else [item]
                for answer, one in zip(answers, items):
                    assert_same(one, ours.encode_qa(model, chosen, [row["question"]], [answer]))
                    compared += 1
        generation = dataset("QADataset", path, question_key="question", answer_key="answer",
                             predict_with_generate=True)
        for row, item in zip(rows, generation):
            assert_same(item, ours.encode_qa(model, chosen, [row["question"]], [row["answer"]]), generate=True)
    muse = data_root / "muse"
    for split in ("forget_qa", "retain_qa"):
        icl = json.loads((muse / "knowmem" / f"{split}_icl.json").read_text())
        rows = json.loads((muse / "knowmem" / f"{split}.json").read_text())[:ITEMS]
        few_shot = dataset("QADataset", muse / "knowmem" / f"{split}.json", question_key="question",
                           answer_key="answer", max_length=512, predict_with_generate=True,
                           few_shot_dataset_hf_args=oc.local_hf_args(muse / "knowmem" / f"{split}_icl.json", cache))
        for row, item in zip(rows, few_shot):
            questions = [e["question"] for e in icl] + [row["question"]]
            answers = [e["answer"] for e in icl] + [row["answer"]]
            assert_same(item, ours.encode_qa(model, chosen, questions, answers), generate=True)
            compared += 1
    verbmem = json.loads((muse / "verbmem" / "forget.json").read_text())[:ITEMS]
    for row, item in zip(verbmem, dataset("CompletionDataset", muse / "verbmem" / "forget.json", prefix_key="prompt",
                                          text_key="gt", max_length=2048, insert_space=True)):
        assert_same(item, ours.encode_completion(model, row["prompt"], row["gt"], ours.MAX_COMPLETION_TOKENS,
                                                 insert_space=True))
        compared += 1
    texts = json.loads((muse / "privleak" / "forget.json").read_text())[:ITEMS]
    for row, item in zip(texts, dataset("CompletionDataset", muse / "privleak" / "forget.json", prefix_key="prompt",
                                        text_key="text", max_length=2048)):
        assert_same(item, ours.encode_completion(model, "", row["text"], 2048, insert_space=False))
        compared += 1
    assert compared >= 90  # every item of every set above


def test_the_reference_convention_refuses_settings_it_makes_itself(data_root):
    from unlearnbench.errors import DataError

    for loader, suite in ((tofu_data.load, "tofu"), (muse_data.load, "muse")):
        with pytest.raises(DataError, match=f"{suite}.convention=reference sets mink_k itself"):
            loader(data_root, {"convention": "reference", "mink_k": "0.2"})
        with pytest.raises(DataError, match=f"{suite}.convention=openunlearning: expected one of spec, reference"):
            loader(data_root, {"convention": "openunlearning"})
        with pytest.raises(DataError, match=f"{suite}.reference_system_prompt applies to convention=reference only"):
            loader(data_root, {"reference_system_prompt": "none"})


def test_a_system_prompt_for_a_model_prompted_through_tags_is_refused_with_its_reason(zoo_family, data_root,
                                                                                      tmp_path):
    from unlearnbench.errors import DataError

    model = ModelHandle.load(str(base_model(zoo_family["full"], tmp_path / "base")), name="base", device="cpu")
    data = tofu_data.load(data_root, {"convention": "reference", "max_items": 2, "reference_system_prompt": "none"})
    with pytest.raises(DataError, match="base is prompted through base model .* a system prompt has no place there"):
        tofu.evaluate(model, data)


def test_a_reference_run_records_the_code_it_reproduces_in_the_report(data_root):
    """The commit the tests above run is the one each suite's data names,
    and the report's run metadata says so for a `convention=reference` run
    (and not for the default one)."""
    from unlearnbench.data.openunlearning import REFERENCE_CODE
    from unlearnbench.report.schema import add_record, new_report
    from unlearnbench.engine.results import run_data

    assert REFERENCE_CODE == f"locuslab/open-unlearning@{oc.COMMIT}"
    report = new_report({"id": "run"})
    for suite, loader in (("tofu", tofu_data.load), ("muse", muse_data.load)):
        for convention in ("spec", "reference"):
            data = loader(data_root, {"convention": convention})
            assert ("reference_code" in run_data(data)) == (convention == "reference")
            add_record(report, {"suite": suite, "check": "c", "checkpoint": {"name": f"{suite}-{convention}"},
                                "data": run_data(data), "verdict": {"check": "c", "outcome": "pass"}})
    assert report["run"]["reference_code"] == {"tofu": REFERENCE_CODE, "muse": REFERENCE_CODE}
    assert report["checkpoints"]["tofu-reference"]["suites"]["tofu"]["data"]["reference_code"] == REFERENCE_CODE
    assert "reference_code" not in report["checkpoints"]["tofu-spec"]["suites"]["tofu"]["data"]
