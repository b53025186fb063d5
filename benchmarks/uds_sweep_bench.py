"""Where a UDS checkpoint's seconds go in a sweep, and what one more checkpoint costs.

SmolLM2-135M-Instruct as the full model, noise-perturbed copies (as
`uds_bench.py` makes them) as retain and unlearned models, the first N TOFU
items of ../shared/data/uds, float32 on CPU. Prints one row per stage:

- process start: a fresh `python -c "import unlearnbench.plugin"` (torch and
  transformers imports); paid once per pytest process, not per checkpoint;
- model loads (full, retain: once per sweep; the checkpoint: every time);
- fingerprint of the checkpoint's weight files: cold (hashing) and warm (the
  memo keyed by path, size and mtime that every later run reads);
- encoding the items; stage 1 cold (once per sweep) and warm (the cache);
- stage 2, split into the checkpoint's source pass, the full model's own pass
  and the per-layer reruns of the blocks above each patch.

"per checkpoint in a sweep" adds what every further checkpoint pays: its
load, its warm fingerprint, encoding, stage 1 from the cache and stage 2.
The public UDS code's figure to compare with (measured on this kind
of machine for the same models and items): 301 s per checkpoint with its
stage-1 cache.

    python benchmarks/uds_sweep_bench.py [--items 40] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from uds_bench import TOFU, perturbed  # noqa: E402  (one definition of the stand-in models)

from unlearnbench.cache import DiskCache  # noqa: E402
from unlearnbench.models.checkpoint import fingerprint, resolve  # noqa: E402
from unlearnbench.models.patching import Patcher  # noqa: E402
from unlearnbench.models.handle import ModelHandle  # noqa: E402
from unlearnbench.suites.uds import data as uds_data  # noqa: E402
from unlearnbench.suites.uds import metrics as uds  # noqa: E402

PUBLIC_CODE_S_PER_CHECKPOINT = 301.0


def timed(fn):
    started = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - started


def stage2_split(full: ModelHandle, unlearned: ModelHandle, sequences, spans) -> tuple[np.ndarray, dict]:
    """Stage 2 with its time split: the source's block capture, the target's
    own cached pass, and the rest (the reruns above each patched layer)."""
    split = {"source_pass": 0.0, "own_pass": 0.0}
    capture = Patcher.block_outputs
    forward = full.model.forward

    def timed_capture(self, *args, **kwargs):
        started = time.perf_counter()
        try:
            return capture(self, *args, **kwargs)
        finally:
            split["source_pass"] += time.perf_counter() - started

    def timed_forward(*args, **kwargs):
        started = time.perf_counter()
        try:
            return forward(*args, **kwargs)
        finally:
            if kwargs.get("use_cache") and "input_ids" in kwargs:
                split["own_pass"] += time.perf_counter() - started

    Patcher.block_outputs = timed_capture
    full.model.forward = timed_forward
    try:
        deltas, total = timed(lambda: uds.layer_deltas(full, unlearned, sequences, spans))
    finally:
        Patcher.block_outputs = capture
        del full.model.forward
    split["reruns"] = total - split["source_pass"] - split["own_pass"]
    split["total"] = total
    return deltas, split


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=40)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    from unlearnbench.models.offline import smollm2_checkpoint

    rows: list[tuple[str, float, str]] = []
    _, start = timed(lambda: subprocess.run([sys.executable, "-c", "import unlearnbench.plugin, transformers, torch"],
                                            check=True))
    rows.append(("process start (imports)", start, "once per process"))
    path = smollm2_checkpoint()
    full, t_full = timed(lambda: ModelHandle.load(str(path), device="cpu", name="full"))
    rows.append(("load full", t_full, "once per sweep"))
    retain = perturbed(path, slice(8, 20), 0.03, seed=1)
    with tempfile.TemporaryDirectory() as tmp:
        unlearned = perturbed(path, slice(12, 18), 0.02, seed=2)
        unlearned.model.save_pretrained(tmp)
        unlearned.tokenizer.save_pretrained(tmp)
        unlearned, t_load = timed(lambda: ModelHandle.load(tmp, device="cpu", name="unlearned"))
        files = resolve(tmp).files
        memo = Path(tmp) / "memo.json"
        _, t_fp_cold = timed(lambda: fingerprint(files, memo))
        _, t_fp_warm = timed(lambda: fingerprint(files, memo))
        rows += [("load checkpoint", t_load, "per checkpoint"),
                 ("fingerprint, cold (hash the weights)", t_fp_cold, "first run only"),
                 ("fingerprint, warm (memo)", t_fp_warm, "per checkpoint")]
        data = uds_data.load(str(TOFU), {"max_items": args.items})
        (items, sequences, spans, _), t_encode = timed(lambda: uds.encode_items(full, data.items))
        rows.append(("encode items", t_encode, "per checkpoint"))
        uds.layer_deltas(full, unlearned, sequences[:2], spans[:2])  # warm-up: first-call allocations
        cache = DiskCache(tmp)
        parts = {"op": "bench:stage1", "full": full.fingerprint, "retain": retain.fingerprint}
        _, t_stage1 = timed(lambda: cache.get_or_compute(parts, lambda: uds.layer_deltas(full, retain, sequences,
                                                                                          spans)))
        _, t_stage1_warm = timed(lambda: cache.get_or_compute(parts, lambda: None))
        rows += [("stage 1, cold", t_stage1, "once per sweep"), ("stage 1, from the cache", t_stage1_warm,
                                                                 "per checkpoint")]
        _, split = stage2_split(full, unlearned, sequences, spans)
        rows += [(f"stage 2: {name.replace('_', ' ')}", split[name], "per checkpoint")
                 for name in ("source_pass", "own_pass", "reruns")]
    per_checkpoint = t_load + t_fp_warm + t_encode + t_stage1_warm + split["total"]
    print(f"SmolLM2-135M, {len(items)} TOFU items, {full.num_layers} layers, "
          f"{np.mean([len(s) for s in sequences]):.0f} tokens on average, {torch.get_num_threads()} threads\n")
    print(f"{'stage':<40} {'seconds':>8}  paid")
    for label, seconds, paid in rows:
        print(f"{label:<40} {seconds:8.2f}  {paid}")
    print(f"\nper checkpoint in a sweep: {per_checkpoint:.1f} s "
          f"(public UDS code: {PUBLIC_CODE_S_PER_CHECKPOINT:.0f} s, {PUBLIC_CODE_S_PER_CHECKPOINT / per_checkpoint:.1f}x)")
    if args.json:
        args.json.write_text(json.dumps({"rows": [{"stage": r[0], "seconds": round(r[1], 3), "paid": r[2]}
                                                  for r in rows],
                                         "per_checkpoint_s": round(per_checkpoint, 2)}, indent=2))


if __name__ == "__main__":
    main()
