"""TOFU and MUSE under `convention=reference` equal OpenUnlearning's own
code path (tests/openunlearning_reference.py, written from its code, not
from ours) on SmolLM2 with its ChatML template and on a Llama-3-style model
whose template writes the BOS its tokenizer also adds, with EOS = pad
inside every conversation.
"""

from __future__ import annotations

import json

import pytest
import torch

import openunlearning_reference as ou
from unlearnbench.metrics.core import References
from unlearnbench.models.handle import ModelHandle
from unlearnbench.suites import SUITES
from unlearnbench.suites.muse import data as muse_data
from unlearnbench.suites.muse import metrics as muse
from unlearnbench.suites.tofu import data as tofu_data
from unlearnbench.suites.tofu import metrics as tofu

ITEMS = 2  # per set: each set's first items, on both sides (two already pad every batch)
TOFU_TOKENS = 24  # generation_args.max_new_tokens on both sides (OpenUnlearning's default is 200)
MUSE_TOKENS = (24, 16)  # VerbMem, KnowMem

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


@pytest.fixture(scope="module")
def families(smollm2_dir, perturbed_smollm2_dir, zoo_family, tmp_path_factory):
    """{family: (model dir, retain dir, OpenUnlearning's template_args for it)}."""
    tmp = tmp_path_factory.mktemp("llama3-style")
    return {
        "smollm2": (smollm2_dir, perturbed_smollm2_dir, ou.QWEN),
        "llama3-bos": (llama3_style(zoo_family["full"], tmp / "full", 0),
                       llama3_style(zoo_family["retain"], tmp / "retain", 1), ou.LLAMA3),
    }


@pytest.fixture(scope="module")
def data_root(cache_dir):
    from unlearnbench.fixtures import zoo

    return zoo.data_dir(cache_dir)


def rows(path, n=ITEMS):
    text = path.read_text(encoding="utf-8")
    loaded = json.loads(text) if text.lstrip().startswith("[") else [json.loads(line) for line in text.splitlines()
                                                                     if line.strip()]
    return loaded[:n] if n else loaded


def hf(directory):
    """Model and tokenizer as OpenUnlearning loads them, in float64: both
    sides then agree to float64 rounding whatever their batching, and any
    difference left is one of path, not of padding noise (float32 batches
    of different shapes differ by ~1e-5 in a 30-layer model)."""
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


def assert_equal_to_openunlearning(ours: dict, theirs: dict):
    assert theirs, "nothing compared"
    mismatched = {name: (getattr(ours[name], "value", ours[name]), value) for name, value in theirs.items()
                  if getattr(ours[name], "value", None) != pytest.approx(value, rel=1e-5, abs=1e-5)}
    assert not mismatched, mismatched


@pytest.mark.real_model
@pytest.mark.parametrize("family", ["smollm2", "llama3-bos"])
def test_tofu_reference_convention_equals_openunlearnings_code(families, family, data_root, reference_results):
    model_dir, retain_dir, template = families[family]
    files = {"forget": "forget10_perturbed", "retain": "retain_perturbed", "real_authors": "real_authors_perturbed",
             "world_facts": "world_facts_perturbed", "holdout": "holdout10"}
    sets = {name: rows(data_root / "tofu" / f"{stem}.json") for name, stem in files.items()}
    theirs, their_replies = reference_results.get(
        f"openunlearning-tofu-{family}", lambda: ou.tofu(*hf(model_dir), *hf(retain_dir), sets, template, TOFU_TOKENS),
        code=[ou, hf], inputs=(sets, template, TOFU_TOKENS), models=[model_dir, retain_dir])

    data = tofu_data.load(data_root, {"convention": "reference", "max_items": ITEMS, "max_new_tokens": TOFU_TOKENS})
    ours = tofu.evaluate(ours_model(model_dir, "model"), data, References(retain=ours_model(retain_dir, "retain")))
    assert set(theirs) == set(SUITES["tofu"].metric_names)
    assert_equal_to_openunlearning(ours, theirs)
    # ROUGE read the same text: every generation, character for character.
    for name, short in (("forget", "forget"), ("retain", "retain"), ("real_authors", "ra"), ("world_facts", "wf")):
        assert [i["reply"] for i in ours[f"{short}_rouge"].details["items"].values()] == their_replies[name]
    assert ours["forget_prob"].params["reference_template"].startswith(
        {"smollm2": "ChatML", "llama3-bos": "Llama-3.x"}[family])


@pytest.mark.real_model
@pytest.mark.parametrize("family", ["smollm2", "llama3-bos"])
def test_muse_reference_convention_equals_openunlearnings_code(families, family, data_root, reference_results):
    model_dir, retain_dir, template = families[family]
    root = data_root / "muse"
    icl = {split: rows(root / "knowmem" / f"{split}_icl.json", 0) for split in ("forget_qa", "retain_qa")}
    data = {"verbmem": rows(root / "verbmem" / "forget.json"),
            **{split: rows(root / "knowmem" / f"{split}.json") for split in ("forget_qa", "retain_qa")},
            **{f"{split}_icl": examples for split, examples in icl.items()},
            "privleak_forget": rows(root / "privleak" / "forget.json"),
            "privleak_holdout": rows(root / "privleak" / "holdout.json")}
    data["privleak_forget"] = [r["text"] if isinstance(r, dict) else r for r in data["privleak_forget"]]
    data["privleak_holdout"] = [r["text"] if isinstance(r, dict) else r for r in data["privleak_holdout"]]
    theirs, their_replies = reference_results.get(
        f"openunlearning-muse-{family}", lambda: ou.muse(*hf(model_dir), *hf(retain_dir), data, template, *MUSE_TOKENS),
        code=[ou, hf], inputs=(data, template, MUSE_TOKENS), models=[model_dir, retain_dir])

    loaded = muse_data.load(data_root, {"convention": "reference", "max_items": ITEMS, "icl_shots": -1,
                                        "verbmem_max_new_tokens": MUSE_TOKENS[0],
                                        "knowmem_max_new_tokens": MUSE_TOKENS[1]})
    ours = muse.evaluate(ours_model(model_dir, "model"), loaded, References(retain=ours_model(retain_dir, "retain")))
    assert_equal_to_openunlearning(ours, theirs)
    assert [i["generation"] for i in ours["verbmem_rougeL_f1"].details["items"].values()] == their_replies


def test_the_reference_convention_refuses_settings_it_makes_itself(data_root):
    from unlearnbench.errors import DataError

    for loader, suite in ((tofu_data.load, "tofu"), (muse_data.load, "muse")):
        with pytest.raises(DataError, match=f"{suite}.convention=reference sets mink_k itself"):
            loader(data_root, {"convention": "reference", "mink_k": "0.2"})
        with pytest.raises(DataError, match=f"{suite}.convention=openunlearning: expected one of spec, reference"):
            loader(data_root, {"convention": "openunlearning"})
