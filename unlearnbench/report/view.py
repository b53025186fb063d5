"""What a suite's report hooks read of a report: its checkpoints in the
report's one order, their metric values and the gate's bounds. A suite's
`plots` hook (its spec) receives one `SuiteView` and returns SVG figures."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SuiteView:
    suite: str
    report: dict
    names: tuple[str, ...]  # the checkpoints that ran the suite, in the report's order
    anchors: dict[str, str]  # checkpoint -> its reference role (full, retain): drawn apart, never ranked

    def metric(self, name: str, metric: str) -> dict:
        """The metric's record (value, ci, details, ...) on checkpoint `name`; {} if absent."""
        return self.report["checkpoints"][name]["suites"].get(self.suite, {}).get("metrics", {}).get(metric) or {}

    def value(self, name: str, metric: str) -> float | None:
        return self.metric(name, metric).get("value")

    def bound(self, metric: str) -> float | None:
        """The gate bound on `metric` (the same for every checkpoint: absolute, or from the retain model)."""
        for checkpoint in self.report["checkpoints"].values():
            for verdict in checkpoint["suites"].get(self.suite, {}).get("checks", {}).values():
                if verdict.get("metric") == metric and verdict.get("bound") is not None:
                    return verdict["bound"]
        return None

    def bounds(self, pairs) -> dict[str, float]:
        """{label: bound} for the (label, metric) pairs whose metric has one."""
        return {label: b for label, metric in pairs if (b := self.bound(metric)) is not None}


def suite_views(report: dict) -> dict[str, SuiteView]:
    """One view per suite of the report, in the matrix's suite order."""
    from unlearnbench.report.verdicts import assess

    assessment = report.get("assessment") or assess(report)
    order = assessment["order"]
    anchors = {n: v["role"] for n, v in assessment["verdicts"].items() if v["role"]}
    suites = dict.fromkeys(s for n in order for s in report["checkpoints"][n]["suites"])
    return {
        suite: SuiteView(suite, report, tuple(n for n in order if suite in report["checkpoints"][n]["suites"]), anchors)
        for suite in suites
    }
