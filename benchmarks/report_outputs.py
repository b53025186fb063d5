"""Time the report writer on a sweep: report.json, report.html, report.md and
results.csv/jsonl for N checkpoints, made from a real run's report by copying
its candidates with jittered values (as tests/test_html_browser.py does).

    .venv/bin/python benchmarks/report_outputs.py reports/latest/report.json --checkpoints 150

Prints the seconds to write every output (verdicts and ranking included) and
each file's size; run it on an older checkout (PYTHONPATH) for a before/after.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import tempfile
import time
from pathlib import Path


def sweep(report: dict, n: int) -> dict:
    report = copy.deepcopy(report)
    report.pop("assessment", None)
    report.pop("leaderboard", None)
    anchors = (report["run"].get("anchors") or {})
    rng = random.Random(0)
    sources = [c for c in report["checkpoints"] if c not in anchors and not c.startswith("smoke")]
    for k in range(n - len(report["checkpoints"])):
        source = sources[k % len(sources)]
        clone = copy.deepcopy(report["checkpoints"][source])
        for suite in clone["suites"].values():
            for metric in suite["metrics"].values():
                if isinstance(metric.get("value"), float) and 0 <= metric["value"] <= 1:
                    metric["value"] = min(1.0, max(0.0, metric["value"] + rng.uniform(-0.1, 0.1)))
        report["checkpoints"][f"{source}-run{k}"] = clone
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path)
    parser.add_argument("--checkpoints", type=int, default=150)
    args = parser.parse_args()
    from unlearnbench.report.schema import write_outputs

    report = sweep(json.loads(args.report.read_text()), args.checkpoints)
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        written = write_outputs(report, Path(folder) / "run")
        seconds = time.perf_counter() - started
        files = written if isinstance(written, tuple) else (written,)
        sizes = ", ".join(f"{Path(p).name} {Path(p).stat().st_size / 2**20:.1f} MiB" for p in files)
    print(f"{len(report['checkpoints'])} checkpoints: every output written in {seconds:.2f} s ({sizes})")


if __name__ == "__main__":
    main()
