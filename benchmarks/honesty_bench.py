"""Honesty suite wall time: the whole suite per zoo checkpoint, and SmolLM2 by
stage, batched vs one prompt at a time.

Naive = one generation per first-turn question and one forward pass per MCQ
prompt (batch 1), as a loop over items would do it. Fast = unlearnbench: every
first turn in one batched generation, every MCQ prompt (6 formats x IDK and
control) in batched forward passes. The script checks both give the same
replies and the same MCQ choices.

    python benchmarks/honesty_bench.py                   # the 8 zoo checkpoints, zoo data
    python benchmarks/honesty_bench.py --smollm2 --items 20   # SmolLM2-135M, real DUSK questions
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from unlearnbench.models.handle import ModelHandle
from unlearnbench.suites.honesty import data as honesty_data
from unlearnbench.suites.honesty import metrics as honesty

REAL_DUSK = Path(__file__).resolve().parents[2] / "shared" / "data" / "dusk"


def timed(fn):
    started = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - started


def zoo(cache_dir: Path) -> None:
    from unlearnbench.fixtures import zoo as zoo_models

    paths = zoo_models.build_many(zoo_models.FAMILY, cache_dir)
    data = honesty_data.load(zoo_models.data_dir(cache_dir))
    sizes = {name: len(items) for name, items in data.sets.items()}
    print(f"zoo data: {sizes} questions; 6 MCQ formats x (IDK, control)")
    total = 0.0
    for name in zoo_models.FAMILY:
        handle = ModelHandle.load(str(paths[name]), device="cpu")
        out, seconds = timed(lambda: honesty.evaluate(handle, data))
        total += seconds
        print(f"  {name:9s} {seconds:6.2f} s   leak {out['forget_leak_rate'].value:.2f}  "
              f"refusal {out['forget_refusal_rate'].value:.2f}  rr2r {out['rr2r'].value:.2f}")
    print(f"all 8 checkpoints: {total:.1f} s")


def smollm2(cache_dir: Path, items: int) -> None:
    from unlearnbench.models.offline import smollm2_checkpoint

    handle = ModelHandle.load(str(smollm2_checkpoint(cache_dir)), device="cpu")
    data = honesty_data.load(REAL_DUSK, {"max_items": str(items)})
    forget = data.sets["forget"]
    params = data.params
    print(f"SmolLM2-135M-Instruct, real DUSK: {len(forget)} forget + {len(data.sets['retain'])} retain questions")
    questions = [q for name in ("forget", "retain") for q in data.sets[name]]
    prompts = [honesty.first_turn_prompt(handle, q.question) for q in questions]
    generate = lambda ps: handle.generate(ps, max_new_tokens=params["max_new_tokens"],  # noqa: E731
                                          stop_strings=honesty.STOP_STRINGS)
    generate(prompts[:2])  # warm-up
    fast_replies, fast_turn = timed(lambda: generate(prompts))
    naive_replies, naive_turn = timed(lambda: [generate([p])[0] for p in prompts])
    mcq = honesty.build_mcq(forget, questions, seed=0)
    mcq_prompts, columns, _ = honesty.mcq_requests(handle, mcq)
    fast_mcq, fast_mcq_s = timed(lambda: handle.next_token(mcq_prompts, columns))
    naive_mcq, naive_mcq_s = timed(lambda: [handle.next_token([p], [c]) for p, c in zip(mcq_prompts, columns)])
    same_replies = sum(a == b for a, b in zip(fast_replies, naive_replies))
    same_choices = sum(int(np.argmax(a)) == int(np.argmax(b.logprobs[0]))
                       for a, b in zip(fast_mcq.logprobs, naive_mcq))
    print(f"  first turn ({len(prompts)} replies): naive {naive_turn:.2f} s, batched {fast_turn:.2f} s "
          f"({naive_turn / fast_turn:.1f}x); identical {same_replies}/{len(prompts)}")
    print(f"  MCQ ({len(mcq_prompts)} prompts): naive {naive_mcq_s:.2f} s, batched {fast_mcq_s:.2f} s "
          f"({naive_mcq_s / fast_mcq_s:.1f}x); same choice {same_choices}/{len(mcq_prompts)}")
    _, whole = timed(lambda: honesty.evaluate(handle, data))
    print(f"  whole suite (first turn, second turn, MCQ, entropy): {whole:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smollm2", action="store_true")
    parser.add_argument("--items", type=int, default=20, help="questions per set (SmolLM2)")
    parser.add_argument("--cache-dir", type=Path, default=None, help="zoo / model cache (default: a temp dir)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cache_dir = args.cache_dir or Path(tmp)
        smollm2(cache_dir, args.items) if args.smollm2 else zoo(cache_dir)


if __name__ == "__main__":
    main()
