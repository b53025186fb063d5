"""What the non-finite logits check costs: SmolLM2-135M-Instruct, CPU, float32.

Every forward pass of a ModelHandle checks its logits at the real positions
(one float32 sum per position over the vocabulary, then `isfinite`). This
times a teacher-forced scoring batch (the forward pass, check included) and
the check alone on the logits that batch produced, same process.

    python benchmarks/finite_check_bench.py [--batch 16] [--length 256] [--repeats 5]
"""

from __future__ import annotations

import argparse
import time

import torch

from unlearnbench.models.handle import ModelHandle
from unlearnbench.models.offline import smollm2_checkpoint


def best_of(repeats: int, fn) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--length", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    handle = ModelHandle.load(str(smollm2_checkpoint()), device="cpu", name="smollm2")
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, handle.vocab_size, (args.batch, args.length), generator=generator)
    mask = torch.ones_like(ids)
    with torch.inference_mode():
        logits = handle.model(input_ids=ids, attention_mask=mask).logits

        def forward():
            handle.model(input_ids=ids, attention_mask=mask)

        def check():
            handle.finite_check(handle.model, (), {"attention_mask": mask}, type("Out", (), {"logits": logits}))

        forward_s, check_s = best_of(args.repeats, forward), best_of(args.repeats, check)
    print(f"batch {args.batch} x {args.length} tokens, vocabulary {handle.vocab_size}: forward pass (check "
          f"included) {forward_s * 1000:.1f} ms, the check alone {check_s * 1000:.2f} ms "
          f"({100 * check_s / forward_s:.2f}% of the pass)")


if __name__ == "__main__":
    main()
