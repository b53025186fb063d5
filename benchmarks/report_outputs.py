"""Time the report writer on a sweep: report.json, report.html, report.md and
results.csv/jsonl for N checkpoints, made from a real run's report by
unlearnbench.fixtures.sweeps (as tests/e2e/test_html_browser.py does).

    .venv/bin/python benchmarks/report_outputs.py reports/latest/report.json --checkpoints 150

Prints the seconds to write every output (verdicts and ranking included) and
each file's size; run it on an older checkout (PYTHONPATH) for a before/after.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path)
    parser.add_argument("--checkpoints", type=int, default=150)
    args = parser.parse_args()
    from unlearnbench.fixtures.sweeps import clone_sweep
    from unlearnbench.report.schema import write_outputs

    report = clone_sweep(json.loads(args.report.read_text()), args.checkpoints)
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        written = write_outputs(report, Path(folder) / "run")
        seconds = time.perf_counter() - started
        files = written if isinstance(written, tuple) else (written,)
        sizes = ", ".join(f"{Path(p).name} {Path(p).stat().st_size / 2**20:.1f} MiB" for p in files)
    print(f"{len(report['checkpoints'])} checkpoints: every output written in {seconds:.2f} s ({sizes})")


if __name__ == "__main__":
    main()
