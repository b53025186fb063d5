"""lm-eval tasks on the model under test, through the `LM` adapter
(lm_adapter.py): every gated `<task>.<metric>` becomes a result with lm-eval's
value, its standard error as the CI (value ± 1.96 stderr), n, and per-item
values where lm-eval logs them per document (a group task, such as `mmlu`,
collects its subtasks' documents)."""

from __future__ import annotations

import math

from unlearnbench.metrics.core import MetricResult, References, Unavailable
from unlearnbench.models.interface import LanguageModel
from unlearnbench.suites.utility.data import UtilityData
from unlearnbench.suites.utility.task_index import task_manager

Z95 = 1.959964


def evaluate(
    model: LanguageModel, data: UtilityData, refs: References | None = None
) -> dict[str, MetricResult | Unavailable]:
    from lm_eval import simple_evaluate

    from unlearnbench.suites.utility.lm_adapter import UnlearnbenchLM

    params = data.params
    output = simple_evaluate(
        model=UnlearnbenchLM(model),
        tasks=list(data.tasks),
        task_manager=task_manager(params["include_path"], data.tasks),
        limit=params["limit"] or None,
        num_fewshot=None if params["num_fewshot"] < 0 else params["num_fewshot"],
        log_samples=True,
        bootstrap_iters=1000,
    )
    return {name: result(name, task, metric, output, params) for name, (task, metric) in data.gated.items()}


def result(name: str, task: str, metric: str, output: dict, params: dict) -> MetricResult | Unavailable:
    values = output["results"].get(task, {})
    key = f"{metric},none"
    if key not in values:
        reported = sorted(k.split(",")[0] for k in values if "," in k and "_stderr" not in k)
        return Unavailable(name, f"lm-eval's {task} reports no '{metric}' (it reports: {', '.join(reported)})")
    value = float(values[key])
    stderr = values.get(f"{metric}_stderr,none")
    stderr = float(stderr) if isinstance(stderr, (int, float)) and math.isfinite(stderr) else None
    per_item = {
        f"{leaf}-{s['doc_id']}": float(s[metric])
        for leaf in _leaves(task, output)
        for s in output.get("samples", {}).get(leaf, [])
        if isinstance(s.get(metric), (int, float))
    }
    n = len(per_item) or sum(
        output.get("n-samples", {}).get(leaf, {}).get("effective", 0) for leaf in _leaves(task, output)
    )
    ci = (value - Z95 * stderr, value + Z95 * stderr) if stderr is not None else (value, value)
    better = output.get("higher_is_better", {}).get(task, {}).get(metric, True)
    return MetricResult(
        name=name,
        value=value,
        n=n,
        ci=ci,
        higher_is_better=bool(better),
        params={
            "task": task,
            "metric": metric,
            "limit": params["limit"],
            "num_fewshot": params["num_fewshot"],
            "stderr": stderr,
            "ci": "value ± 1.96 × lm-eval's stderr" if stderr is not None else "none reported",
            "lm_eval_version": output.get("lm_eval_version"),
        },
        per_item=per_item,
    )


def _leaves(task: str, output: dict) -> list[str]:
    """The task's own documents' tasks: itself, or a group's subtasks, recursively."""
    groups = output.get("group_subtasks", {})
    if task not in groups or not groups[task]:
        return [task]
    return [leaf for sub in groups[task] for leaf in _leaves(sub, output)]
