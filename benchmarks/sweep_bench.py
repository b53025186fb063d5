"""Peak memory and wall time of a serial sweep against its length.

N noise-perturbed copies of SmolLM2-135M-Instruct (as `uds_bench.py` makes
them: there is no SmolLM2 retain model offline) go through `pytest suites/dusk
suites/uds` in one serial session, with SmolLM2 as the full model and another
perturbed copy as the retain model, on the zoo's (small) DUSK and UDS data
with short generations, and a fresh result cache. Each N runs in a fresh process; its peak RSS is the
pytest process's own (getrusage of the waited-for child). Flat peak memory
in N (within one model's size) is what bounded sweeps mean; time should grow
linearly.

    python benchmarks/sweep_bench.py --sizes 1 2 4 8 [--json out.json]
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
sys.path.insert(0, str(Path(__file__).resolve().parent))
from uds_bench import perturbed  # noqa: E402  (one definition of the stand-in models)

MEASURE = ("import resource, subprocess, sys; code = subprocess.run(sys.argv[1:]).returncode; "
           "print('MAXRSS_KB', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(0)")


def save_copies(source: Path, target: Path, count: int) -> list[Path]:
    """Perturbed copies of SmolLM2 saved as HF directories (built once)."""
    out = []
    for seed in range(count):
        directory = target / f"ckpt{seed}"
        if not (directory / "config.json").is_file():
            handle = perturbed(source, slice(4, 12), 0.02, seed=100 + seed)
            handle.model.save_pretrained(directory)
            handle.tokenizer.save_pretrained(directory)
        out.append(directory)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--work-dir", type=Path, default=Path(tempfile.gettempdir()) / "unlearnbench-sweep-bench")
    parser.add_argument("--batch-size", default="8",
                        help="pinned, so peak memory reflects the models held, not an auto batch sized from free memory")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    from unlearnbench.fixtures import zoo
    from unlearnbench.models.offline import smollm2_checkpoint

    full = smollm2_checkpoint()
    checkpoints = save_copies(full, args.work_dir, max(args.sizes) + 1)
    retain, candidates = checkpoints[0], checkpoints[1:]
    data = zoo.data_dir()
    rows = []
    for n in args.sizes:
        models = [a for i, path in enumerate(candidates[:n]) for a in ("--model", f"c{i}={path}")]
        command = [sys.executable, "-m", "pytest", "suites/dusk", "suites/uds", "-q", "-p", "no:cacheprovider",
                   "--no-progress", *models, "--full-model", str(full), "--retain-model", str(retain),
                   "--data-dir", str(data), "--suite-option", "dusk.qa_max_new_tokens=8",
                   "--suite-option", "dusk.verbatim_max_new_tokens=16", "--suite-option", "uds.max_items=4",
                   "--report-dir", str(args.work_dir / "reports"), "--device", "cpu", "--batch-size", args.batch_size,
                   # A fresh result cache per N: each run pays the reference work once, as a new sweep does.
                   "--cache-dir", str(args.work_dir / f"cache-{n}-{time.time_ns()}")]
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", MEASURE, *command], cwd=ROOT, capture_output=True, text=True,
                              env={**os.environ, "HF_HUB_OFFLINE": "1"})
        seconds = time.perf_counter() - started
        peak_kb = int(next(line.split()[1] for line in done.stdout.splitlines() if line.startswith("MAXRSS_KB")))
        rows.append({"checkpoints": n, "peak_rss_mib": round(peak_kb / 1024), "wall_s": round(seconds, 1),
                     "wall_s_per_checkpoint": round(seconds / n, 1)})
        print(json.dumps(rows[-1]), flush=True)
    print("\n| checkpoints | peak RSS (MiB) | wall (s) | s / checkpoint |\n|---|---|---|---|")
    for r in rows:
        print(f"| {r['checkpoints']} | {r['peak_rss_mib']} | {r['wall_s']} | {r['wall_s_per_checkpoint']} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
