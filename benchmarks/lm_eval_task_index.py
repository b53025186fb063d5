"""What a process pays before the utility suite evaluates anything: lm-eval's
own full TaskManager (every task file it ships parsed) against unlearnbench's
task index (the built-in index read from the cache, then a TaskManager over
the folders the run's tasks need). Each measurement runs in a new Python
process, as each xdist worker, Ray task and run does.

    python benchmarks/lm_eval_task_index.py [--tasks mmlu,hellaswag] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

LM_EVALS_OWN = "from lm_eval.tasks import TaskManager; TaskManager()"
OURS = ("from unlearnbench.suites.utility.task_index import known_tasks, task_manager; "
        "known_tasks(''); task_manager('', tuple({tasks!r}))")
TIMED = ("import time; import lm_eval.tasks; started = time.perf_counter(); {code}; "
         "print(time.perf_counter() - started)")


def seconds(code: str) -> float:
    out = subprocess.run([sys.executable, "-c", TIMED.format(code=code)], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", default="mmlu,hellaswag", help="the run's lm-eval tasks (default mmlu,hellaswag)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    tasks = [t for t in args.tasks.split(",") if t]
    seconds(OURS.format(tasks=tasks))  # the first process on this installation builds the index and keeps it
    for label, code in (("lm-eval's TaskManager()", LM_EVALS_OWN), ("unlearnbench's task index",
                                                                     OURS.format(tasks=tasks))):
        times = [seconds(code) for _ in range(args.repeat)]
        print(f"{label:28s} median {statistics.median(times):6.2f} s  (runs: {', '.join(f'{t:.2f}' for t in times)})")


if __name__ == "__main__":
    main()
