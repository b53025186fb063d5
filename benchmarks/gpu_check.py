"""One check for a CUDA machine: every suite on SmolLM2-135M-Instruct in
float32 and bfloat16, float32 values checked against this commit's CPU values,
per-suite times and peak GPU memory. Run through benchmarks/gpu_check.sh:

    bash benchmarks/gpu_check.sh                               # a CUDA machine: every suite, float32 and bfloat16
    bash benchmarks/gpu_check.sh --device cpu --write          # here: this commit's CPU values -> the JSON
    bash benchmarks/gpu_check.sh --device cpu --suites smoke   # the tests: a subset, checked against the JSON

Each dtype is one `pytest suites/...` run (a fresh result cache, so every
suite really runs) with SmolLM2 as the checkpoint and the full model, a
noise-perturbed copy of it (sd 0.01, seed 3) as the retain model, and the
fixture zoo's data for every suite (its items are synthetic, which is all a
check of equal values and of speed needs). `utility` (lm-eval tasks) and
`robustness` (quantization and relearning attacks) are left out: neither
runs on the zoo's data. Exit status 1 when a float32 value differs from the
CPU value by more than --tolerance (default 1e-4), naming it.
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
SUITES = ("smoke", "dusk", "honesty", "conceptguard", "tofu", "muse", "wmdp", "uds", "elicitation")
CANDIDATE = "smollm2"
REFERENCE_VALUES = ROOT / "benchmarks" / "gpu_check_cpu.json"
PEAK_PLUGIN = '''
import json
import os

import pytest

PEAKS = pytest.StashKey[dict]()


def pytest_runtest_teardown(item):
    import torch

    if not torch.cuda.is_available():
        return
    suite = item.path.parent.name
    peaks = item.config.stash.setdefault(PEAKS, {})
    peaks[suite] = max(peaks.get(suite, 0), torch.cuda.max_memory_allocated())
    torch.cuda.reset_peak_memory_stats()


def pytest_sessionfinish(session):
    with open(os.environ["GPU_CHECK_PEAKS"], "w") as out:
        json.dump(session.config.stash.get(PEAKS, {}), out)
'''


def models(cache_dir: Path | None) -> tuple[Path, Path, Path]:
    """(SmolLM2 as an HF folder, its noise-perturbed copy, the zoo's data folder)."""
    from unlearnbench.fixtures import zoo
    from unlearnbench.fixtures.perturb import noisy_copy
    from unlearnbench.models.offline import smollm2_checkpoint

    smollm2 = smollm2_checkpoint(cache_dir)
    return smollm2, noisy_copy(smollm2, 0.01, 3), zoo.data_dir(cache_dir)


def run_suites(suites: list[str], dtype: str, device: str, work: Path, cache_dir: Path | None) -> dict:
    """One pytest run of `suites` in `dtype`: {suite: {seconds, peak_mib, values: {metric: value}}}."""
    from unlearnbench.suites import SUITES as SPECS

    smollm2, retain, data = models(cache_dir)
    on_zoo_data = {s: SPECS[s].default_data == "zoo" for s in suites}
    folder = work / dtype
    (folder / "plugin").mkdir(parents=True, exist_ok=True)
    (folder / "plugin" / "gpu_check_peaks.py").write_text(PEAK_PLUGIN)
    env = {**os.environ, "GPU_CHECK_PEAKS": str(folder / "peaks.json"),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(folder / "plugin"), os.environ.get("PYTHONPATH")]))}
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "pytest", *(f"suites/{s}" for s in suites), f"--model={CANDIDATE}={smollm2}",
         f"--full-model={smollm2}", f"--retain-model={retain}", f"--device={device}",
         *(f"--data-dir={s}={data}" for s in suites if on_zoo_data[s]),  # smoke has data of its own
         f"--dtype={dtype}", f"--cache-dir={folder / 'cache'}", f"--report-dir={folder / 'reports'}",
         "-p", "gpu_check_peaks", "-p", "no:cacheprovider", "-q", "--no-progress"],
        cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    report_file = folder / "reports" / "latest" / "report.json"
    if result.returncode not in (0, 1) or not report_file.is_file():  # 1: a gate failed, which is not this check's
        sys.exit(f"gpu_check: pytest ({dtype}) ended with exit status {result.returncode}:\n"
                 f"{result.stdout[-3000:]}{result.stderr[-3000:]}")
    report = json.loads(report_file.read_text())
    peaks = json.loads((folder / "peaks.json").read_text()) if (folder / "peaks.json").is_file() else {}
    out = {"wall_s": wall}
    for suite in suites:
        seconds = sum(c["suites"][suite]["timings"].get("evaluate_s", 0.0) for c in report["checkpoints"].values()
                      if suite in c["suites"])
        metrics = report["checkpoints"][CANDIDATE]["suites"].get(suite, {}).get("metrics", {})
        out[suite] = {"seconds": seconds, "peak_mib": peaks[suite] / 2**20 if suite in peaks else None,
                      "values": {m: v.get("value") for m, v in metrics.items() if isinstance(v.get("value"), float)}}
    return out


def differences(values: dict, reference: dict, tolerance: float) -> tuple[float, list[str]]:
    """(largest |difference| over the metrics both have, the metrics beyond `tolerance` with both values)."""
    worst, beyond = 0.0, []
    for metric in sorted(set(values) & set(reference)):
        if reference[metric] is None or values[metric] is None:
            continue
        diff = abs(values[metric] - reference[metric])
        worst = max(worst, diff)
        if diff > tolerance:
            beyond.append(f"{metric} {values[metric]:.6g} vs {reference[metric]:.6g}")
    return worst, beyond


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    parser.add_argument("--suites", nargs="+", default=list(SUITES), choices=SUITES, metavar="SUITE")
    parser.add_argument("--dtypes", nargs="+", default=None,
                        help="default: float32 bfloat16 on cuda, float32 on cpu")
    parser.add_argument("--reference", type=Path, default=REFERENCE_VALUES, help="the CPU values (JSON)")
    parser.add_argument("--write", action="store_true", help="write the float32 values as the CPU values")
    parser.add_argument("--tolerance", type=float, default=1e-4)
    parser.add_argument("--cache-dir", type=Path, default=None, help="where SmolLM2 and the zoo data are kept")
    args = parser.parse_args()
    dtypes = args.dtypes or (["float32", "bfloat16"] if args.device.startswith("cuda") else ["float32"])
    if "float32" not in dtypes:
        parser.error("--dtypes must include float32 (the values checked against the CPU's)")
    if args.write and not args.device.startswith("cpu"):
        parser.error("--write records the CPU values: run it with --device cpu")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as work:
        runs = {dtype: run_suites(args.suites, dtype, args.device, Path(work), args.cache_dir) for dtype in dtypes}
    fp32 = runs["float32"]
    if args.write:
        import torch

        recorded = json.loads(args.reference.read_text()) if args.reference.is_file() else {"values": {}}
        recorded["values"].update({s: fp32[s]["values"] for s in args.suites})
        recorded |= {"device": "cpu", "torch": torch.__version__,
                     "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                              text=True).stdout.strip()}
        args.reference.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
        print(f"gpu_check: wrote the CPU values of {', '.join(args.suites)} to {args.reference}")
    reference = json.loads(args.reference.read_text())["values"] if args.reference.is_file() else {}
    failures = []
    head = f"{'suite':<13}" + "".join(f"{d + ' s':>12}{'peak MiB':>10}" for d in dtypes)
    head += f"{'fp32 vs CPU':>14}" + (f"{'bf16 vs fp32':>14}" if "bfloat16" in runs else "")
    print(f"device {args.device}, SmolLM2-135M-Instruct, {len(args.suites)} suites\n{head}")
    for suite in args.suites:
        line = f"{suite:<13}"
        for dtype in dtypes:
            peak = runs[dtype][suite]["peak_mib"]
            line += f"{runs[dtype][suite]['seconds']:>12.1f}{'-' if peak is None else f'{peak:.0f}':>10}"
        if suite in reference:
            worst, beyond = differences(fp32[suite]["values"], reference[suite], args.tolerance)
            line += f"{worst:>14.2e}"
            failures += [f"{suite}.{b}" for b in beyond]
        else:
            line += f"{'no CPU values':>14}"
            failures.append(f"{suite}: no CPU values in {args.reference}")
        if "bfloat16" in runs:
            line += f"{differences(runs['bfloat16'][suite]['values'], fp32[suite]['values'], 0.0)[0]:>14.2e}"
        print(line)
    print(f"total {time.perf_counter() - started:.0f} s (runs: "
          + ", ".join(f"{d} {runs[d]['wall_s']:.0f} s" for d in dtypes) + ")")
    if failures:
        print(f"gpu_check: float32 differs from the CPU values by more than {args.tolerance:g}: " + "; ".join(failures))
        return 1
    print(f"gpu_check: float32 values equal the CPU values to {args.tolerance:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
