"""Wall time of the main job: `pytest suites` on the built-in zoo (every
suite, every zoo checkpoint), each repeat in a fresh process with an empty
result cache whose zoo is the machine's built one (the zoo is not retrained;
what is timed is the evaluation). Run it at two revisions to compare them.

    python benchmarks/zoo_run_bench.py [--repeats 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def one_run(zoo: Path) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "cache"
        cache.mkdir()
        (cache / "zoo").symlink_to(zoo, target_is_directory=True)
        start = time.perf_counter()
        result = subprocess.run([sys.executable, "-m", "pytest", "suites", "-q", "-p", "no:cacheprovider",
                                 "--no-progress", "--cache-dir", str(cache), "--report-dir", str(Path(tmp) / "reports")],
                                cwd=ROOT, capture_output=True, text=True)
        seconds = time.perf_counter() - start
        report = json.loads((Path(tmp) / "reports" / "latest" / "report.json").read_text())
    if result.returncode not in (0, 1):
        sys.exit(f"pytest suites ended with exit code {result.returncode}:\n{result.stdout[-2000:]}")
    per_suite: dict[str, float] = {}
    for checkpoint in report["checkpoints"].values():
        for suite, outcome in checkpoint["suites"].items():
            per_suite[suite] = per_suite.get(suite, 0.0) + outcome["timings"].get("evaluate_s", 0.0)
    return {"wall_s": round(seconds, 2), "evaluate_s_by_suite": {k: round(v, 2) for k, v in per_suite.items()}}


def main() -> None:
    from unlearnbench.cache import DEFAULT_CACHE_DIR
    from unlearnbench.fixtures import zoo

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    zoo.build_many(zoo.RECIPES, DEFAULT_CACHE_DIR)  # every zoo checkpoint, built once, outside the timing
    runs = [one_run(DEFAULT_CACHE_DIR / "zoo") for _ in range(args.repeats)]
    walls = [r["wall_s"] for r in runs]
    out = {"runs": runs, "median_wall_s": statistics.median(walls), "min_wall_s": min(walls)}
    print(f"pytest suites on the zoo, fresh result cache: median {out['median_wall_s']} s, "
          f"min {out['min_wall_s']} s over {len(walls)} runs ({', '.join(map(str, walls))})")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
