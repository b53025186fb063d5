"""The plugin's per-process state (`RunState`): the `Bench`, the records
tests send, the report and what xdist and Ctrl-C need; and the report's
run header (command, options, anchors)."""

from __future__ import annotations

import json
import os
import secrets
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from unlearnbench.collect import MARKER, checkpoint_spec_of, is_suite_module
from unlearnbench.records import SentOnce

if TYPE_CHECKING:
    from unlearnbench.options import BenchOptions, RunOptions
    from unlearnbench.report.schema import ReportFiles
    from unlearnbench.session import Bench

RECORD_KEY = "unlearnbench"  # the user_properties key that carries a test's record
STATE = pytest.StashKey["RunState"]()
INTERRUPT_FILE_KEY = "unlearnbench_interrupt_file"  # workerinput: the file the controller's Ctrl-C creates
INTERRUPT_MESSAGE = (
    "interrupted: the running evaluation stops at its next step, the checks not yet evaluated fail "
    "as interrupted, and the report of what finished is written (Ctrl-C again to exit at once, "
    "without a report)"
)


def check_report_dir(base: Path, what: str) -> None:
    """`base` is (or can be made) a folder this process can write in: found
    at the start, not after the evaluation."""
    import tempfile

    from unlearnbench.errors import UnlearnbenchError

    try:
        base.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=base, prefix=".write-test-"):
            pass
    except OSError as exc:
        raise UnlearnbenchError(
            f"{what} {base}: reports cannot be written there "
            f"({exc.strerror or type(exc).__name__}{': ' + exc.filename if exc.filename else ''})"
        ) from None


class RunState:
    """Per-process plugin state; the `Bench` is created only when a suite is collected.

    Registered as a plugin object: its `pytest_*` methods are the run-time
    hooks (records, xdist, the report), which reach the state without globals."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.bench: Bench | None = None
        self.sent = SentOnce()  # what this process's tests have sent to the report (records.py)
        self.report: dict | None = None
        self.report_files: ReportFiles | None = None  # once written
        self.startup_error: str | None = None
        self.cache_stats: dict[str, int] = {}
        self.started = time.time()
        self.baseline: dict | None = None
        self.interrupt_file: Path | None = None  # xdist controller: created by its Ctrl-C (pytest_configure_node)
        self.controller_handles_interrupts = False
        # Read from the command line once, by plugin._validate_inputs, right after this object is made.
        self.options: BenchOptions
        self.run_options: RunOptions

    @property
    def is_worker(self) -> bool:
        return hasattr(self.config, "workerinput")

    def checkpoints(self, suite: str) -> list:
        """--model entries, or the suite's default fixture-zoo checkpoints."""
        from unlearnbench.suites import SUITES, sweep_checkpoints

        if suite not in SUITES:
            raise pytest.UsageError(f"unknown suite '{suite}' (known: {', '.join(SUITES)})")
        return sweep_checkpoints(suite, list(self.options.models), self.options.shard, self.options.zoo_extra)

    def start(self, suites: list[str], thresholds_files: dict[str, Path]) -> None:
        """Validate everything a run needs, cheaply, before any model is loaded."""
        from unlearnbench.errors import UnlearnbenchError
        from unlearnbench.session import Bench

        try:
            self.load_baseline()
            from unlearnbench import cancel, progress

            reporter = self.config.pluginmanager.get_plugin("terminalreporter")
            writer = getattr(reporter, "_tw", None)  # pytest's TerminalWriter: is its line (the dots) open?
            progress.enable(self.run_options.progress, line_width=lambda: getattr(writer, "width_of_current_line", 0))
            cancel.install_sigint_handler(INTERRUPT_MESSAGE)
            if not self.is_worker:
                check_report_dir(self.run_options.report_dir, "report folder")
            bench = Bench(self.options)
            bench.validate_checkpoints()
            bench.prepare_suites(suites, thresholds_files, build_zoo=not self.config.option.collectonly)
        except (UnlearnbenchError, pytest.UsageError) as exc:
            if not self.is_worker:
                raise pytest.UsageError(str(exc)) from None
            # A worker cannot stop the run cleanly from here (xdist reports an
            # internal error); its suite tests fail in setup with the message.
            self.startup_error = str(exc)
            return
        self.bench = bench

    def load_baseline(self) -> None:
        from unlearnbench.errors import UnlearnbenchError
        from unlearnbench.report.schema import load_report

        if self.run_options.baseline is not None:
            try:
                self.baseline = load_report(self.run_options.baseline)
            except ValueError as exc:
                raise UnlearnbenchError(f"--baseline {exc}") from None

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Under xdist the controller collects nothing, so it checks the
        checkpoints itself before starting workers (cheap: files and headers)."""
        if self.is_worker or getattr(self.config.option, "dist", "no") == "no":
            return
        if not (self.options.models or self.options.full or self.options.retain):
            return
        from unlearnbench.errors import UnlearnbenchError
        from unlearnbench.session import Bench

        try:
            Bench(self.options).validate_checkpoints()
        except UnlearnbenchError as exc:
            raise pytest.UsageError(str(exc)) from None

    def pytest_runtest_teardown(self, item: pytest.Item, nextitem: pytest.Item | None) -> None:
        """After a checkpoint's last test (items run checkpoint-major; under
        xdist a worker receives a checkpoint's tests together, so `nextitem` is
        the same test order), free its model."""
        current = checkpoint_spec_of(item)
        if self.bench is not None and current is not None and checkpoint_spec_of(nextitem) != current:
            self.bench.release(current)

    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if self.startup_error and item.get_closest_marker(MARKER):
            pytest.fail(self.startup_error, pytrace=False)

    # Runtime hooks: methods of the registered state object, so they reach it
    # without globals.
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Collect records on the controller (xdist) or the only process."""
        if self.is_worker or report.when != "call":
            return
        records = [json.loads(str(value)) for key, value in report.user_properties if key == RECORD_KEY]
        if not records:
            return
        from unlearnbench.report.schema import add_record

        if self.report is None:  # under xdist the controller collects nothing: start on the first record
            self.report = new_report_for(self.config, self.options)
        for record in records:
            add_record(self.report, record)

    def pytest_runtest_logstart(self, nodeid: str, location) -> None:
        """xdist controller: once a suite test starts, Ctrl-C waits for the
        workers (which stop as interrupted) and writes the report, rather than
        dropping what they still send. Other runs keep pytest's Ctrl-C."""
        if self.is_worker or self.controller_handles_interrupts or getattr(self.config.option, "dist", "no") == "no":
            return
        if is_suite_module(Path(self.config.rootpath) / nodeid.split("::")[0]):  # location: where a check's code is
            from unlearnbench import cancel

            cancel.install_sigint_handler(INTERRUPT_MESSAGE)
            self.controller_handles_interrupts = True

    @pytest.hookimpl(optionalhook=True, tryfirst=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log):
        if config.getvalue("dist") != "loadgroup":
            return None
        from unlearnbench.scheduling import CheckpointScheduling
        from unlearnbench.suites import run_order

        return CheckpointScheduling(
            config, log, run_order([s.name for s in self.options.models], self.options.zoo_extra)
        )

    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem: str, report, sched) -> None:
        """xdist controller: a worker died running `crashitem`. The scheduler
        dropped the rest of that checkpoint's tests (they would only kill the
        next worker too); they are reported failed here, and the report names
        the lost checkpoint."""
        from unlearnbench.report.schema import add_lost

        lost = getattr(sched, "lost", {}).get(crashitem)
        if lost is None:
            return
        name, tests = lost
        reason = str(report.longrepr)
        for nodeid in tests:
            if nodeid != crashitem:
                self.config.hook.pytest_runtest_logreport(
                    report=pytest.TestReport(
                        nodeid=nodeid,
                        location=(nodeid.split("::")[0], None, nodeid),
                        keywords={},
                        outcome="failed",
                        longrepr=f"checkpoint {name} lost: {reason}; its other tests were not run",
                        when="call",
                    )
                )
        if self.report is None:
            self.report = new_report_for(self.config, self.options)
        add_lost(self.report, name, reason, tests)

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node) -> None:
        """xdist controller: workers do not receive Ctrl-C; the controller's
        creates this file, which each worker's long work watches (cancel.py)."""
        from unlearnbench import cancel

        if self.interrupt_file is None:
            import tempfile

            self.interrupt_file = (
                Path(tempfile.gettempdir()) / f"unlearnbench-interrupt-{os.getpid()}-{secrets.token_hex(4)}"
            )
            cancel.share_through(self.interrupt_file)
        node.workerinput[INTERRUPT_FILE_KEY] = str(self.interrupt_file)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error) -> None:
        """xdist controller: add a finished worker's cache counters."""
        self._add_cache_stats(getattr(node, "workeroutput", {}).get("unlearnbench_cache"))

    def _add_cache_stats(self, stats: dict | None) -> None:
        for key, value in (stats or {}).items():
            self.cache_stats[key] = self.cache_stats.get(key, 0) + value

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        from unlearnbench import cancel

        # The first Ctrl-C: ours (cancel.py); under xdist the controller gets
        # pytest's own KeyboardInterrupt while its workers stop as ours.
        interrupted = cancel.interrupted() or exitstatus == pytest.ExitCode.INTERRUPTED
        if interrupted:
            session.exitstatus = exitstatus = pytest.ExitCode.INTERRUPTED
        stats = self.bench.cache.stats.as_dict() if self.bench else None
        if self.is_worker:
            self.config.workeroutput["unlearnbench_cache"] = stats  # type: ignore[attr-defined]  # set by xdist
            return
        self._add_cache_stats(stats)
        if self.interrupt_file is not None:
            self.interrupt_file.unlink(missing_ok=True)
        if self.report is None or not self.report["checkpoints"]:
            return
        from unlearnbench.report.schema import write_outputs

        run = self.report["run"]
        run["finished_at"] = now()
        run["duration_s"] = round(time.time() - self.started, 3)
        run["exit_status"] = int(exitstatus)
        run["interrupted"] = interrupted
        run["cache"] = dict(self.cache_stats)
        self.report_files = write_outputs(
            self.report, Path(run["directory"]), extra_figures=lambda report: extra_figures(self.config, report)
        )
        self.config.hook.pytest_unlearnbench_report(report=self.report, files=self.report_files)

    def pytest_terminal_summary(self, terminalreporter) -> None:
        """The checks that did not pass, per checkpoint (every check with -v);
        the verdicts, ranking and report paths come last (`pytest_unconfigure`)."""
        if self.report_files is None or self.report is None:
            return
        from unlearnbench.report.text import attention_lines, check_lines

        terminalreporter.section("unlearnbench")
        for line in check_lines(self.report, everything=self.run_options.verbose):
            terminalreporter.write_line(line)
        for line in attention_lines(self.report):
            terminalreporter.write_line(line, yellow=True)
        for row in self.report.get("regressions", []):
            terminalreporter.write_line(
                f"REGRESSION {row['checkpoint']} {row['suite']}.{row['metric']}: {row['value']:.4g} vs baseline "
                f"{row['baseline']:.4g} (worse by {row['worse_by']:.4g} > {row['allowed']:.4g})"
            )

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        """After pytest's own summary (its FAILED lines and counts): the
        answer, so that it is what a reader sees last."""
        if self.report_files is None or self.report is None or self.is_worker:
            return
        from unlearnbench.report.text import evidence_line, path_lines, ranking_lines, suite_notes, verdict_lines

        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return
        write = reporter.write_line
        reporter.write_sep("=", "unlearnbench verdicts")
        if self.report["run"].get("interrupted"):
            write(
                "INTERRUPTED (Ctrl-C): the report holds what finished; checks not evaluated failed as interrupted",
                red=True,
                bold=True,
            )
        for line in verdict_lines(self.report):
            write(line, red=" FAIL" in line[:80], green=" PASS" in line[:80])
        for line in suite_notes(self.report):
            write(line)
        write("")
        write(evidence_line(self.report))
        write("")
        write(self.report["assessment"]["ranking"]["rule"])
        for line in ranking_lines(self.report):
            write(("  " + line).rstrip())  # a series table is set off by an empty line
        write("")
        for line in path_lines(self.report_files):
            write(line, bold=line.startswith("HTML"))


def extra_figures(config: pytest.Config, report: dict) -> dict[str, list[str]]:
    """Figures `conftest.py` files add to a suite's section of the HTML report
    (`pytest_unlearnbench_plots`, hookspec.py)."""
    from unlearnbench.report.view import suite_views

    out = {}
    for suite, view in suite_views(report).items():
        figures = [f for result in config.hook.pytest_unlearnbench_plots(suite=suite, view=view) for f in result]
        if figures:
            out[suite] = figures
    return out


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def new_report_for(config: pytest.Config, options) -> dict:
    """The run's report skeleton (report/schema.py) from the command line."""
    from unlearnbench.report.schema import new_report

    run_id = datetime.now().strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)
    base = config.stash[STATE].run_options.report_dir
    return new_report(
        {
            "id": run_id,
            "directory": str((base / run_id).resolve()),
            "started_at": now(),
            "command": [program(), *config.invocation_params.args],
            "cwd": os.getcwd(),
            "options": {
                "models": [{"name": s.name, "source": s.source} for s in options.models],
                "full_model": options.full.source if options.full else None,
                "retain_model": options.retain.source if options.retain else None,
                "thresholds": str(options.thresholds_override) if options.thresholds_override else None,
                "device": options.device,
                "device_map": options.device_map,
                "dtype": options.dtype,
                "batch_size": options.batch_size or "auto",
                "memory_budget": options.memory_budget or "auto",
                "data_dirs": dict(options.data_dirs),
                "suite_options": options.suite_options,
                "cache_signed": options.cache_secret is not None,
            },
            "seed": options.seed,
            "decision": options.rule.to_dict() | {"text": options.rule.describe()},
            "anchors": anchors(options),
        }
    )


def program() -> str:
    """How the run was started: `pytest`, or `python -m pytest` (argv[0] is then pytest's __main__.py)."""
    name = Path(sys.argv[0]).name
    return "python -m pytest" if name == "__main__.py" else name


def anchors(options) -> dict[str, str]:
    """{checkpoint name: role} for the checkpoints that are the run's reference
    models: on the default zoo, the suites' zoo references; else the --model
    entries with the same source as --full-model / --retain-model."""
    from unlearnbench.engine.roster import REFERENCE_ROLES
    from unlearnbench.suites import SUITES

    if not options.models:
        return {recipe: role for spec in SUITES.values() for role, recipe in spec.default_references}
    same = lambda a, b: a == b or os.path.realpath(a) == os.path.realpath(b)  # noqa: E731  (runs/x vs /abs/runs/x)
    return {
        spec.name: role
        for role in REFERENCE_ROLES
        if (ref := getattr(options, role)) is not None
        for spec in options.models
        if same(spec.source, ref.source)
    }
