"""Each suite against the code a user would otherwise run, side by side: same
machine, same model (SmolLM2-135M-Instruct, float32, CPU), same items, one
process each, with the values compared as well as the seconds.

- uds: gnueaj/unlearning-depth-score's `compute_uds.py` (fc31639, from the
  project's shared folder) as a subprocess, as its README runs it (local
  folders, CPU, float32, every layer, batch 1), against `pytest suites/uds`
  under `uds.convention=reference` as a subprocess. "One process" is a cold
  run (their stage-1 cache empty, our result cache empty): what a CI gate
  runs. "Per checkpoint in a sweep" is what one more unlearned model costs:
  for theirs a second `compute_uds.py` run reading its stage-1 cache (one
  process per model, as its README sweeps); for ours the new checkpoint's
  load and evaluation in a pytest run whose result cache holds the references'
  work (the report's `load_seconds` + `evaluate_s`).
- dusk: the DUSK reference code's evaluation loops (AI-ISL/DUSK@129a0a5,
  `metrics/rouge_eval.py` and `metrics/qa_eval.py`, written here from that
  code): every prompt generated alone by `model.generate` (greedy, the whole
  prompt tokenized with special tokens); four verbatim loops (ROUGE, cosine,
  LCS, Levenshtein), each generating every prompt again, up to 128 tokens; a
  knowledge question's 32 tokens generated in full, then cut at the stop
  strings. Metric code is ours on both sides, and their per-item bootstrap
  report (rouge_eval's `logger.report()` after every item) is left out:
  both favour their side. Against the dusk suite's own batched path.
- tofu: OpenUnlearning's metric handlers through its `Evaluator` (d3d7cf9,
  from the shared folder, driven as tests/suites/test_openunlearning.py
  drives them): the retain model's eval (which its forget quality and
  privleak read from a file) and the model's, against `tofu.evaluate` under
  `convention=reference` with the retain model's work computed, not cached.
- wmdp: lm-evaluation-harness's HF backend (`simple_evaluate`, batch 16)
  against the wmdp suite (benchmarks/wmdp_bench.py).

    python benchmarks/reference_codes.py [--suites uds dusk tofu wmdp] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
sys.path.insert(0, str(ROOT))
from tests.suites.test_uds import run_compute_uds  # noqa: E402  (the reference code's run the equality tests trust)

UDS_ITEMS = SHARED / "data" / "uds" / "tofu_forget10_filtered.json"
DUSK_DATA = SHARED / "data" / "dusk"
TARGETS = {"uds, one process": 10, "uds, per checkpoint in a sweep": 15, "dusk verbatim": 6, "dusk knowledge QA": 15,
           "tofu": 3, "wmdp": 2, "wmdp cloze": 2}
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "CUDA_VISIBLE_DEVICES": ""}


def timed(fn):
    started = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - started


# ----------------------------------------------------------------------- uds
def compute_uds(full: Path, retain: Path, unlearned: Path, items: int, s1_cache: Path, out_dir: Path) -> dict:
    """UDS per item from `compute_uds.py`, run as the tests run it (tests/suites/test_uds.py), with its S1 cache."""
    results = run_compute_uds(full, retain, unlearned, UDS_ITEMS, items, out_dir, s1_cache=s1_cache)
    return {str(r["idx"]): r["uds"] for r in results}


def pytest_uds(full: Path, retain: Path, unlearned: Path, items: int, cache: Path, work: Path) -> dict:
    """A `pytest suites/uds` run as a subprocess: its report's UDS per item and timings."""
    reports = work / f"reports-{unlearned.name}"
    command = [sys.executable, "-m", "pytest", str(ROOT / "suites" / "uds"), "-q", "-p", "no:cacheprovider",
               "--model", f"unlearned={unlearned}", "--full-model", str(full), "--retain-model", str(retain),
               "--data-dir", f"uds={UDS_ITEMS}", "--suite-option", f"uds.max_items={items}",
               "--suite-option", "uds.convention=reference", "--cache-dir", str(cache), "--device", "cpu",
               "--report-dir", str(reports)]
    done = subprocess.run(command, cwd=ROOT, env={**os.environ, **OFFLINE}, capture_output=True, text=True)
    if done.returncode not in (0, 1):  # 1: a check failed, which the noise-perturbed models may do
        raise RuntimeError(f"pytest suites/uds exited {done.returncode}: {done.stdout[-2000:]}")
    report = json.loads((reports / "latest" / "report.json").read_text())
    checkpoint = report["checkpoints"]["unlearned"]
    suite = checkpoint["suites"]["uds"]
    return {"per_item": suite["metrics"]["uds"]["per_item"],
            "checkpoint_s": checkpoint["info"]["load_seconds"] + suite["timings"]["evaluate_s"]}


def uds_side(items: int, work: Path) -> list[dict]:
    from unlearnbench.fixtures.perturb import noisy_copy
    from unlearnbench.models.offline import smollm2_checkpoint

    full = Path(smollm2_checkpoint())
    retain = noisy_copy(full, 0.01, 3)
    first, second = noisy_copy(full, 0.02, 5), noisy_copy(full, 0.02, 6)
    s1_cache, cache = work / "uds-s1-cache", work / "unlearnbench-cache"
    theirs_first, theirs_cold = timed(lambda: compute_uds(full, retain, first, items, s1_cache, work / "uds-1"))
    theirs_second, theirs_warm = timed(lambda: compute_uds(full, retain, second, items, s1_cache, work / "uds-2"))
    ours_first, ours_cold = timed(lambda: pytest_uds(full, retain, first, items, cache, work))
    ours_second = pytest_uds(full, retain, second, items, cache, work)
    difference = max(abs(ours[idx] - theirs[idx])
                     for ours, theirs in ((ours_first["per_item"], theirs_first),
                                          (ours_second["per_item"], theirs_second)) for idx in ours)
    scored = sum(v is not None for v in theirs_first.values())
    agree = f"{scored} of {items} items scored, max |Δ UDS| {difference:.1e}"
    return [{"row": "uds, one process", "ours_s": ours_cold, "theirs_s": theirs_cold, "values": agree,
             "what": f"{items} TOFU items; full + retain + 1 unlearned model, cold caches, process start included"},
            {"row": "uds, per checkpoint in a sweep", "ours_s": ours_second["checkpoint_s"], "theirs_s": theirs_warm,
             "values": agree, "what": "one more unlearned model, stage 1 cached"}]


# ---------------------------------------------------------------------- dusk
def dusk_reference_generate(model, tokenizer, prompt: str, max_new_tokens: int) -> str:
    """One prompt as the DUSK reference code generates it: alone, tokenized with
    special tokens, greedy `model.generate`, the new tokens decoded."""
    import torch

    ids = tokenizer(prompt, return_tensors="pt", add_special_tokens=True).input_ids
    with torch.inference_mode():
        out = model.generate(ids, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tokenizer.pad_token_id)
    return tokenizer.batch_decode(out[:, ids.shape[1]:], skip_special_tokens=True, clean_up_tokenization_spaces=True)[0]


def dusk_side(items: int, questions: int) -> list[dict]:
    import dataclasses

    from unlearnbench.metrics.text import Embedder, lcs_ratio, levenshtein_similarity, rouge
    from unlearnbench.models.handle import ModelHandle
    from unlearnbench.models.offline import smollm2_checkpoint
    from unlearnbench.suites.dusk import data as dusk_data
    from unlearnbench.suites.dusk import metrics as dusk

    full = dusk_data.load(DUSK_DATA)
    data = dataclasses.replace(full, verbatim=full.verbatim[:items],
                               qa={name: qa[:questions] for name, qa in full.qa.items()})
    handle = ModelHandle.load(str(smollm2_checkpoint()), device="cpu")
    model, tokenizer = handle.model, handle.tokenizer
    embedder = Embedder(data.params["embedder"])
    embedder.cosine(["warm up"], ["warm up"])
    references = dusk.verbatim_references(handle, data)
    prompts, tokens = [v.prompt for v in data.verbatim], data.params["verbatim_max_new_tokens"]

    ours_v, ours_v_s = timed(lambda: dusk.verbatim_metrics(references, handle.generate(prompts, max_new_tokens=tokens),
                                                           [v.id for v in data.verbatim], prompts, embedder,
                                                           data.params))

    def their_verbatim():
        scores = {}
        for family, score in (("rouge", lambda r, g: rouge(r, g)["rougeL_f1"]),
                              ("embedding", lambda r, g: embedder.cosine([r], [g])[0]),
                              ("lcs", lcs_ratio), ("levenshtein", levenshtein_similarity)):
            scores[family] = [score(r, dusk_reference_generate(model, tokenizer, p, tokens))
                              for r, p in zip(references, prompts)]
        return scores

    theirs_v, theirs_v_s = timed(their_verbatim)
    same_v = max(abs(a - b) for name, family in (("verbatim_rougeL_f1", "rouge"), ("verbatim_lcs_ratio", "lcs"),
                                                 ("verbatim_levenshtein", "levenshtein"),
                                                 ("verbatim_embedding_cosine", "embedding"))
                 for a, b in zip(ours_v[name].per_item.values(), theirs_v[family]))

    asked = [q for name in dusk.QA_SETS.values() for q in data.qa[name]]
    qa_prompts, prefix = [dusk.qa_prompt(q.question) for q in asked], dusk.qa_prefix(data)
    qa_tokens = data.params["qa_max_new_tokens"]
    ours_q, ours_q_s = timed(lambda: handle.generate(qa_prompts, prefix=prefix, max_new_tokens=qa_tokens,
                                                     stop_strings=dusk.QA_STOP_STRINGS))

    def cut(text: str) -> str:
        for stop in dusk.QA_STOP_STRINGS:
            text = text.split(stop)[0]
        return text

    theirs_q, theirs_q_s = timed(lambda: [cut(dusk_reference_generate(model, tokenizer, prefix + p, qa_tokens))
                                          for p in qa_prompts])
    same_q = sum(a.strip() == b.strip() for a, b in zip(ours_q, theirs_q))
    shots = data.params["icl_shots"]
    return [{"row": "dusk verbatim", "ours_s": ours_v_s, "theirs_s": theirs_v_s,
             "values": f"max |Δ score| {same_v:.1e}",
             "what": f"real DUSK, {items} verbatim prompts, {tokens} new tokens, 4 metric families"},
            {"row": "dusk knowledge QA", "ours_s": ours_q_s, "theirs_s": theirs_q_s,
             "values": f"{same_q} of {len(asked)} answers identical",
             "what": f"real DUSK, {len(asked)} questions, {shots}-shot ICL block, up to {qa_tokens} new tokens"}]


# ---------------------------------------------------------------------- tofu
def tofu_side(items: int, tokens: int, work: Path) -> list[dict]:
    from openunlearning_conventions import openunlearning_tofu

    from unlearnbench.fixtures import zoo
    from unlearnbench.fixtures.perturb import noisy_copy
    from unlearnbench.metrics.core import References
    from unlearnbench.models.handle import ModelHandle
    from unlearnbench.models.offline import smollm2_checkpoint
    from unlearnbench.suites.tofu import data as tofu_data
    from unlearnbench.suites.tofu import metrics as tofu

    model_dir = Path(smollm2_checkpoint())
    retain_dir = noisy_copy(model_dir, 0.01, 3)
    data_root = zoo.data_dir()
    model = ModelHandle.load(str(model_dir), name="smollm2", device="cpu")
    refs = References(retain=ModelHandle.load(str(retain_dir), name="retain", device="cpu"))
    data = tofu_data.load(data_root, {"max_items": items, "max_new_tokens": tokens, "convention": "reference"})
    ours, ours_s = timed(lambda: tofu.evaluate(model, data, refs))  # first: a warm-up's cost falls on this side
    for handle in (model, refs.retain):
        handle.scorer.share_prefixes = False
    _, separate_s = timed(lambda: tofu.evaluate(model, data, refs))
    theirs_s, theirs = openunlearning_tofu(model_dir, retain_dir, data_root, items, tokens, work / "openunlearning")
    compared = [name for name in theirs if hasattr(ours.get(name), "value")]
    difference = max(abs(ours[name].value - theirs[name]) for name in compared)
    return [{"row": "tofu", "ours_s": ours_s, "ours_separate_s": separate_s, "theirs_s": theirs_s,
             "values": f"{len(compared)} metrics, max |Δ| {difference:.1e}",
             "what": f"zoo TOFU sets, {items} items a set, {tokens} new tokens; the model and its retain model"}]


# ---------------------------------------------------------------------- wmdp
def wmdp_side(items: int) -> list[dict]:
    from wmdp_bench import compare

    rows = []
    for form in ("letters", "cloze"):
        out = compare(items, 16, form)
        rows.append({"row": "wmdp" if form == "letters" else "wmdp cloze", "ours_s": out["ours_s"],
                     "ours_separate_s": out["ours_separate_s"], "theirs_s": out["theirs_s"],
                     "values": f"same picks: {out['same_picks']}, max |Δ loglik| {out['max_ll_difference']:.1e}",
                     "what": f"{out['items']} zoo WMDP-format questions, zero-shot, {form}"})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suites", nargs="+", default=["uds", "dusk", "tofu", "wmdp"],
                        choices=["uds", "dusk", "tofu", "wmdp"])
    parser.add_argument("--uds-items", type=int, default=10)
    parser.add_argument("--dusk-items", type=int, default=4, help="verbatim prompts")
    parser.add_argument("--dusk-questions", type=int, default=10, help="questions per knowledge set")
    parser.add_argument("--tofu-items", type=int, default=5)
    parser.add_argument("--tofu-tokens", type=int, default=32)
    parser.add_argument("--wmdp-items", type=int, default=200)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if not SHARED.is_dir():
        print(f"{SHARED} (the reference codes and data) is missing: put the project's shared/ folder beside the clone")
        return 2
    work = Path(tempfile.mkdtemp(prefix="reference-codes-"))
    sides = {"uds": lambda: uds_side(args.uds_items, work), "dusk": lambda: dusk_side(args.dusk_items,
                                                                                      args.dusk_questions),
             "tofu": lambda: tofu_side(args.tofu_items, args.tofu_tokens, work), "wmdp": lambda: wmdp_side(args.wmdp_items)}
    rows = []
    for suite in args.suites:
        for row in sides[suite]():
            row["ratio"], row["target"] = row["theirs_s"] / row["ours_s"], TARGETS[row["row"]]
            rows.append(row)
            separate = (f"  (contexts run separately: {row['ours_separate_s']:.2f} s)" if "ours_separate_s" in row
                        else "")
            print(f"{row['row']:<32} ours {row['ours_s']:8.2f} s{separate}  theirs {row['theirs_s']:8.2f} s  "
                  f"{row['ratio']:5.1f}x (target {row['target']}x)  {row['values']}; {row['what']}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
