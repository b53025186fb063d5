"""Utility: any lm-evaluation-harness task as a check that general ability is
kept. The suite's gate names the metrics (`<task>.<lm-eval metric>`, e.g.
`mmlu.acc`, `hellaswag.acc_norm`); lm-eval computes them through
unlearnbench's model interface, on every backend."""

from unlearnbench.suites import SuiteSpec

SPEC = SuiteSpec(
    name="utility",
    metrics=(),
    open_metrics="unlearnbench.suites.utility.data:metric_problem",
    open_kind="unlearnbench.suites.utility.data:metric_kind",
    loader="unlearnbench.suites.utility.data:load",
    evaluator="unlearnbench.suites.utility.metrics:evaluate",
    version=1,
    options=("tasks", "include_path", "limit", "num_fewshot"),
)
