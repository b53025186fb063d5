"""A sweep of LoRA adapters against the same sweep of their merged copies:
wall time and peak memory side by side.

N LoRA adapters (rank 8 on q_proj, v_proj and down_proj, random weights of
the size training gives them) over SmolLM2-135M-Instruct go through `pytest
suites/dusk suites/uds` in one serial session, as adapters (`--model
loraI=ADAPTER`: the base loads once and each adapter is applied to it and
taken off in turn) and, in another session, as the same adapters merged into
full checkpoints (`merge_and_unload()` saved: N full models to load). SmolLM2
is the full model and a noise-perturbed copy the retain model (as
`sweep_bench.py` runs them), on the zoo's DUSK and UDS data with short
generations; a fresh result cache per session, so both pay the reference
work. Peak RSS is the pytest process's own (getrusage of the waited-for child).

    python benchmarks/adapter_sweep_bench.py --sizes 1 4 8 [--json out.json]
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
from sweep_bench import MEASURE, save_copies  # noqa: E402  (one definition of the stand-in retain model)


def save_adapters(base: Path, target: Path, count: int) -> list[tuple[Path, Path]]:
    """(adapter, merged copy) pairs over `base`, built once."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = []
    for seed in range(count):
        adapter, merged = target / f"lora{seed}", target / f"lora{seed}-merged"
        if not (merged / "config.json").is_file():
            model = AutoModelForCausalLM.from_pretrained(str(base), dtype=torch.float32)
            torch.manual_seed(seed)
            config = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj", "down_proj"],
                                init_lora_weights=False)
            peft_model = get_peft_model(model, config)
            with torch.no_grad():
                for name, p in peft_model.named_parameters():
                    if "lora_" in name:
                        p.copy_(torch.randn_like(p) * 0.02)
            peft_model.save_pretrained(str(adapter))
            peft_model.merge_and_unload().save_pretrained(str(merged))
            AutoTokenizer.from_pretrained(str(base)).save_pretrained(str(merged))
        out.append((adapter, merged))
    return out


def session(models: list[str], full: Path, retain: Path, work: Path, label: str, batch_size: str) -> dict:
    from unlearnbench.fixtures import zoo

    command = [sys.executable, "-m", "pytest", "suites/dusk", "suites/uds", "-q", "-p", "no:cacheprovider",
               "--no-progress", *models, "--full-model", str(full), "--retain-model", str(retain),
               "--data-dir", str(zoo.data_dir()), "--suite-option", "dusk.qa_max_new_tokens=8",
               "--suite-option", "dusk.verbatim_max_new_tokens=16", "--suite-option", "uds.max_items=4",
               "--report-dir", str(work / "reports"), "--device", "cpu", "--batch-size", batch_size,
               "--cache-dir", str(work / f"cache-{label}-{time.time_ns()}")]
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", MEASURE, *command], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    seconds = time.perf_counter() - started
    peak_kb = int(next(line.split()[1] for line in done.stdout.splitlines() if line.startswith("MAXRSS_KB")))
    return {"wall_s": round(seconds, 1), "peak_rss_mib": round(peak_kb / 1024)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--work-dir", type=Path, default=Path(tempfile.gettempdir()) / "unlearnbench-adapter-bench")
    parser.add_argument("--batch-size", default="8",
                        help="pinned, so peak memory reflects the models held, not an auto batch sized from free memory")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    from unlearnbench.models.offline import smollm2_checkpoint

    full = smollm2_checkpoint()
    retain = save_copies(full, args.work_dir, 1)[0]
    pairs = save_adapters(full, args.work_dir, max(args.sizes))
    rows = []
    for n in args.sizes:
        row = {"checkpoints": n}
        for kind, index in (("adapters", 0), ("merged", 1)):
            models = [a for i, pair in enumerate(pairs[:n]) for a in ("--model", f"c{i}={pair[index]}")]
            row[kind] = session(models, full, retain, args.work_dir, f"{kind}-{n}", args.batch_size)
        rows.append(row)
        print(json.dumps(row), flush=True)
    print("\n| checkpoints | adapters: wall (s) | adapters: peak RSS (MiB) | merged: wall (s) | merged: peak RSS (MiB) |"
          "\n|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['checkpoints']} | {r['adapters']['wall_s']} | {r['adapters']['peak_rss_mib']} | "
              f"{r['merged']['wall_s']} | {r['merged']['peak_rss_mib']} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
