"""UDS cost per checkpoint: naive vs exact-batched vs fast patching, same run.

naive  = tests/suites/test_uds.py's reference: one item at a time; for every layer,
         hook the target block and rerun the whole model (the public UDS
         reference code's approach: ~390 s for 40 TOFU items on
         SmolLM2 with stage 1 uncached, batch 8, on this kind of machine);
exact  = unlearnbench's fallback: batched, one source pass per batch, every
         layer patched by hook with the whole model rerun;
fast   = unlearnbench's default: the target's own pass supplies block outputs
         and the KV cache, only blocks above the patch rerun, only on the
         positions from the first patched one.
Stage 1 (retain -> full) is cached on disk; a sweep pays it once.

    python benchmarks/uds_bench.py                   # the zoo: full, retain, npo
    python benchmarks/uds_bench.py --smollm2 --items 40
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.suites.test_uds import naive_deltas  # noqa: E402  (the reference implementation the tests trust)

from unlearnbench.cache import DiskCache  # noqa: E402
from unlearnbench.models.handle import ModelHandle  # noqa: E402
from unlearnbench.suites.uds import data as uds_data  # noqa: E402
from unlearnbench.suites.uds import metrics as uds  # noqa: E402

TOFU = Path(__file__).resolve().parents[2] / "shared" / "data" / "uds" / "tofu_forget10_filtered.json"


def timed(fn):
    started = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - started


def perturbed(path: Path, layers: slice, scale: float, seed: int) -> ModelHandle:
    """A copy of SmolLM2 with noise in some MLPs: a stand-in for a model that
    lost what those layers carry (there is no SmolLM2 retain model offline)."""
    handle = ModelHandle.load(str(path), device="cpu", name=f"perturbed-{seed}")
    torch.manual_seed(seed)
    with torch.no_grad():
        for block in handle.blocks[layers]:
            for weight in block.mlp.parameters():
                weight.add_(torch.randn_like(weight) * scale)
    return handle


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smollm2", action="store_true")
    parser.add_argument("--items", type=int, default=40, help="TOFU items (SmolLM2 run)")
    parser.add_argument("--skip-naive", action="store_true", help="leave out the (slow) naive path")
    parser.add_argument("--cache-dir", type=Path, default=None)
    args = parser.parse_args()

    if args.smollm2:
        from unlearnbench.models.offline import smollm2_checkpoint

        path = smollm2_checkpoint(args.cache_dir)
        full = ModelHandle.load(str(path), device="cpu", name="smollm2")
        retain = perturbed(path, slice(8, 20), 0.03, seed=1)
        unlearned = perturbed(path, slice(12, 18), 0.02, seed=2)
        data = uds_data.load(str(TOFU), {"max_items": args.items})
    else:
        from unlearnbench.fixtures import zoo

        paths = zoo.build_many(["full", "retain", "npo"], args.cache_dir)
        full, retain, unlearned = (ModelHandle.load(str(paths[n]), device="cpu") for n in ("full", "retain", "npo"))
        data = uds_data.load(str(zoo.data_dir(args.cache_dir)))
    items, sequences, spans, skipped = uds.encode_items(full, data.items)
    print(f"{full.name}: {len(items)} items ({len(skipped)} skipped), {full.num_layers} layers, "
          f"{np.mean([len(s) for s in sequences]):.0f} tokens on average, {torch.get_num_threads()} threads")

    uds.layer_deltas(full, unlearned, sequences[:2], spans[:2])  # warm-up: first-call allocations
    fast2, t_fast2 = timed(lambda: uds.layer_deltas(full, unlearned, sequences, spans))
    base, exact_patched = None, None
    (base, exact_patched), t_exact2 = timed(lambda: full.span_scores(sequences, spans, patch_source=unlearned,
                                                                     exact=True))
    exact2 = base[:, None] - exact_patched
    with tempfile.TemporaryDirectory() as tmp:
        cache = DiskCache(tmp)
        parts = {"op": "uds:stage1", "full": full.fingerprint, "retain": retain.fingerprint, "data": data.fingerprint}
        fast1, t_cold1 = timed(lambda: cache.get_or_compute(parts, lambda: uds.layer_deltas(full, retain, sequences, spans)))
        _, t_warm1 = timed(lambda: cache.get_or_compute(parts, lambda: None))
    result = uds.uds_result(items, fast1, fast2, skipped, data.params, uds.patching_path(full))
    print(f"UDS of the unlearned model: {getattr(result, 'value', result)}")
    print(f"\nmax |fast - exact| over all deltas: {np.abs(fast2 - exact2).max():.2e}")

    rows = [("stage 2, exact batched (hook-and-rerun)", t_exact2), ("stage 2, fast", t_fast2),
            ("stage 1, fast, cold cache", t_cold1), ("stage 1, warm cache (every later checkpoint)", t_warm1)]
    if not args.skip_naive:
        naive2, t_naive2 = timed(lambda: naive_deltas(full, unlearned, sequences, spans))
        print(f"max |fast - naive| over all deltas: {np.abs(fast2 - naive2).max():.2e}")
        rows.insert(0, ("stage 2, naive (per item, per layer, whole rerun)", t_naive2))
    print("\nstage                                              seconds")
    for label, seconds in rows:
        print(f"{label:<50} {seconds:8.3f}")
    if not args.skip_naive:
        print(f"\nper checkpoint, stage 1 warm: naive {t_naive2:.1f} s vs fast {t_fast2 + t_warm1:.1f} s "
              f"({t_naive2 / (t_fast2 + t_warm1):.1f}x); exact batched {t_exact2:.1f} s "
              f"({t_exact2 / (t_fast2 + t_warm1):.1f}x)")
        print(f"first checkpoint, stage 1 + 2 cold: naive {2 * t_naive2:.1f} s vs fast {t_cold1 + t_fast2:.1f} s "
              f"({2 * t_naive2 / (t_cold1 + t_fast2):.1f}x)")


if __name__ == "__main__":
    main()
