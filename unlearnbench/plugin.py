"""The pytest plugin: options, parametrization, xdist grouping, verdicts, reports.

Registered through the `pytest11` entry point, so it is loaded by every
pytest run in an environment where unlearnbench is installed. It is inert
unless a collected test carries the `unlearnbench(SUITE)` marker: no model,
threshold or report work happens otherwise, and importing it pulls in only
the standard library and pytest.
"""

from __future__ import annotations

import functools
import json
import os
import re
import secrets
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from unlearnbench import progress

progress.keep_terminal()  # before pytest's output capture starts: progress lines stay visible

MARKER = "unlearnbench"
RECORD_KEY = "unlearnbench"  # the user_properties key that carries a test's record
_STATE = pytest.StashKey["PluginState"]()
INTERRUPT_FILE_KEY = "unlearnbench_interrupt_file"  # workerinput: the file the controller's Ctrl-C creates
INTERRUPT_MESSAGE = ("interrupted: the running evaluation stops at its next step, the checks not yet evaluated fail "
                     "as interrupted, and the report of what finished is written (Ctrl-C again to exit at once, "
                     "without a report)")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("unlearnbench", "unlearnbench: unlearning gates for LLM checkpoints")
    group.addoption("--model", action="append", default=[], metavar="[NAME=]PATH",
                    help="checkpoint under test: HF directory, .gguf file or Hub id; repeatable. "
                         "Default: the fixture zoo.")
    group.addoption("--model-dir", action="append", default=[], metavar="DIR",
                    help="every checkpoint below DIR (folders with config.json, .gguf files); repeatable")
    group.addoption("--full-model", metavar="[NAME=]PATH", help="reference model trained on forget + retain data")
    group.addoption("--retain-model", metavar="[NAME=]PATH", help="reference model trained on retain data only")
    group.addoption("--thresholds", metavar="FILE", help="YAML of per-check overrides of the default gates")
    group.addoption("--report-dir", metavar="DIR", default=None,
                    help="where reports/<run-id>/ is written (default: <rootdir>/reports)")
    group.addoption("--device", default="auto", help="auto | cpu | cuda | cuda:N (auto: one GPU per xdist worker)")
    group.addoption("--device-map", type=_parse_device_map, default=None, metavar="auto|FILE.json",
                    help="spread each checkpoint over every visible GPU (accelerate's device_map: auto, balanced, "
                         "balanced_low_0, sequential) or as a JSON file {module: device} says; replaces --device")
    group.addoption("--dtype", default="auto", choices=("auto", "float32", "bfloat16", "float16"),
                    help="model weights dtype; log-probs are always float32 (auto: float32 on CPU)")
    group.addoption("--batch-size", default="auto",
                    help="auto (memory-budgeted, halves on CUDA OOM) or a fixed number")
    group.addoption("--cache-dir", metavar="DIR", default=None,
                    help="cache for reference-model work and the zoo (default ~/.cache/unlearnbench)")
    group.addoption("--cache-key-file", metavar="FILE", default=os.environ.get("UNLEARNBENCH_CACHE_KEY_FILE") or None,
                    help="a secret (>= 16 bytes) that signs cache entries with HMAC-SHA256: entries not signed with "
                         "it (written by anyone without the key) are recomputed, not trusted; for a --cache-dir "
                         "others can write (default: $UNLEARNBENCH_CACHE_KEY_FILE)")
    group.addoption("--data-dir", action="append", default=[], metavar="[SUITE=]DIR",
                    help="data for every suite, or for one suite (a directory, or hf:DATASET); repeatable")
    group.addoption("--suite-option", action="append", default=[], metavar="SUITE.KEY=VALUE",
                    help="a suite parameter (e.g. dusk.forget_style=Listicle); repeatable")
    from unlearnbench.suites import SUITES

    for spec in SUITES.values():  # each suite's shortcuts for its --suite-option keys
        for flag, _key, metavar, text in spec.flags:
            group.addoption(flag, default=None, metavar=metavar, help=text)
    group.addoption("--strict-ci", action="store_true",
                    help="a check passes only if its whole 95%% bootstrap CI is on the good side")
    group.addoption("--fail-inconclusive", action="store_true",
                    help="fail (not skip) a check that cannot separate good from bad checkpoints on this data "
                         "(a release gate's choice; --strict-ci implies it)")
    group.addoption("--seed", type=int, default=0, help="seed of everything random: bootstrap CIs, MCQ distractors and option positions (default 0)")
    group.addoption("--baseline", metavar="REPORT.json", default=None,
                    help="a previous report to compare with (see --fail-on-regression)")
    group.addoption("--fail-on-regression", action="append", default=[], metavar="[SUITE.]METRIC:DELTA",
                    help="fail when METRIC is worse than in --baseline by more than DELTA; repeatable")
    group.addoption("--report-items", type=_positive_int, default=None, metavar="N",
                    help="keep at most N items' values and generations per metric in the report (values and CIs "
                         "still cover every item); default: all")
    group.addoption("--shard", type=_parse_shard, default=None, metavar="I/N",
                    help="evaluate only shard I of N (0 <= I < N) of the run's checkpoints, e.g. "
                         "$SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT; join the reports with `unlearnbench merge`")
    group.addoption("--tokenizer", action="append", default=[], type=_parse_tokenizer, metavar="NAME=DIR",
                    help="the tokenizer files of an endpoint model (--model NAME=openai:URL#MODEL): prompts are built "
                         "here from them (repeatable)")
    group.addoption("--endpoint-concurrency", type=_positive_int, default=8, metavar="N",
                    help="requests in flight per endpoint model (default 8)")
    group.addoption("--endpoint-timeout", type=_positive_seconds, default=120.0, metavar="SECONDS",
                    help="how long one request to an openai: model (--model/--full-model/--retain-model NAME=openai:"
                         "URL) may wait for its reply before it is retried (4 tries in all); default 120")
    group.addoption("--zoo-extra", action="append", default=[], metavar="RECIPE",
                    help="on the default zoo, also evaluate this zoo recipe in every suite that runs the unlearning "
                         "family (e.g. retain-seed1; `unlearnbench zoo list`); repeatable")
    group.addoption("--checkpoint-deadline", type=_positive_seconds, default=None, metavar="SECONDS",
                    help="wall-clock limit on one checkpoint's evaluation, from its first computed suite: past "
                         "it, its remaining checks fail with the reason and the run goes on (default: none)")
    group.addoption("--no-progress", action="store_true",
                    help="do not print progress lines (model loading, generation, patching) to stderr")


def _parse_shard(text: str):
    from unlearnbench.shard import Shard

    return Shard.parse(text)


def _parse_device_map(text: str):
    import argparse

    from unlearnbench.models.device import parse_device_map

    try:
        return parse_device_map(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _parse_tokenizer(text: str) -> tuple[str, str]:
    import argparse

    name, sep, directory = text.partition("=")
    if not (sep and name and directory):
        raise argparse.ArgumentTypeError(f"expected NAME=DIR (the endpoint model's name and its tokenizer folder), "
                                         f"not {text!r}")
    return name, directory


def _positive_int(text: str) -> int:
    import argparse

    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, not {text!r}")
    return int(text)


def _positive_seconds(text: str) -> float:
    import argparse
    import math

    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, not {text!r}")
    return value


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{MARKER}(suite): an unlearnbench suite test, parametrized over checkpoints"
    )
    _quiet_third_party(config)
    _validate_inputs(config)
    _prefer_loadgroup(config)


def _quiet_third_party(config: pytest.Config) -> None:
    """Third-party noise a suite run cannot act on, silenced where it starts:
    bitsandbytes logs (before collection) that the optional `kernels` package
    is missing and uses its own CPU kernels instead; torch warns that modules
    loaded by the quantization and LoRA attacks still use
    torch.jit.script_method, and transformers that its quantizer calls a
    deprecated alias."""
    import logging

    logging.getLogger("bitsandbytes").setLevel(logging.ERROR)
    config.addinivalue_line("filterwarnings", r"ignore:`torch\.jit\.script_method` is deprecated:DeprecationWarning")
    # transformers' quantizer calls its own deprecated alias while the quant4/quant8 attacks load a model
    config.addinivalue_line("filterwarnings", r"ignore:`is_gradient_checkpointing` is deprecated:FutureWarning")


def _validate_inputs(config: pytest.Config) -> None:
    """What the command line names, checked before collection (cheap: no torch):
    an `ERROR:` line and exit 4, never a traceback after the work."""
    from unlearnbench.backends import BACKENDS
    from unlearnbench.cache import read_secret
    from unlearnbench.errors import UnlearnbenchError
    from unlearnbench.models.checkpoint import CheckpointSpec, discover, split_name
    from unlearnbench.report.baseline import RegressionRule
    from unlearnbench.suites import SUITES

    try:
        if SUITES.problems or BACKENDS.problems:
            raise UnlearnbenchError([*SUITES.problems, *BACKENDS.problems][0])
        for entry in config.getoption("model"):
            CheckpointSpec.parse(entry)
        for directory in config.getoption("model_dir"):
            discover(directory)
        if config.getoption("zoo_extra"):
            if config.getoption("model") or config.getoption("model_dir"):
                raise UnlearnbenchError("--zoo-extra adds zoo recipes to the default zoo run: give it without "
                                        "--model/--model-dir")
            from unlearnbench.fixtures.zoo import RECIPES

            for name in config.getoption("zoo_extra"):
                if name not in RECIPES:
                    raise UnlearnbenchError(f"--zoo-extra {name}: no zoo recipe of this name "
                                            f"(known: {', '.join(RECIPES)})")
        for entry in config.getoption("data_dir"):
            suite, _ = split_name(entry)
            if suite and suite not in SUITES:
                raise UnlearnbenchError(f"--data-dir {entry}: unknown suite '{suite}' (known: {', '.join(SUITES)})")
        for rule in config.getoption("fail_on_regression"):
            RegressionRule.parse(rule)
        if config.getoption("report_dir"):
            check_report_dir(Path(config.getoption("report_dir")), "--report-dir")
        cache_secret = read_secret(config.getoption("cache_key_file")) if config.getoption("cache_key_file") else None
    except UnlearnbenchError as exc:
        raise pytest.UsageError(str(exc)) from None
    state = PluginState(config)
    state.cache_secret = cache_secret
    if state.is_worker and config.workerinput.get(INTERRUPT_FILE_KEY):
        from unlearnbench import cancel

        cancel.share_through(Path(config.workerinput[INTERRUPT_FILE_KEY]))
    config.stash[_STATE] = state
    config.pluginmanager.register(state, "unlearnbench-state")


def report_base(config: pytest.Config) -> Path:
    """The folder run reports go under: --report-dir, else <rootdir>/reports."""
    given = config.getoption("report_dir")
    return Path(given) if given else Path(config.rootpath) / "reports"


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
        raise UnlearnbenchError(f"{what} {base}: reports cannot be written there "
                                f"({exc.strerror or type(exc).__name__}{': ' + exc.filename if exc.filename else ''})"
                                ) from None


def _prefer_loadgroup(config: pytest.Config) -> None:
    """With `-n`, keep each checkpoint's tests on one worker (one model load
    per checkpoint) unless the user chose a distribution mode explicitly.
    The grouping itself is done by `scheduling.CheckpointScheduling`."""
    explicit = any(a == "--dist" or a.startswith("--dist=") or a == "-d" for a in config.invocation_params.args)
    if getattr(config.option, "dist", "no") == "load" and not explicit:
        config.option.dist = "loadgroup"


class PluginState:
    """Per-process plugin state; the `Bench` is created only when a suite is collected."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.bench = None
        self.sent_metrics: set[tuple[str, str]] = set()
        self.report: dict | None = None
        self.report_files = None  # report/schema.py ReportFiles, once written
        self.startup_error: str | None = None
        self.cache_stats: dict[str, int] = {}
        self.started = time.time()
        self.baseline: dict | None = None
        self.regression_rules: list = []
        self.cache_secret: bytes | None = None  # from --cache-key-file, read at configure time
        self.interrupt_file: Path | None = None  # xdist controller: created by its Ctrl-C (pytest_configure_node)
        self.controller_handles_interrupts = False

    @property
    def is_worker(self) -> bool:
        return hasattr(self.config, "workerinput")

    def user_checkpoints(self) -> list:
        from unlearnbench.models.checkpoint import CheckpointSpec, discover

        specs = [CheckpointSpec.parse(m) for m in self.config.getoption("model")]
        for directory in self.config.getoption("model_dir"):
            specs += discover(directory)
        return specs

    def checkpoints(self, suite: str) -> list:
        """--model entries, or the suite's default fixture-zoo checkpoints."""
        from unlearnbench.suites import SUITES, sweep_checkpoints

        if suite not in SUITES:
            raise pytest.UsageError(f"unknown suite '{suite}' (known: {', '.join(SUITES)})")
        return sweep_checkpoints(suite, self.user_checkpoints(), self.config.getoption("shard"),
                                 tuple(self.config.getoption("zoo_extra")))

    def bench_options(self):
        """BenchOptions from the command line (parsing only; raises UsageError)."""
        from unlearnbench.cache import DEFAULT_CACHE_DIR
        from unlearnbench.errors import UnlearnbenchError
        from unlearnbench.models.checkpoint import CheckpointSpec, split_name
        from unlearnbench.session import BenchOptions
        from unlearnbench.suites import SUITES

        opt = self.config.getoption
        try:
            batch = opt("batch_size")
            if batch != "auto" and (not batch.isdigit() or int(batch) < 1):
                raise UnlearnbenchError(f"--batch-size must be 'auto' or a positive integer, not {batch!r}")
            if not re.fullmatch(r"auto|cpu|cuda(:\d+)?", opt("device")):
                raise UnlearnbenchError(f"--device must be auto, cpu, cuda or cuda:N, not {opt('device')!r}")
            workers = getattr(self.config.option, "numprocesses", None)
            if opt("device_map") is not None and isinstance(workers, int) and workers > 1:
                raise UnlearnbenchError(f"--device-map spreads each checkpoint over every visible device: run it "
                                        f"with one process, not -n {workers}")
            data_dirs = {}
            for entry in opt("data_dir"):
                suite, directory = split_name(entry)
                data_dirs[suite or "*"] = directory
            suite_options: dict[str, dict[str, str]] = {}
            for entry in opt("suite_option"):
                key, sep, value = entry.partition("=")
                suite, dot, name = key.partition(".")
                if not (sep and dot) or suite not in SUITES or name not in SUITES[suite].options:
                    known = ", ".join(f"{s}.{o}" for s, spec in SUITES.items() for o in spec.options)
                    raise UnlearnbenchError(f"--suite-option {entry!r}: expected SUITE.KEY=VALUE, one of {known}")
                suite_options.setdefault(suite, {})[name] = value
            for suite, spec in SUITES.items():
                for flag, key, _metavar, _help in spec.flags:
                    value = opt(flag.lstrip("-").replace("-", "_"))
                    if value is not None:
                        suite_options.setdefault(suite, {})[key] = value
            return BenchOptions(
                models=self.user_checkpoints(),
                full=CheckpointSpec.parse(opt("full_model")) if opt("full_model") else None,
                retain=CheckpointSpec.parse(opt("retain_model")) if opt("retain_model") else None,
                thresholds_override=Path(opt("thresholds")) if opt("thresholds") else None,
                data_dirs=data_dirs,
                suite_options=suite_options,
                device=opt("device"),
                device_map=opt("device_map"),
                dtype=opt("dtype"),
                batch_size=None if batch == "auto" else int(batch),
                cache_dir=Path(opt("cache_dir")).expanduser() if opt("cache_dir") else DEFAULT_CACHE_DIR,
                cache_secret=self.cache_secret,
                strict_ci=opt("strict_ci"),
                seed=opt("seed"),
                shard=opt("shard"),
                tokenizers=dict(opt("tokenizer")),
                endpoint_concurrency=opt("endpoint_concurrency"),
                endpoint_timeout=opt("endpoint_timeout"),
                checkpoint_deadline=opt("checkpoint_deadline"),
                zoo_extra=tuple(opt("zoo_extra")),
            )
        except UnlearnbenchError as exc:
            raise pytest.UsageError(str(exc)) from None

    def start(self, suites: list[str], thresholds_files: dict[str, Path]) -> None:
        """Validate everything a run needs, cheaply, before any model is loaded."""
        from unlearnbench.errors import UnlearnbenchError
        from unlearnbench.session import Bench

        try:
            self.load_baseline()
            from unlearnbench import cancel, progress

            reporter = self.config.pluginmanager.get_plugin("terminalreporter")
            writer = getattr(reporter, "_tw", None)  # pytest's TerminalWriter: is its line (the dots) open?
            progress.enable(not self.config.getoption("no_progress"),
                            line_width=lambda: getattr(writer, "width_of_current_line", 0))
            cancel.install_sigint_handler(INTERRUPT_MESSAGE)
            if not self.is_worker:
                check_report_dir(report_base(self.config), "report folder")
            bench = Bench(self.bench_options())
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
        from unlearnbench.report.baseline import RegressionRule
        from unlearnbench.report.schema import load_report

        self.regression_rules = [RegressionRule.parse(r) for r in self.config.getoption("fail_on_regression")]
        path = self.config.getoption("baseline")
        if self.regression_rules and not path:
            raise UnlearnbenchError("--fail-on-regression needs --baseline REPORT.json")
        if path:
            try:
                self.baseline = load_report(Path(path))
            except ValueError as exc:
                raise UnlearnbenchError(f"--baseline {exc}") from None
            if not self.regression_rules:
                raise UnlearnbenchError("--baseline needs at least one --fail-on-regression [SUITE.]METRIC:DELTA")

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Under xdist the controller collects nothing, so it checks the
        checkpoints itself before starting workers (cheap: files and headers)."""
        if self.is_worker or getattr(self.config.option, "dist", "no") == "no":
            return
        if not any(self.config.getoption(o) for o in ("model", "model_dir", "full_model", "retain_model")):
            return
        from unlearnbench.errors import UnlearnbenchError
        from unlearnbench.session import Bench

        try:
            Bench(self.bench_options()).validate_checkpoints()
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
        records = [json.loads(value) for key, value in report.user_properties if key == RECORD_KEY]
        if not records:
            return
        from unlearnbench.report.schema import add_record

        if self.report is None:  # under xdist the controller collects nothing: start on the first record
            self.report = _new_report(self.config, self.bench_options())
        for record in records:
            add_record(self.report, record)

    def pytest_runtest_logstart(self, nodeid: str, location) -> None:
        """xdist controller: once a suite test starts, Ctrl-C waits for the
        workers (which stop as interrupted) and writes the report, rather than
        dropping what they still send. Other runs keep pytest's Ctrl-C."""
        if self.is_worker or self.controller_handles_interrupts or getattr(self.config.option, "dist", "no") == "no":
            return
        if _is_suite_module(Path(self.config.rootpath) / nodeid.split("::")[0]):  # location: where a check's code is
            from unlearnbench import cancel

            cancel.install_sigint_handler(INTERRUPT_MESSAGE)
            self.controller_handles_interrupts = True

    @pytest.hookimpl(optionalhook=True, tryfirst=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log):
        if config.getvalue("dist") != "loadgroup":
            return None
        from unlearnbench.scheduling import CheckpointScheduling
        from unlearnbench.shard import run_order

        return CheckpointScheduling(config, log, run_order([s.name for s in self.user_checkpoints()]))

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
                self.config.hook.pytest_runtest_logreport(report=pytest.TestReport(
                    nodeid=nodeid, location=(nodeid.split("::")[0], None, nodeid), keywords={}, outcome="failed",
                    longrepr=f"checkpoint {name} lost: {reason}; its other tests were not run", when="call"))
        if self.report is None:
            self.report = _new_report(self.config, self.bench_options())
        add_lost(self.report, name, reason, tests)

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node) -> None:
        """xdist controller: workers do not receive Ctrl-C; the controller's
        creates this file, which each worker's long work watches (cancel.py)."""
        from unlearnbench import cancel

        if self.interrupt_file is None:
            import tempfile

            self.interrupt_file = Path(tempfile.gettempdir()) / f"unlearnbench-interrupt-{os.getpid()}-{secrets.token_hex(4)}"
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
            self.config.workeroutput["unlearnbench_cache"] = stats
            return
        self._add_cache_stats(stats)
        if self.interrupt_file is not None:
            self.interrupt_file.unlink(missing_ok=True)
        if self.report is None or not self.report["checkpoints"]:
            return
        from unlearnbench.report.schema import write_outputs

        run = self.report["run"]
        run["finished_at"] = _now()
        run["duration_s"] = round(time.time() - self.started, 3)
        run["exit_status"] = int(exitstatus)
        run["interrupted"] = interrupted
        run["cache"] = dict(self.cache_stats)
        self.report_files = write_outputs(self.report, Path(run["directory"]))

    def pytest_terminal_summary(self, terminalreporter) -> None:
        """The checks that did not pass, per checkpoint (every check with -v);
        the verdicts, ranking and report paths come last (`pytest_unconfigure`)."""
        if self.report_files is None:
            return
        from unlearnbench.report.text import attention_lines, check_lines

        terminalreporter.section("unlearnbench")
        for line in check_lines(self.report, everything=self.config.getoption("verbose") > 0):
            terminalreporter.write_line(line)
        for line in attention_lines(self.report):
            terminalreporter.write_line(line, yellow=True)
        for row in self.report.get("regressions", []):
            terminalreporter.write_line(
                f"REGRESSION {row['checkpoint']} {row['suite']}.{row['metric']}: {row['value']:.4g} vs baseline "
                f"{row['baseline']:.4g} (worse by {row['worse_by']:.4g} > {row['allowed']:.4g})")

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        """After pytest's own summary (its FAILED lines and counts): the
        answer, so that it is what a reader sees last."""
        if self.report_files is None or self.is_worker:
            return
        from unlearnbench.report.text import path_lines, ranking_lines, verdict_lines

        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return
        write = reporter.write_line
        reporter.write_sep("=", "unlearnbench verdicts")
        if self.report["run"].get("interrupted"):
            write("INTERRUPTED (Ctrl-C): the report holds what finished; checks not evaluated failed as "
                  "interrupted", red=True, bold=True)
        for line in verdict_lines(self.report):
            write(line, red=" FAIL" in line[:80], green=" PASS" in line[:80])
        write("")
        write(self.report["assessment"]["ranking"]["rule"])
        for line in ranking_lines(self.report):
            write("  " + line)
        write("")
        for line in path_lines(self.report_files):
            write(line, bold=line.startswith("HTML"))

@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config):
    """`-n auto` on a suite run: one worker per GPU, else 2 (CPU evaluation is
    compute-bound: more workers than that only split the same cores)."""
    if not any(Path(str(a)).parts[:1] == ("suites",) or "suites" in Path(str(a)).parts
               for a in config.invocation_params.args):
        return None  # not a suite run: xdist's own default
    try:
        import torch

        count = torch.cuda.device_count()
    except ImportError:
        count = 0
    return count or 2


@functools.lru_cache(maxsize=None)
def _is_suite_module(path: Path) -> bool:
    """A test module that marks its tests as a suite's (read once per module:
    the xdist controller asks at every test's start)."""
    try:
        return f"mark.{MARKER}(" in path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makemodule(module_path: Path, parent):
    """A suite's test module gets one test per check of its thresholds YAML
    (see `SuiteModule`); any other module is pytest's own."""
    if not _is_suite_module(module_path):
        return None
    return SuiteModule.from_parent(parent, path=module_path)


class SuiteModule(pytest.Module):
    """A suite's test module: the plugin adds `test_<check>` for every check
    in the suite's thresholds YAML that the module does not define itself
    (it judges that check), and `test_no_regression` (active with
    --baseline). A check in the YAML is a test; a YAML check that names no
    metric of the suite stops the run at collection, naming the file."""

    def collect(self):
        suite = self._suite()
        if suite is not None:
            self._add_generated_tests(suite)
        return super().collect()

    def _suite(self) -> str | None:
        marks = getattr(self.obj, "pytestmark", [])
        for mark in marks if isinstance(marks, list) else [marks]:
            if getattr(mark, "name", None) == MARKER:
                return mark.args[0] if mark.args else None  # the missing name is reported at parametrization
        return None

    def _add_generated_tests(self, suite: str) -> None:
        for name in self._check_names(suite):
            if not hasattr(self.obj, f"test_{name}"):
                setattr(self.obj, f"test_{name}", _check_test(name))
        if not hasattr(self.obj, "test_no_regression"):
            setattr(self.obj, "test_no_regression", _regression_test())

    def _check_names(self, suite: str) -> list[str]:
        """The check names of the suite's YAML, read leniently: validating the
        file (a check that names no metric of the suite, a missing field) is
        the run's start (`PluginState.start`), which turns a bad file into one
        `ERROR:` line naming it, as for every other bad input."""
        import yaml

        try:
            raw = yaml.safe_load(_thresholds_file(self.path, suite).read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError, pytest.UsageError):
            return []
        checks = raw.get("checks") if isinstance(raw, dict) else None
        return [str(name) for name in checks] if isinstance(checks, dict) else []


def _check_test(check: str):
    def test(gate):
        gate.check(check)

    test.__name__ = test.__qualname__ = f"test_{check}"
    test.__doc__ = f"Check '{check}' of the suite's thresholds YAML (generated by the unlearnbench plugin)."
    return test


def _regression_test():
    def test_no_regression(gate):
        gate.no_regression()

    test_no_regression.__doc__ = "No metric worse than in --baseline (generated by the unlearnbench plugin)."
    return test_no_regression


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.definition.get_closest_marker(MARKER) is None or "checkpoint" not in metafunc.fixturenames:
        return
    state: PluginState = metafunc.config.stash[_STATE]
    marker = metafunc.definition.get_closest_marker(MARKER)
    if not marker.args:
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: @pytest.mark.{MARKER} needs the suite name")
    from unlearnbench.errors import UnlearnbenchError

    try:
        specs = state.checkpoints(marker.args[0])
    except UnlearnbenchError as exc:  # a malformed --model value
        raise pytest.UsageError(str(exc)) from None
    metafunc.parametrize("checkpoint", specs, ids=[s.name for s in specs])


@pytest.hookimpl(tryfirst=True)  # before xdist turns xdist_group marks into node ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # The suites are known from every suite test, the regression tests
    # included: a suite whose YAML is unreadable has no check tests, and the
    # run must still start (and stop on that file) rather than find no tests.
    suites: dict[str, Path] = {}
    for item in items:
        marker = item.get_closest_marker(MARKER)
        callspec = getattr(item, "callspec", None)
        if marker is None or callspec is None or "checkpoint" not in callspec.params:
            continue
        if not marker.args:
            raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.{MARKER} needs the suite name")
        suite = marker.args[0]
        if suite not in suites:
            suites[suite] = _thresholds_file(Path(str(item.path)), suite)
        item.add_marker(pytest.mark.xdist_group(name=f"checkpoint:{callspec.params['checkpoint'].name}"))
    if not config.getoption("baseline"):
        # Regression tests exist only against a baseline: without one they
        # are deselected rather than shown as dozens of skips.
        dropped = [i for i in items if i.get_closest_marker(MARKER) and i.originalname == "test_no_regression"]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = [i for i in items if i not in dropped]
    if not suites:
        return
    # Checkpoint-major order: all suites and checks of one checkpoint, then the
    # next (other tests first, in their order), so each model is loaded once
    # and freed after its last test.
    first_seen: dict[str, int] = {}
    ranked = [(-1 if spec is None else first_seen.setdefault(spec.name, len(first_seen)), position, item)
              for position, item in enumerate(items) for spec in [checkpoint_spec_of(item)]]
    items[:] = [item for _, _, item in sorted(ranked, key=lambda r: (r[0], r[1]))]
    state: PluginState = config.stash[_STATE]
    state.start(sorted(suites), suites)


def checkpoint_spec_of(item: pytest.Item | None):
    """The CheckpointSpec a suite test is parametrized with, else None."""
    callspec = getattr(item, "callspec", None)
    if item is None or callspec is None or item.get_closest_marker(MARKER) is None:
        return None
    return callspec.params.get("checkpoint")


def _thresholds_file(test_file: Path, suite: str) -> Path:
    """`thresholds/<suite>.yaml` in the nearest folder above the suite's tests."""
    for parent in test_file.parents:
        candidate = parent / "thresholds" / f"{suite}.yaml"
        if candidate.is_file():
            return candidate
    raise pytest.UsageError(f"no thresholds/{suite}.yaml found in any folder above {test_file}")


@pytest.fixture
def gate(request: pytest.FixtureRequest, checkpoint) -> "Gate":
    """Judges a check of the current suite on the current checkpoint."""
    marker = request.node.get_closest_marker(MARKER)
    return Gate(request.config.stash[_STATE], marker.args[0], checkpoint, request.node)


@pytest.fixture(scope="session")
def full_model(request: pytest.FixtureRequest):
    """The `--full-model` ModelHandle (on the default zoo: the zoo's `full`), loaded
    once per process; None when there is none."""
    state: PluginState = request.config.stash[_STATE]
    return state.bench.session_reference("full") if state.bench else None


@pytest.fixture(scope="session")
def retain_model(request: pytest.FixtureRequest):
    """The `--retain-model` ModelHandle (on the default zoo: the zoo's `retain`),
    loaded once per process; None when there is none."""
    state: PluginState = request.config.stash[_STATE]
    return state.bench.session_reference("retain") if state.bench else None


class Gate:
    def __init__(self, state: PluginState, suite: str, checkpoint, node: pytest.Item):
        self.state = state
        self.suite = suite
        self.checkpoint = checkpoint
        self.node = node

    def check(self, name: str | None = None):
        """Judge check `name` (default: the test's name without `test_`),
        record the verdict for the report, then skip, fail or pass the test."""
        from unlearnbench.errors import UnlearnbenchError
        from unlearnbench.report.schema import cap_items

        name = name or self.node.originalname.removeprefix("test_")
        bench = self.state.bench
        record = {
            "suite": self.suite,
            "check": name,
            "checkpoint": {"name": self.checkpoint.name},
            "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
            "thresholds_file": str(bench.gates[self.suite][name].source) if name in bench.gates[self.suite] else None,
        }
        try:
            verdict, run = bench.judge(self.checkpoint, self.suite, name)
        except UnlearnbenchError as exc:
            record["error"] = str(exc)
            self._send(record)
            if self.state.config.getoption("tbstyle") == "long":
                raise
            verdict = None
        except Exception as exc:
            record["error"] = f"{type(exc).__name__}: {exc}"
            self._send(record)
            raise
        if verdict is None:
            # A broken checkpoint, model or input: one line, not a traceback
            # through our internals (--tb=long shows it). Failed outside the
            # except block, so no chained exception is printed either.
            pytest.fail(record["error"], pytrace=False)
        record["verdict"] = verdict.to_dict()
        if run is not None:  # None: skipped without evaluating (its reference model is not given)
            record["checkpoint"] = run.checkpoint | {"name": self.checkpoint.name}
        key = (self.checkpoint.name, self.suite)
        if run is not None and key not in self.state.sent_metrics:  # metrics travel once per checkpoint and suite
            self.state.sent_metrics.add(key)
            limit = self.state.config.getoption("report_items")
            record["metrics"] = {k: cap_items(m.to_dict(), limit) if limit else m.to_dict()
                                 for k, m in run.metrics.items()}
            record["data"] = run.data
            record["timings"] = {"evaluate_s": round(run.seconds, 3), "from_cache": run.cached}
        if verdict.relative_to and verdict.outcome not in ("skip", "error"):
            reference = bench.reference_run(verdict.relative_to, self.suite)
            record["references"] = {verdict.relative_to: reference.checkpoint}
        self._send(record)
        if verdict.outcome == "skip":
            pytest.skip(verdict.reason)
        if verdict.outcome == "inconclusive":  # never a pass; --strict-ci made it a failure already
            message = f"{self.checkpoint.name} {self.suite}.{name}: {verdict.reason}"
            if self.state.config.getoption("fail_inconclusive"):
                pytest.fail(message + "; --fail-inconclusive fails it", pytrace=False)
            pytest.skip(message)
        if verdict.outcome == "fail":
            pytest.fail(f"{self.checkpoint.name} {self.suite}.{name}: {verdict.reason}\n"
                        f"  rationale: {verdict.rationale}", pytrace=False)
        return verdict

    def no_regression(self):
        """Compare this checkpoint's metrics with --baseline under the
        --fail-on-regression rules; skip without a baseline."""
        state = self.state
        if state.baseline is None:
            pytest.skip("no --baseline given")
        from unlearnbench.report.baseline import baseline_checkpoint, regressions
        from unlearnbench.session import REFERENCE_ROLES

        source = self.state.config.getoption("baseline")
        run = state.bench.run(self.checkpoint, self.suite)
        base = baseline_checkpoint(state.baseline, self.checkpoint.name, source)
        base_metrics = base["suites"].get(self.suite, {}).get("metrics")
        if not base_metrics:
            pytest.skip(f"baseline {source} has no {self.suite} results")
        references = {}
        for role in {getattr(m, "ideal", None) for m in run.metrics.values()} & set(REFERENCE_ROLES):
            reference = state.bench.reference_run(role, self.suite)
            if reference is not None:
                references[role] = {k: m.to_dict() for k, m in reference.metrics.items()}
        rows = regressions({k: m.to_dict() for k, m in run.metrics.items()}, base_metrics, self.suite,
                           state.regression_rules, references)
        if not rows:
            pytest.skip(f"no --fail-on-regression rule names a {self.suite} metric")
        bad = [r for r in rows if r["regressed"]]
        self._send({"suite": self.suite, "checkpoint": {"name": self.checkpoint.name},
                    "regressions": [r | {"checkpoint": self.checkpoint.name, "suite": self.suite} for r in bad]})
        if bad:
            pytest.fail("; ".join(f"{r['metric']} = {r['value']:.4g}, baseline {r['baseline']:.4g}: worse by "
                                  f"{r['worse_by']:.4g} > {r['allowed']:.4g}"
                                  + (f" (distance to its ideal {r['ideal']:.4g})" if "ideal" in r else "")
                                  for r in bad), pytrace=False)

    def _send(self, record: dict) -> None:
        self.node.user_properties.append((RECORD_KEY, json.dumps(record)))


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _new_report(config: pytest.Config, options) -> dict:
    from unlearnbench.report.schema import new_report

    run_id = datetime.now().strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)
    base = report_base(config)
    return new_report({
        "id": run_id,
        "directory": str((base / run_id).resolve()),
        "started_at": _now(),
        "command": [_program(), *config.invocation_params.args],
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
            "data_dirs": dict(options.data_dirs),
            "suite_options": options.suite_options,
            "cache_signed": options.cache_secret is not None,
        },
        "seed": options.seed,
        "strict_ci": options.strict_ci,
        "anchors": _anchors(options),
    })


def _program() -> str:
    """How the run was started: `pytest`, or `python -m pytest` (argv[0] is then pytest's __main__.py)."""
    name = Path(sys.argv[0]).name
    return "python -m pytest" if name == "__main__.py" else name


def _anchors(options) -> dict[str, str]:
    """{checkpoint name: role} for the checkpoints that are the run's reference
    models: on the default zoo, the suites' zoo references; else the --model
    entries with the same source as --full-model / --retain-model."""
    from unlearnbench.session import REFERENCE_ROLES
    from unlearnbench.suites import SUITES

    if not options.models:
        return {recipe: role for spec in SUITES.values() for role, recipe in spec.default_references}
    same = lambda a, b: a == b or os.path.realpath(a) == os.path.realpath(b)  # noqa: E731  (runs/x vs /abs/runs/x)
    return {spec.name: role for role in REFERENCE_ROLES if (ref := getattr(options, role)) is not None
            for spec in options.models if same(spec.source, ref.source)}
