"""ModelHandle speed on SmolLM2-135M-Instruct (CPU, float32), same run, same machine.

Generation: DUSK 11-shot knowledge QA (the ICL block is identical for every
question), 32 new tokens, greedy, cut at the DUSK stop strings:
  naive    = batch 1, the ICL block re-encoded with every question
             (what the DUSK reference code does: ~1.7 s/question)
  batched  = auto batch, ICL block still re-encoded
  prefix   = auto batch + the ICL block's KV cache computed once and reused
All three feed the model the same tokens; the script counts identical answers.
Scoring: teacher-forced float32 log-probs with Min-K%++ vocabulary statistics,
batch 1 vs auto batch.

    python benchmarks/handle_bench.py [--questions 16] [--data ../shared/data/dusk/eval]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from unlearnbench.models.handle import ModelHandle
from unlearnbench.models.offline import smollm2_checkpoint

STOPS = ("\n\n", "\nQuestion", "Question:")
DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "dusk" / "eval"


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def timed(fn):
    started = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=16)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args()

    icl = read_jsonl(args.data / "icl.jsonl")
    qa = (read_jsonl(args.data / "SpecificForgetQA.jsonl") + read_jsonl(args.data / "GeneralQA.jsonl"))
    qa = qa[: args.questions]
    prefix = "".join(f"Question: {r['question']}\nAnswer: {r['answer']}\n\n" for r in icl)
    prompts = [f"Question: {r['question']}\nAnswer: " for r in qa]
    n = len(prompts)

    path = smollm2_checkpoint()
    auto, load_s = timed(lambda: ModelHandle.load(str(path), device="cpu"))
    single = ModelHandle(auto.model, auto.tokenizer, name="batch1", source=str(path),
                         fingerprint=auto.fingerprint, batch_size=1)
    print(f"SmolLM2-135M-Instruct loaded in {load_s:.1f} s; {n} questions, {len(icl)}-shot prefix of "
          f"{len(auto.encode(prefix, add_special_tokens=True))} tokens, {torch.get_num_threads()} threads")

    kw = dict(max_new_tokens=32, stop_strings=STOPS, prefix=prefix)
    single.generator.reuse_prefix_cache = auto.generator.reuse_prefix_cache = False
    naive, t_naive = timed(lambda: single.generate(prompts, **kw))
    batched, t_batched = timed(lambda: auto.generate(prompts, **kw))
    auto.generator.reuse_prefix_cache = True
    reused, t_prefix = timed(lambda: auto.generate(prompts, **kw))
    print("\ngeneration (DUSK ICL QA, 32 new tokens)")
    for label, seconds in (("naive   batch 1, prefix re-encoded", t_naive),
                           ("batched auto,    prefix re-encoded", t_batched),
                           ("prefix  auto,    prefix KV reused ", t_prefix)):
        print(f"  {label}: {seconds:7.2f} s  {seconds / n:.3f} s/question  ({t_naive / seconds:.1f}x)")
    agree = sum(a == b == c for a, b, c in zip(naive, batched, reused))
    print(f"  identical answers in all three modes: {agree}/{n}")

    texts = [f"{r['question']} {r['answer']}. {prefix[:400]}" for r in qa]
    one, t_one = timed(lambda: single.score_continuations([""] * n, texts, vocab_stats=True))
    many, t_many = timed(lambda: auto.score_continuations([""] * n, texts, vocab_stats=True))
    diff = max(float(np.abs(a.logprobs - b.logprobs).max()) for a, b in zip(one, many))
    tokens = sum(len(s.logprobs) for s in many)
    print(f"\nscoring ({tokens} tokens, float32 log-probs + vocab mean/var)")
    print(f"  batch 1: {t_one:6.2f} s   auto batch: {t_many:6.2f} s  ({t_one / t_many:.1f}x); "
          f"max |log-prob diff| {diff:.2e}")


if __name__ == "__main__":
    main()
