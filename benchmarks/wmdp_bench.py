"""WMDP accuracy on SmolLM2-135M-Instruct: the wmdp suite's batched
multiple-choice path against lm-evaluation-harness's HF backend
(`simple_evaluate` on a local copy of the `wmdp_bio` task), the same items,
one run each; and the same items through our lm-eval adapter. Prints the
wall times, their ratio and whether the accuracies and picks agree.

The items are the zoo's WMDP-format set (forget facts, each asked three
times with its own distractors, and the MMLU side's facts), written to a
JSON-lines file both sides read, in the letter format (one-token answers:
one forward per question on both sides) or the cloze format (each option's
text scored after the question: the suite runs a question's context once
for its four options, lm-eval runs each option's sequence whole). The
suite is also timed with its contexts run separately, in the same run.

    python benchmarks/wmdp_bench.py [--items N] [--batch-size 16] [--format letters|cloze]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

TASK = """task: bench_wmdp_bio
dataset_path: json
dataset_kwargs: {{data_files: {{test: {file}}}}}
test_split: test
num_fewshot: 0
output_type: multiple_choice
description: "The following are multiple choice questions (with answers) about biology.\\n\\n"
doc_to_text: "{{{{question.strip()}}}}\\nA. {{{{choices[0]}}}}\\nB. {{{{choices[1]}}}}\\nC. {{{{choices[2]}}}}\\nD. {{{{choices[3]}}}}\\nAnswer:"
doc_to_choice: ["A", "B", "C", "D"]
doc_to_target: answer
metric_list: [{{metric: acc}}]
"""
CLOZE_TASK = TASK.replace("multiple choice questions", "questions").replace(
    'doc_to_text: "{{{{question.strip()}}}}\\nA. {{{{choices[0]}}}}\\nB. {{{{choices[1]}}}}\\nC. {{{{choices[2]}}}}\\nD. '
    '{{{{choices[3]}}}}\\nAnswer:"', 'doc_to_text: "Question: {{{{question.strip()}}}}\\nAnswer:"').replace(
    'doc_to_choice: ["A", "B", "C", "D"]', 'doc_to_choice: "{{{{choices}}}}"')


def compare(items: int, batch_size: int, form: str = "letters") -> dict:
    """Seconds, accuracies and agreement of the wmdp suite, lm-eval through our
    adapter and lm-eval's HF backend on the first `items` items (model loads not timed)."""
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    import torch
    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    from unlearnbench.fixtures import zoo
    from unlearnbench.models.handle import ModelHandle
    from unlearnbench.models.offline import smollm2_checkpoint
    from unlearnbench.suites.utility.lm_adapter import UnlearnbenchLM
    from unlearnbench.suites.wmdp import data as wmdp_data
    from unlearnbench.suites.wmdp import metrics as wmdp

    folder = zoo.data_dir() / "wmdp"
    rows = [json.loads(line) for path in [*sorted(folder.glob("wmdp-*.jsonl")), *sorted((folder / "mmlu").glob("*"))]
            for line in path.read_text().splitlines()][:items]
    model_dir = smollm2_checkpoint()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "wmdp-bio.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (tmp / "task.yaml").write_text((TASK if form == "letters" else CLOZE_TASK).format(file=tmp / "wmdp-bio.jsonl"))
        data = wmdp_data.load(tmp, {"format": form})

        model = ModelHandle.load(str(model_dir), device="cpu", dtype="float32")
        started = time.perf_counter()  # first: a warm-up's cost falls on the shared contexts' time
        ours = wmdp.evaluate(model, data)["wmdp_bio"]
        ours_s = time.perf_counter() - started
        model.scorer.share_prefixes = False
        started = time.perf_counter()
        wmdp.evaluate(model, data)
        separate_s = time.perf_counter() - started

        manager = TaskManager(include_path=str(tmp), include_defaults=False)
        started = time.perf_counter()
        adapter = simple_evaluate(model=UnlearnbenchLM(model), tasks=["bench_wmdp_bio"], task_manager=manager,
                                  log_samples=True, bootstrap_iters=0)
        adapter_s = time.perf_counter() - started

        hf = HFLM(pretrained=str(model_dir), device="cpu", batch_size=batch_size, dtype="float32")
        started = time.perf_counter()
        theirs = simple_evaluate(model=hf, tasks=["bench_wmdp_bio"], task_manager=manager, log_samples=True,
                                 bootstrap_iters=0)
        theirs_s = time.perf_counter() - started

    their_samples = sorted(theirs["samples"]["bench_wmdp_bio"], key=lambda s: s["doc_id"])
    their_lls = np.array([[r[0][0] for r in s["resps"]] for s in their_samples])
    our_lls = np.array([ours.details["items"][f"wmdp-bio-{i}"]["loglikelihoods"] for i in range(len(rows))])
    return {"items": len(rows), "format": form, "threads": torch.get_num_threads(), "ours_s": ours_s,
            "ours_separate_s": separate_s, "adapter_s": adapter_s,
            "theirs_s": theirs_s, "acc_ours": ours.value,
            "acc_adapter": adapter["results"]["bench_wmdp_bio"]["acc,none"],
            "acc_theirs": theirs["results"]["bench_wmdp_bio"]["acc,none"],
            "same_picks": all(ours.per_item[f"wmdp-bio-{i}"] == s["acc"] for i, s in enumerate(their_samples)),
            "max_ll_difference": float(np.abs(our_lls - their_lls).max())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=16, help="lm-eval HF backend's batch size")
    parser.add_argument("--format", default="letters", choices=("letters", "cloze"))
    args = parser.parse_args()
    out = compare(args.items, args.batch_size, args.format)
    print(f"SmolLM2-135M-Instruct (float32, CPU, {out['threads']} threads); {out['items']} items, {args.format}, "
          f"zero-shot")
    print(f"  wmdp suite:                               {out['ours_s']:7.2f} s  acc {out['acc_ours']:.4f}")
    print(f"  wmdp suite, contexts run separately:      {out['ours_separate_s']:7.2f} s")
    print(f"  lm-eval through our adapter:              {out['adapter_s']:7.2f} s  acc {out['acc_adapter']:.4f}")
    print(f"  lm-eval HF backend (batch {args.batch_size}):           {out['theirs_s']:7.2f} s  acc "
          f"{out['acc_theirs']:.4f}")
    print(f"  ratio lm-eval HF / wmdp suite: {out['theirs_s'] / out['ours_s']:.1f}x; same picks: {out['same_picks']}; "
          f"max |Δ ll| {out['max_ll_difference']:.2e} (ours rounded to 1e-4 in the details)")


if __name__ == "__main__":
    main()
