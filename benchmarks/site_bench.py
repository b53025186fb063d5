"""Time `unlearnbench site` on a lab's worth of reports: R runs of a sweep of N
checkpoints each, made from a real run's report by unlearnbench.fixtures.sweeps
(the same names in every run: one row each, its runs listed).

    .venv/bin/python benchmarks/site_bench.py reports/latest/report.json --checkpoints 150 --runs 4

Prints the seconds `unlearnbench site` takes to read the reports and write the
site, its peak RSS, the reports' size, and the site's size (index.html, the checkpoint pages, the whole folder).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path)
    parser.add_argument("--checkpoints", type=int, default=150)
    parser.add_argument("--runs", type=int, default=4)
    args = parser.parse_args()
    from unlearnbench.fixtures.sweeps import clone_sweep

    source = json.loads(args.report.read_text())
    with tempfile.TemporaryDirectory() as folder:
        reports = Path(folder) / "reports"
        for r in range(args.runs):
            report = clone_sweep(source, args.checkpoints, seed=r)
            report["run"] = report["run"] | {"id": f"{report['run']['id']}-{r}",
                                             "started_at": f"2026-01-0{1 + r % 9}T00:00:00+00:00"}
            (reports / f"run{r}").mkdir(parents=True)
            (reports / f"run{r}" / "report.json").write_text(json.dumps(report))
        del report
        site = Path(folder) / "site"
        started = time.perf_counter()  # the command as a user runs it, in a process of its own
        subprocess.run([sys.executable, "-m", "unlearnbench.cli", "site", str(reports), "-o", str(site)], check=True,
                       stdout=subprocess.DEVNULL)
        seconds = time.perf_counter() - started
        board = json.loads((site / "leaderboard.json").read_text())
        pages = list((site / "checkpoints").glob("*.html"))
        total = sum(p.stat().st_size for p in site.rglob("*") if p.is_file())
        rows = sum(len(g["rows"]) for g in board["groups"])
        inputs = sum(p.stat().st_size for p in reports.rglob("report.json"))
        print(f"{args.runs} runs x {args.checkpoints} checkpoints ({inputs / 2**20:.0f} MiB of reports) -> {rows} "
              f"rows: site written in {seconds:.2f} s, "
              f"peak RSS {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024:.0f} MiB; index.html "
              f"{(site / 'index.html').stat().st_size / 2**20:.2f} MiB, {len(pages)} checkpoint pages "
              f"{sum(p.stat().st_size for p in pages) / 2**20:.1f} MiB, whole site {total / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
