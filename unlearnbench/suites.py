"""The registry of suites: what each computes and where its code lives.

Loaders and evaluators are named as "module:function" strings and imported on
first use, so importing the registry (the plugin does) costs nothing.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class SuiteSpec:
    name: str
    metrics: tuple[str, ...]  # every metric name the evaluator returns
    loader: str  # (data_dir: Path | None) -> dataset with .fingerprint
    evaluator: str  # (handle, dataset, context) -> dict[str, MetricResult]
    version: int  # metric-code version: bump to invalidate cached results
    # What `pytest suites/<name>` evaluates when no --model is given: fixture
    # zoo recipes, and the zoo recipes that serve as reference models then.
    default_checkpoints: tuple[str, ...] = ()
    default_references: tuple[tuple[str, str], ...] = ()  # (role, zoo recipe)

    def load_data(self, data_dir) -> object:
        return _resolve(self.loader)(data_dir)

    @property
    def evaluate(self) -> Callable:
        return _resolve(self.evaluator)


def zoo_checkpoints(names) -> list:
    from unlearnbench.models.checkpoint import CheckpointSpec

    return [CheckpointSpec(name=n, source=f"zoo:{n}", zoo=n) for n in names]


def _resolve(target: str) -> Callable:
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


SUITES: dict[str, SuiteSpec] = {
    spec.name: spec
    for spec in (
        SuiteSpec(
            name="smoke",
            metrics=("mean_token_logprob", "qa_rougeL_recall"),
            loader="unlearnbench.data.smoke:load",
            evaluator="unlearnbench.metrics.smoke:evaluate",
            version=1,
            default_checkpoints=("smoke-lm", "smoke-untrained"),
        ),
    )
}
