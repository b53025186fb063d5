"""The public contracts of unlearnbench: everything a suite from another
package is written against (docs/extending.md walks through one).

- `SuiteSpec` and `Metric` declare a suite; it is registered through the
  entry-point group `unlearnbench.suites`.
- Its functions follow `Loader` (or `OpenLoader`), `Evaluator` and, where it
  has them, `Preflight`, `ReportHook`, `ZooWriter`, `ProbeFunction`; its
  loader returns a `SuiteData`.
- An evaluator reads the model only through `LanguageModel` and returns a
  `MetricResult` (or an `Unavailable` with its reason) per declared metric;
  `mean_result` builds one from per-item values with its interval.
- `Probe` declares a forget-knowledge probe the robustness suite repeats on
  attacked copies of a model.

Names outside `__all__`, here and elsewhere in the package, may change
between releases.
"""

from unlearnbench.contracts import (
    ClusteredData,
    Evaluator,
    Loader,
    OpenLoader,
    OptionalData,
    Preflight,
    Probe,
    ProbeFunction,
    ReportHook,
    SuiteData,
    ZooWriter,
)
from unlearnbench.errors import DataError, UnlearnbenchError
from unlearnbench.metrics.core import MetricResult, References, Unavailable, mean_result
from unlearnbench.models.interface import LanguageModel, TokenScores
from unlearnbench.suites import Metric, SuiteSpec

__all__ = [
    "ClusteredData",
    "DataError",
    "Evaluator",
    "LanguageModel",
    "Loader",
    "Metric",
    "MetricResult",
    "OpenLoader",
    "OptionalData",
    "Preflight",
    "Probe",
    "ProbeFunction",
    "References",
    "ReportHook",
    "SuiteData",
    "SuiteSpec",
    "TokenScores",
    "Unavailable",
    "UnlearnbenchError",
    "ZooWriter",
    "mean_result",
]
