"""OpenUnlearning's own evaluation code, run as its evaluator runs it: the
independent side of tests/suites/test_openunlearning.py.

The code is locuslab/open-unlearning's `src/data` and `src/evals` at
d3d7cf9 (MIT), kept read-only in the project's shared folder beside the
checkout (`../shared/reference/open-unlearning`), imported from there at
test time and never copied. What this module adds is only what OpenUnlearning's
hydra run would have put around that code:

- **the composed configuration**: the metric configs of
  `configs/eval/{tofu,muse}.yaml` and their `tofu_metrics/`, `muse_metrics/`,
  `data/datasets/`, `collator/` and `generation/` files, written out here as
  hydra composes them (read from the repository at d3d7cf9) and turned into
  `omegaconf.DictConfig` by the real omegaconf;
- **the data**: each dataset's `hf_args` point `datasets.load_dataset` at the
  local JSON files (its `json` builder) instead of the hub, `split="train[:N]"`
  keeping the first N rows;
- **the package `__init__` of `evals`** is bypassed (it imports lm-eval's
  multimodal backend and the evaluators' registry, which the metrics do not
  need); `data/__init__.py` and `evals/metrics/__init__.py` run as written,
  registering the datasets, collators and metric handlers;
- **transformers 5's `apply_chat_template(tokenize=True)`** returns a
  `BatchEncoding` where OpenUnlearning, written against transformers 4, takes
  the list of ids: its tokenizer is wrapped so that tokenizing a chat returns
  the ids (`return_dict=False`), which is what transformers 4 returned;
- **datasets 4+ returns a lazy `Column`** for `dataset[column_name]`, where
  OpenUnlearning (written against datasets 3) concatenates the few-shot
  examples' column with a list: the `datasets` its data code calls gives the
  column as a list, as datasets 3 did.

Everything else (datasets, collator, forward passes, generation, ROUGE, the
truth-ratio, KS, MIA and privleak handlers, `Evaluator.evaluate` writing its
`TOFU_EVAL.json`) is OpenUnlearning's code.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import sys
import types
from pathlib import Path

COMMIT = "d3d7cf9"
ITEMS_SPLIT = "train[:{n}]"  # the first n rows of a local file


class Tokenizer4:
    """A Hugging Face tokenizer as transformers 4 behaved for OpenUnlearning:
    `apply_chat_template(tokenize=True)` gives the list of ids. Everything
    else is the tokenizer itself."""

    def __init__(self, tokenizer):
        self._tokenizer = tokenizer

    def apply_chat_template(self, conversation, **kwargs):
        if kwargs.get("tokenize", True):
            kwargs.setdefault("return_dict", False)
        return self._tokenizer.apply_chat_template(conversation, **kwargs)

    def __call__(self, *args, **kwargs):
        return self._tokenizer(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._tokenizer, name)


class Dataset3:
    """A `datasets.Dataset` as datasets 3 behaved for OpenUnlearning:
    `dataset[column_name]` is a list."""

    def __init__(self, dataset):
        self._dataset = dataset

    def __getitem__(self, key):
        return list(self._dataset[key]) if isinstance(key, str) else self._dataset[key]

    def __len__(self):
        return len(self._dataset)

    def add_column(self, *args, **kwargs):
        return Dataset3(self._dataset.add_column(*args, **kwargs))


def _datasets3():
    """The `datasets` module OpenUnlearning's data code sees: the real one,
    its `load_dataset` returning `Dataset3`."""
    import datasets

    module = types.ModuleType("datasets")
    module.load_dataset = lambda *args, **kwargs: Dataset3(datasets.load_dataset(*args, **kwargs))
    return module


@contextlib.contextmanager
def _importable(src: Path):
    """`src` on sys.path while OpenUnlearning's modules load, then every
    module it added removed again: its top-level names (`data`, `evals`) stay
    out of the test process's module table."""
    before = set(sys.modules)
    sys.path.insert(0, str(src))
    try:
        yield
    finally:
        sys.path.remove(str(src))
        for name in set(sys.modules) - before:
            if name.split(".")[0] in ("data", "evals"):
                del sys.modules[name]


def load(root: Path) -> types.SimpleNamespace:
    """OpenUnlearning's modules from `root` (the folder holding `src/`)."""
    src = root / "src"
    with _importable(src):
        evals = types.ModuleType("evals")  # its __init__ is skipped (see the module's docstring)
        evals.__path__ = [str(src / "evals")]
        sys.modules["evals"] = evals
        data = importlib.import_module("data")
        importlib.import_module("data.utils").datasets = _datasets3()
        metrics = importlib.import_module("evals.metrics")
        base = importlib.import_module("evals.base")
        loaded = [module for name, module in sys.modules.items() if name.split(".")[0] in ("data", "evals")
                  and getattr(module, "__file__", None)]
    # `modules`: every file of its code this process runs (what a stored result of it depends on).
    return types.SimpleNamespace(data=data, metrics=metrics, Evaluator=base.Evaluator, modules=loaded)


# ------------------------------------------------------------- configuration
def local_hf_args(path: Path, cache: Path, items: int = 0) -> dict:
    """`hf_args` reading the local JSON file `path` through datasets' `json`
    builder: its first `items` rows (0: all of them)."""
    split = ITEMS_SPLIT.format(n=items) if items else "train"
    return {"path": "json", "data_files": str(path), "split": split, "cache_dir": str(cache)}


def dataset_config(handler: str, path: Path, items: int, cache: Path, **args) -> dict:
    """One dataset's config (`configs/data/datasets/*.yaml`) over a local file."""
    return {"handler": handler, "args": {"hf_args": local_hf_args(path, cache, items), **args}}


def _collator(padding_side: str = "right") -> dict:
    # configs/collator/DataCollatorForSupervisedDatasetwithIndex.yaml (+ padding_side where a metric sets it)
    return {"DataCollatorForSupervisedDataset": {"handler": "DataCollatorForSupervisedDataset",
                                                 "args": {"index": "index", "padding_side": padding_side}}}


def _generation(max_new_tokens: int, stopwords: list[str] | None = None) -> dict:
    # configs/generation/default.yaml, with the eval's own max_new_tokens (and stopwords)
    args = {"do_sample": False, "top_p": None, "temperature": None, "max_new_tokens": max_new_tokens,
            "use_cache": True}
    return {**args, "stopwords": stopwords} if stopwords is not None else args


# Our metric names -> OpenUnlearning's (configs/eval/tofu_metrics).
TOFU_NAMES = {"forget_prob": "forget_Q_A_Prob", "forget_rouge": "forget_Q_A_ROUGE",
              "forget_truth_ratio": "forget_truth_ratio", "forget_quality": "forget_quality",
              "extraction_strength": "extraction_strength", "exact_memorization": "exact_memorization",
              "privleak": "privleak", "model_utility": "model_utility", "retain_prob": "retain_Q_A_Prob",
              "retain_rouge": "retain_Q_A_ROUGE", "retain_truth_ratio": "retain_Truth_Ratio",
              **{f"{s}_{m}": f"{s}_{theirs}" for s in ("ra", "wf") for m, theirs in (
                  ("prob", "Q_A_Prob_normalised"), ("rouge", "Q_A_ROUGE"), ("truth_ratio", "Truth_Ratio"))},
              "forget_truth_ratio_prob_mean": "forget_truth_ratio_prob_mean"}
TOFU_SETS = {"forget": "forget10_perturbed", "retain": "retain_perturbed", "ra": "real_authors_perturbed",
             "wf": "world_facts_perturbed", "holdout": "holdout10"}


def tofu_metrics(files: dict[str, Path], items: int, max_new_tokens: int, cache: Path, batch_size: int,
                 retain_logs: Path | None) -> dict:
    """configs/eval/tofu.yaml's metrics as hydra composes them at d3d7cf9,
    with exact_memorization (which tofu.yaml lists commented out) and the
    forget truth ratio under the `prob_mean` aggregator, over the TOFU files
    `files` ({forget, retain, ra, wf, holdout: path}); `retain_logs`: the
    retain model's TOFU_EVAL.json (`retain_logs_path`)."""

    def qa(name, answer_key="answer", *, generate=False):
        args = {"question_key": "question", "answer_key": answer_key, "max_length": 512}
        if generate:
            args["predict_with_generate"] = True
        return dataset_config("QADataset", files[name], items, cache, **args)

    def probability(name, answer_key="answer"):
        return {"handler": "probability", "batch_size": batch_size, "datasets": {f"{name}_{answer_key}": qa(
            name, answer_key)}, "collators": _collator()}

    def rouge(name):
        return {"handler": "rouge", "rouge_type": "rougeL_recall", "batch_size": batch_size,
                "datasets": {name: qa(name, generate=True)}, "collators": _collator("left"),
                "generation_args": _generation(max_new_tokens)}

    def truth_ratio(correct: str, wrong: str, correct_key: str, aggregator: str):
        return {"handler": "truth_ratio", "aggregator": aggregator,
                "pre_compute": {correct: {**probability(correct.split("_")[0], correct_key), "access_key": "correct"},
                                wrong: {**probability(wrong.split("_")[0], "perturbed_answer"),
                                        "access_key": "wrong"}}}

    def normalised(name):
        return {"handler": "probability_w_options",
                "pre_compute": {f"{name}_Q_A_Prob": {**probability(name), "access_key": "correct"},
                                f"{name}_Q_A_PERT_Prob": {**probability(name, "perturbed_answer"),
                                                          "access_key": "wrong"}}}

    def retain_logs_of(key: str, access: str) -> dict:
        return {"retain_model_logs": {"path": str(retain_logs) if retain_logs else None,
                                      "include": {key: {"access_key": access}}}}

    forget_tr = truth_ratio("forget_Q_A_PARA_Prob", "forget_Q_A_PERT_Prob", "paraphrased_answer",
                            "closer_to_1_better")
    # d3d7cf9's third aggregator (no config of it uses it): correct / (correct + wrong), averaged.
    forget_tr_prob_mean = truth_ratio("forget_Q_A_PARA_Prob", "forget_Q_A_PERT_Prob", "paraphrased_answer",
                                      "prob_mean")
    utility_parts = {
        "retain_Q_A_Prob": probability("retain"), "retain_Q_A_ROUGE": rouge("retain"),
        "retain_Truth_Ratio": truth_ratio("retain_Q_A_PARA_Prob", "retain_Q_A_PERT_Prob", "paraphrased_answer",
                                          "true_better"),
    }
    for name in ("ra", "wf"):
        utility_parts |= {f"{name}_Q_A_Prob_normalised": normalised(name), f"{name}_Q_A_ROUGE": rouge(name),
                          f"{name}_Truth_Ratio": truth_ratio(f"{name}_Q_A_Prob", f"{name}_Q_A_PERT_Prob", "answer",
                                                             "true_better")}
    memorization = {"batch_size": batch_size, "datasets": {"forget": qa("forget")}, "collators": _collator()}
    mia = {"handler": "mia_min_k", "k": 0.4, "batch_size": batch_size, "collators": _collator(),
           "datasets": {"TOFU_QA_forget": {**qa("forget"), "access_key": "forget"},
                        "TOFU_QA_holdout": {**qa("holdout"), "access_key": "holdout"}}}
    return {
        "forget_truth_ratio": forget_tr,
        "forget_truth_ratio_prob_mean": forget_tr_prob_mean,
        "forget_quality": {"handler": "ks_test", "pre_compute": {"forget_truth_ratio": {**forget_tr,
                                                                                       "access_key": "forget"}},
                           "reference_logs": retain_logs_of("forget_truth_ratio", "retain")},
        "forget_Q_A_Prob": probability("forget"),
        "forget_Q_A_ROUGE": rouge("forget"),
        "model_utility": {"handler": "hm_aggregate", "pre_compute": utility_parts},
        "privleak": {"handler": "privleak", "ref_value": 0.5, "pre_compute": {"mia_min_k": {**mia,
                                                                                         "access_key": "forget"}},
                     "reference_logs": retain_logs_of("mia_min_k", "retain")},
        "extraction_strength": {"handler": "extraction_strength", **memorization},
        "exact_memorization": {"handler": "exact_memorization", **memorization},
    }


def evaluate(ou, name: str, metrics: dict, model, tokenizer, template_args: dict, output_dir: Path) -> dict:
    """`Evaluator(name, eval_cfg).evaluate(model, ...)` as OpenUnlearning's
    eval.py calls it; returns its `{name}_EVAL.json` logs (every metric and
    every pre-computed one, with their per-index values)."""
    from omegaconf import OmegaConf

    eval_cfg = OmegaConf.create({"metrics": metrics, "output_dir": str(output_dir), "overwrite": True})
    evaluator = ou.Evaluator(name, eval_cfg)
    evaluator.evaluate(model, output_dir=str(output_dir), overwrite=True, tokenizer=Tokenizer4(tokenizer),
                       template_args=OmegaConf.create(template_args))
    return json.loads((output_dir / f"{name}_EVAL.json").read_text())


def muse_metrics(files: dict[str, Path], items: int, verbmem_tokens: int, knowmem_tokens: int, cache: Path,
                 retain_logs: Path | None) -> dict:
    """configs/eval/muse.yaml's metrics as hydra composes them at d3d7cf9
    (with exact_memorization, listed there commented out), over the MUSE
    files `files` ({verbmem, forget_qa, forget_qa_icl, retain_qa,
    retain_qa_icl, privleak_forget, privleak_holdout: path}); the ICL files
    are read whole, as `few_shot_dataset_hf_args` reads its split."""

    def verbmem(*, generate=False):
        args = {"prefix_key": "prompt", "text_key": "gt", "max_length": 2048, "insert_space": True}
        if generate:
            args["predict_with_generate"] = True
        return {"MUSE_forget_verbmem": dataset_config("CompletionDataset", files["verbmem"], items, cache, **args)}

    def knowmem(split):
        dataset = dataset_config("QADataset", files[split], items, cache, question_key="question",
                                 answer_key="answer", max_length=512, predict_with_generate=True,
                                 few_shot_dataset_hf_args=local_hf_args(files[f"{split}_icl"], cache))
        return {"handler": "rouge", "rouge_type": "rougeL_f1", "batch_size": 16,
                "datasets": {f"MUSE_{split}_knowmem": dataset}, "collators": _collator("left"),
                "generation_args": _generation(knowmem_tokens, ["\n\n", "\nQuestion", "Question:"])}

    def mia_text(name):
        return dataset_config("CompletionDataset", files[f"privleak_{name}"], items, cache, prefix_key="prompt",
                        text_key="text", max_length=2048)

    mia = {"handler": "mia_min_k", "k": 0.4, "batch_size": 8, "collators": _collator(),
           "datasets": {"MUSE_MIA_holdout": {**mia_text("holdout"), "access_key": "holdout"},
                        "MUSE_MIA_forget": {**mia_text("forget"), "access_key": "forget"}}}
    memorization = {"batch_size": 8, "datasets": verbmem(), "collators": _collator()}
    return {
        "forget_knowmem_ROUGE": knowmem("forget_qa"),
        "retain_knowmem_ROUGE": knowmem("retain_qa"),
        "forget_verbmem_ROUGE": {"handler": "rouge", "rouge_type": "rougeL_f1", "batch_size": 8,
                                 "datasets": verbmem(generate=True), "collators": _collator("left"),
                                 "generation_args": _generation(verbmem_tokens)},
        "privleak": {"handler": "privleak", "ref_value": 0.5,
                     "pre_compute": {"mia_min_k": {**mia, "access_key": "forget"}},
                     "reference_logs": {"retain_model_logs": {
                         "path": str(retain_logs) if retain_logs else None,
                         "include": {"mia_min_k": {"access_key": "retain"}}}}},
        "extraction_strength": {"handler": "extraction_strength", **memorization},
        "exact_memorization": {"handler": "exact_memorization", **memorization},
    }
