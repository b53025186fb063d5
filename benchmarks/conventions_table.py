"""The numbers that issue #12's fixes change, on SmolLM2-135M-Instruct and the
real data: DUSK knowledge QA (12-shot, every UFK/SK/URK question), DUSK
membership AUC / PL / RD, honesty on the TOFU items, and UDS on the TOFU
items under both conventions. Run it on two commits to get a before/after
table (the script only uses calls that exist on both sides of the change).

There is no SmolLM2 retain model offline, so the retain / unlearned roles are
noise-perturbed copies of SmolLM2, as in `uds_bench.py`.

    python benchmarks/conventions_table.py --json out.json [--honesty-items 40] [--uds-items 40]
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from uds_bench import perturbed  # noqa: E402  (one definition of the stand-in models)

from unlearnbench.models.handle import ModelHandle  # noqa: E402
from unlearnbench.suites.dusk import data as dusk_data  # noqa: E402
from unlearnbench.suites.dusk import metrics as dusk  # noqa: E402
from unlearnbench.suites.honesty import data as honesty_data  # noqa: E402
from unlearnbench.suites.honesty import metrics as honesty  # noqa: E402
from unlearnbench.suites.uds import data as uds_data  # noqa: E402
from unlearnbench.suites.uds import metrics as uds  # noqa: E402

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


def value(result):
    return round(result.value, 4) if hasattr(result, "value") else f"unavailable: {result.reason}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--honesty-items", type=int, default=40)
    parser.add_argument("--uds-items", type=int, default=40)
    parser.add_argument("--qa-items", type=int, default=0, help="questions per DUSK QA set (0 = all)")
    parser.add_argument("--skip-membership", action="store_true", help="leave out the (slow) membership scores")
    parser.add_argument("--cache-dir", type=Path, default=None)
    args = parser.parse_args()
    from unlearnbench.models.offline import smollm2_checkpoint

    torch.set_num_threads(2)
    path = smollm2_checkpoint(args.cache_dir)
    model = ModelHandle.load(str(path), device="cpu", name="smollm2")
    retain = perturbed(path, slice(8, 20), 0.03, seed=1)
    out, seconds = {}, {}

    started = time.perf_counter()
    data = dusk_data.load(SHARED / "dusk")
    if args.qa_items:
        data = dataclasses.replace(data, qa={k: v[: args.qa_items] for k, v in data.qa.items()})
    order = [(name, q) for name in dusk.QA_SETS.values() for q in data.qa[name]]
    replies = model.generate([dusk.qa_prompt(q.question) for _, q in order], prefix=dusk.qa_prefix(data),
                             max_new_tokens=data.params["qa_max_new_tokens"], stop_strings=dusk.QA_STOP_STRINGS)
    by_set = {name: [r for (n, _), r in zip(order, replies) if n == name] for name in dusk.QA_SETS.values()}
    for name, result in dusk.knowledge_metrics(data, by_set, data.params).items():
        out[f"dusk.{name}"] = value(result)
    seconds["dusk knowledge QA"] = time.perf_counter() - started

    started = time.perf_counter()
    scores = {} if args.skip_membership else {"model": dusk.membership_scores(model, data), "retain": dusk.membership_scores(retain, data)}
    if scores:
        for name, result in dusk.membership_metrics(scores["model"], scores["retain"], data.params).items():
            out[f"dusk.{name}"] = value(result)
        out["dusk.mia_chunks"] = {k: len(v["minkpp"]) for k, v in scores["model"].items()}
    seconds["dusk membership"] = time.perf_counter() - started

    started = time.perf_counter()
    data = honesty_data.load(SHARED / "uds" / "tofu_forget10_filtered.json",
                             {"max_items": str(args.honesty_items)})
    for name, result in honesty.evaluate(model, data).items():
        out[f"honesty.{name}"] = value(result)
    seconds["honesty"] = time.perf_counter() - started

    started = time.perf_counter()
    unlearned = perturbed(path, slice(12, 18), 0.02, seed=2)
    data = uds_data.load(str(SHARED / "uds" / "tofu_forget10_filtered.json"), {"max_items": args.uds_items})
    conventions = ["spec"]
    if "convention" in inspect.signature(uds.encode_items).parameters:
        conventions.append("reference")
    for convention in conventions:
        kwargs = {"convention": convention} if convention != "spec" else {}
        items, sequences, spans, skipped = uds.encode_items(model, data.items, **kwargs)
        delta1 = uds.layer_deltas(model, retain, sequences, spans, **kwargs)
        delta2 = uds.layer_deltas(model, unlearned, sequences, spans, **kwargs)
        result = uds.uds_result(items, delta1, delta2, skipped, data.params, "")
        out[f"uds[{convention}]"] = value(result)
        out[f"uds[{convention}].items"] = len(items)
    seconds["uds"] = time.perf_counter() - started

    args.json.write_text(json.dumps({"metrics": out, "seconds": seconds}, indent=1))
    for key, v in out.items():
        print(f"{key:45s} {v}")
    for key, v in seconds.items():
        print(f"{key:45s} {v:.1f} s")


if __name__ == "__main__":
    main()
