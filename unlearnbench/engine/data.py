"""Each suite's data, loaded once per process, and what every cache key of
the suite reads of it."""

from __future__ import annotations

from unlearnbench.cache import DiskCache, SuiteMemo, cache_key
from unlearnbench.contracts import SuiteData
from unlearnbench.options import BenchOptions
from unlearnbench.suites import SUITES
from unlearnbench.thresholds import Check


class SuiteDataStore:
    def __init__(self, options: BenchOptions, cache: DiskCache, gates: dict[str, dict[str, Check]]):
        self.options = options
        self.cache = cache
        self.gates = gates  # the run's gates: an open suite's metrics are those its gate names
        self._data: dict[str, SuiteData] = {}

    def data(self, suite: str) -> SuiteData:
        if suite not in self._data:
            SUITES[suite].check_functions()  # a wrong hook is one message now, not after the models load
            source = self.options.data_dirs.get(suite) or self.options.data_dirs.get("*")
            if source is None and not self.options.models and SUITES[suite].default_data == "zoo":
                from unlearnbench.fixtures import zoo

                source = str(zoo.data_dir(self.options.cache_dir))
            self._data[suite] = SUITES[suite].load_data(
                source, self.options.suite_options.get(suite, {}), self.metric_names(suite)
            )
        return self._data[suite]

    def metric_names(self, suite: str) -> tuple[str, ...]:
        """The suite's metrics: declared, or (an open suite) those its gate names."""
        spec = SUITES[suite]
        if spec.open_metrics:
            return tuple(dict.fromkeys(check.metric for check in self.gates.get(suite, {}).values()))
        return spec.metric_names

    def data_key(self, suite: str) -> dict:
        """What a suite's results depend on besides the models and the code:
        its data files, every parameter as resolved (defaults, the data
        folder's suite.json, --suite-option), and the options as given (for a
        third-party loader that does not report its parameters). The one place
        every cache key of a suite, results and reference work, takes them from."""
        data = self.data(suite)
        return {
            "files": data.fingerprint,
            "params": data.params or None,  # None: keys from before smoke had params
            "options": self.options.suite_options.get(suite, {}),
        }

    def memo(self, suite: str) -> SuiteMemo:
        """The disk memo of reference-model work for `suite` (metrics.core.ReferenceMemo)."""
        return SuiteMemo(self.cache, suite, cache_key(self.data_key(suite)), SUITES[suite].version)
