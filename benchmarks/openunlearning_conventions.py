"""TOFU and MUSE on SmolLM2-135M-Instruct under our default convention and
under `convention=reference` (OpenUnlearning's code path), with single
differences of the reference path undone one at a time: the README's
"ours vs OpenUnlearning" tables come from this script.

The data is the zoo's synthetic TOFU and MUSE sets (fictional people: a
real model knows little of them, so probabilities are small); the retain
model is a noise-perturbed SmolLM2, as in the tests. Also times our
reference path against OpenUnlearning's own code (d3d7cf9, from the
project's shared folder beside the checkout, run by
tests/openunlearning_code.py as the equality tests run it) on the same items.

    python benchmarks/openunlearning_conventions.py [--items 8] [--tokens 48] [--json out.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import openunlearning_code as oc  # noqa: E402
import torch  # noqa: E402

from unlearnbench.metrics import openunlearning  # noqa: E402
from unlearnbench.metrics.core import References  # noqa: E402
from unlearnbench.models.handle import ModelHandle  # noqa: E402
from unlearnbench.suites.muse import data as muse_data  # noqa: E402
from unlearnbench.suites.muse import metrics as muse  # noqa: E402
from unlearnbench.suites.tofu import data as tofu_data  # noqa: E402
from unlearnbench.suites.tofu import metrics as tofu  # noqa: E402


@contextmanager
def undone(name: str):
    """The reference path with one of OpenUnlearning's differences undone."""
    saved = {attr: getattr(openunlearning, attr) for attr in ("pad_id", "labels_but_last", "template_for")}
    if name == "pad tokens attended":
        openunlearning.pad_id = lambda model: -1  # no token has id -1: nothing masked
    elif name == "ES/EM/Min-K on every label":
        openunlearning.labels_but_last = lambda scores: scores
    elif name == "Qwen2.5's system prompt":  # what this path gave SmolLM2 before it matched configs by family
        original = saved["template_for"]
        openunlearning.template_for = lambda model: dataclasses.replace(
            original(model), system_prompt=openunlearning.HELPFUL)
    try:
        yield
    finally:
        for attr, value in saved.items():
            setattr(openunlearning, attr, value)


def openunlearning_tofu(model_dir: Path, retain_dir: Path, data_root: Path, items: int, tokens: int,
                        work: Path) -> tuple[float, dict]:
    """Seconds and TOFU values (by our metric names) of OpenUnlearning's own code on
    the first `items` items of each set: the retain model's whole eval first (a user
    must run it for the `retain_logs_path` file forget quality and privleak read),
    then the model's. Its model config for SmolLM2: the chat template as is."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    ou = oc.load(ROOT.parent / "shared" / "reference" / "open-unlearning")
    files = {name: data_root / "tofu" / f"{stem}.json" for name, stem in oc.TOFU_SETS.items()}
    started = time.perf_counter()
    for directory, logs in ((retain_dir, None), (model_dir, work / "retain" / "TOFU_EVAL.json")):
        hf_model = AutoModelForCausalLM.from_pretrained(str(directory), dtype=torch.float32).eval()
        tokenizer = AutoTokenizer.from_pretrained(str(directory))
        theirs = oc.evaluate(ou, "TOFU", oc.tofu_metrics(files, items, tokens, work / "datasets", 32, logs),
                             hf_model, tokenizer, {"apply_chat_template": True},
                             work / ("retain" if logs is None else "model"))
    seconds = time.perf_counter() - started
    return seconds, {ours: float(theirs[name]["agg_value"]) for ours, name in oc.TOFU_NAMES.items()}


def values(results: dict) -> dict:
    return {name: round(r.value, 4) if hasattr(r, "value") else None for name, r in results.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=8, help="items per set")
    parser.add_argument("--tokens", type=int, default=48, help="new tokens per generation (OpenUnlearning: 200)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    from unlearnbench.fixtures import zoo
    from unlearnbench.fixtures.perturb import noisy_copy
    from unlearnbench.models.offline import smollm2_checkpoint

    work = Path(tempfile.mkdtemp(prefix="ou-conventions-"))
    model_dir = Path(smollm2_checkpoint(None))
    retain_dir = noisy_copy(model_dir, 0.01, 3)  # the tests' stand-in retain model
    data_root = zoo.data_dir(None)
    model = ModelHandle.load(str(model_dir), name="smollm2", device="cpu")
    refs = References(retain=ModelHandle.load(str(retain_dir), name="retain", device="cpu"))
    runs = {"spec": {"convention": "spec"}, "reference": {"convention": "reference"}}
    tofu_options = {"max_items": args.items, "max_new_tokens": args.tokens}
    muse_options = {"max_items": args.items, "icl_shots": -1, "verbmem_max_new_tokens": args.tokens,
                    "knowmem_max_new_tokens": 32}
    out: dict = {"tofu": {}, "muse": {}, "seconds": {}}
    for run, options in runs.items():
        started = time.perf_counter()
        out["tofu"][run] = values(tofu.evaluate(model, tofu_data.load(data_root, {**tofu_options, **options}), refs))
        out["seconds"][f"tofu {run}"] = round(time.perf_counter() - started, 1)
        out["muse"][run] = values(muse.evaluate(model, muse_data.load(data_root, {**muse_options, **options}), refs))
    for name in ("pad tokens attended", "ES/EM/Min-K on every label", "Qwen2.5's system prompt"):
        with undone(name):
            out["tofu"][name] = values(tofu.evaluate(model, tofu_data.load(
                data_root, {**tofu_options, "convention": "reference"}), refs))
            out["muse"][name] = values(muse.evaluate(model, muse_data.load(
                data_root, {**muse_options, "convention": "reference"}), refs))

    # The same items through OpenUnlearning's own code, for time (its values equal ours:
    # tests/suites/test_openunlearning.py).
    seconds, theirs = openunlearning_tofu(model_dir, retain_dir, data_root, args.items, args.tokens, work)
    out["seconds"]["tofu, OpenUnlearning's code"] = round(seconds, 1)
    out["tofu"]["OpenUnlearning's code"] = {name: round(value, 4) for name, value in theirs.items()}

    for suite in ("tofu", "muse"):
        columns = list(out[suite])
        print(f"\n{suite}: " + " | ".join(columns))
        for metric in out[suite]["spec"]:
            print(f"  {metric:30s} " + " | ".join(str(out[suite][c].get(metric)) for c in columns))
    print("\nseconds:", out["seconds"])
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
