"""What the utility suite runs: the lm-eval tasks its gate names (a check's
metric is `<task>.<metric>`: `mmlu.acc`, `hellaswag.acc_norm`), plus any in
`--suite-option utility.tasks=a,b` (reported, not gated).

Options: `include_path` (a folder of the user's own lm-eval task YAMLs, as
lm-eval's `--include_path`), `limit` (the first N documents of each task; 0:
all), `num_fewshot` (-1: each task's own default). Tasks are looked up in
lm-eval's task index before any model loads: an unknown name is one line.
Datasets come from the local HF cache (HF_DATASETS_OFFLINE=1 keeps lm-eval
from downloading); a task whose dataset is not there fails its checks with
lm-eval's reason.

Without lm-evaluation-harness installed, the suite is unavailable with the
install command, and no model loads for it.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from unlearnbench.data.jsonl import COUNT_OR_ALL, Range, merge_params, params_digest
from unlearnbench.errors import DataError
from unlearnbench.suites.utility.task_index import known_tasks

DEFAULT_PARAMS = {"tasks": "", "include_path": "", "limit": 0, "num_fewshot": -1}
PARAM_RANGES = {"limit": COUNT_OR_ALL, "num_fewshot": Range(-1, meaning="-1 = the task's default")}
METRIC_NAME = re.compile(r"^(?P<task>[A-Za-z0-9][\w\-]*)\.(?P<metric>[A-Za-z][\w]*)$")
INSTALL = "lm-evaluation-harness is not installed: pip install 'unlearnbench[lmeval]'"


def metric_problem(name: str) -> str | None:
    """Why `name` cannot be a utility metric, or None (the gate's schema check)."""
    if METRIC_NAME.match(name):
        return None
    return "a utility metric is '<lm-eval task>.<metric>', e.g. 'mmlu.acc' or 'hellaswag.acc_norm'"


# lm-eval metrics scored 0 or 1 per document: their checks get the interval of a share.
BINARY_METRICS = ("acc", "acc_norm", "exact_match", "em")


def metric_kind(name: str) -> str:
    """A gated utility metric's kind (docs/verdicts.md): a share for accuracy-like lm-eval metrics, else unbounded."""
    found = METRIC_NAME.match(name)
    return "binary" if found and found["metric"] in BINARY_METRICS else "unbounded"


@dataclass(frozen=True)
class UtilityData:
    tasks: tuple[str, ...]  # every task to run, gated ones first
    gated: dict[str, tuple[str, str]]  # metric name -> (task, lm-eval metric)
    params: dict
    fingerprint: str
    source: str
    unavailable: str | None = None  # why the suite cannot run here (lm-eval missing): no model loads


def load(source: str | Path | None, options: dict | None, gated: tuple[str, ...]) -> UtilityData:
    where = str(source or "utility")
    params = merge_params(DEFAULT_PARAMS, [("--suite-option", options or {})], where, "utility", PARAM_RANGES)
    named = {name: (m["task"], m["metric"]) for name in gated if (m := METRIC_NAME.match(name))}
    extra = [t.strip() for t in params["tasks"].split(",") if t.strip()]
    tasks = tuple(dict.fromkeys([task for task, _ in named.values()] + extra))
    if not tasks:
        raise DataError(where, "no lm-eval task: the gate names none and --suite-option utility.tasks is empty")
    include = params["include_path"]
    if include and not Path(include).is_dir():
        raise DataError(include, "--suite-option utility.include_path: folder not found")
    identity = hashlib.sha256("\0".join(tasks).encode()).hexdigest()[:8]
    try:
        known = known_tasks(include)
    except ImportError:
        return UtilityData(tasks, named, params, f"{identity}-{params_digest(params)}", where, unavailable=INSTALL)
    for task in tasks:
        if task not in known:
            close = difflib.get_close_matches(task, sorted(known), n=3)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise DataError(where, f"unknown lm-eval task '{task}'{hint}")
    return UtilityData(tasks, named, params, f"{identity}-{_task_files_digest(include)}-{params_digest(params)}", where)


def _task_files_digest(include: str) -> str:
    """The user's task YAMLs and local data are part of what the results depend on."""
    if not include:
        return "builtin"
    digest = hashlib.sha256()
    for path in sorted(p for p in Path(include).rglob("*") if p.is_file()):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]
