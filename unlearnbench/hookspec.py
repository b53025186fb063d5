"""Hooks a project's `conftest.py` (or a plugin) can implement to extend
what unlearnbench reports, in pytest's way (`pytest_addhooks` registers them):

    def pytest_unlearnbench_plots(suite, view):
        if suite == "dusk":
            return [my_svg_figure(view)]

    def pytest_unlearnbench_report(report, files):
        upload(files.json)
"""

from __future__ import annotations

import pluggy

hookspec = pluggy.HookspecMarker("pytest")


@hookspec
def pytest_unlearnbench_plots(suite: str, view) -> list[str] | None:
    """Extra figures for `suite`'s section of the HTML report: SVG (or any
    HTML) strings, after the suite's own. `view` is a report.view.SuiteView:
    the suite's checkpoints in the report's order, their metric values and
    the gate's bounds. Every implementation's figures are shown."""


@hookspec
def pytest_unlearnbench_report(report: dict, files) -> None:
    """The run's report was written (the controller, or the only process):
    `report` is report.json's content, `files` the paths of every output
    (report.schema.ReportFiles: json, html, markdown, csv, jsonl)."""
