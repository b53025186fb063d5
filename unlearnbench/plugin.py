"""The pytest plugin: options, collection, parametrization, fixtures.

Registered through the `pytest11` entry point, so it is loaded by every
pytest run in an environment where unlearnbench is installed. It is inert
unless a collected module declares a suite (`pytestmark =
pytest.mark.unlearnbench(SUITE)`): no model, threshold or report work
happens otherwise, and importing it pulls in only the standard library and
pytest. The rest of the plugin, like pytest-benchmark's: `collect.py` (a
YAML check is a test item), `run_state.py` (per-process state, records, the
report), `gate.py` (what a suite test calls), `hookspec.py` (hooks a
conftest.py can implement).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from unlearnbench import progress
from unlearnbench.collect import MARKER, RUN_CHECK, check_items, checkpoint_spec_of, suite_of, thresholds_file
from unlearnbench.gate import Gate
from unlearnbench.rule import CORRECTIONS, DEFAULT_POWER
from unlearnbench.run_state import INTERRUPT_FILE_KEY, STATE, RunState, check_report_dir

progress.keep_terminal()  # before pytest's output capture starts: progress lines stay visible


def pytest_addhooks(pluginmanager) -> None:
    from unlearnbench import hookspec

    pluginmanager.add_hookspecs(hookspec)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("unlearnbench", "unlearnbench: unlearning gates for LLM checkpoints")
    group.addoption(
        "--model",
        action="append",
        default=[],
        metavar="[NAME=]PATH",
        help="checkpoint under test: HF directory, .gguf file or Hub id; repeatable. Default: the fixture zoo.",
    )
    group.addoption(
        "--model-dir",
        action="append",
        default=[],
        metavar="DIR",
        help="every checkpoint below DIR (folders with config.json, .gguf files); repeatable",
    )
    group.addoption("--full-model", metavar="[NAME=]PATH", help="reference model trained on forget + retain data")
    group.addoption("--retain-model", metavar="[NAME=]PATH", help="reference model trained on retain data only")
    group.addoption(
        "--base-model",
        metavar="PATH",
        default=None,
        help="the base model of every PEFT adapter checkpoint (a folder with adapter_config.json), "
        "instead of the base_model_name_or_path its adapter_config.json names",
    )
    group.addoption("--thresholds", metavar="FILE", help="YAML of per-check overrides of the default gates")
    group.addoption(
        "--report-dir",
        metavar="DIR",
        default=None,
        help="where reports/<run-id>/ is written (default: <rootdir>/reports)",
    )
    group.addoption("--device", default="auto", help="auto | cpu | cuda | cuda:N (auto: one GPU per xdist worker)")
    group.addoption(
        "--device-map",
        type=_parse_device_map,
        default=None,
        metavar="auto|FILE.json",
        help="spread each checkpoint over every visible GPU (accelerate's device_map: auto, balanced, "
        "balanced_low_0, sequential) or as a JSON file {module: device} says; replaces --device",
    )
    group.addoption(
        "--dtype",
        default="auto",
        choices=("auto", "float32", "bfloat16", "float16"),
        help="model weights dtype; log-probs are always float32 (auto: float32 on CPU)",
    )
    group.addoption(
        "--batch-size", default="auto", help="auto (sized by --memory-budget, halves on CUDA OOM) or a fixed number"
    )
    group.addoption(
        "--memory-budget",
        default="auto",
        metavar="auto|SIZE",
        help="what one batch's working memory may take beside the weights, e.g. 512MiB or 4GB "
        "(default auto: 1 GiB on CPU, 80%% of the free memory on CUDA)",
    )
    group.addoption(
        "--cache-dir",
        metavar="DIR",
        default=None,
        help="cache for reference-model work and the zoo (default ~/.cache/unlearnbench)",
    )
    group.addoption(
        "--cache-key-file",
        metavar="FILE",
        default=os.environ.get("UNLEARNBENCH_CACHE_KEY_FILE") or None,
        help="a secret (>= 16 bytes) that signs cache entries with HMAC-SHA256: entries not signed with "
        "it (written by anyone without the key) are recomputed, not trusted; for a --cache-dir "
        "others can write (default: $UNLEARNBENCH_CACHE_KEY_FILE)",
    )
    group.addoption(
        "--data-dir",
        action="append",
        default=[],
        metavar="[SUITE=]DIR",
        help="data for every suite, or for one suite (a directory, or hf:DATASET); repeatable",
    )
    group.addoption(
        "--suite-option",
        action="append",
        default=[],
        metavar="SUITE.KEY=VALUE",
        help="a suite parameter (e.g. dusk.forget_style=Listicle); repeatable",
    )
    from unlearnbench.suites import SUITES

    for spec in SUITES.values():  # each suite's shortcuts for its --suite-option keys
        for flag, _key, metavar, text in spec.flags:
            group.addoption(flag, default=None, metavar=metavar, help=text)
    group.addoption(
        "--alpha",
        type=_parse_alpha,
        default=0.05,
        metavar="A",
        help="a check passes or fails only when the whole (1 - A) interval of what it decides on (its "
        "value, or its difference from the reference) is on one side of its bound; otherwise it is "
        "inconclusive (default 0.05: 95%% intervals; docs/verdicts.md)",
    )
    group.addoption(
        "--correction",
        choices=CORRECTIONS,
        default=None,
        help="holm (the default): a check fails only when its Holm-adjusted p-value across all of the "
        "checkpoint's checks in the run is at most A, so that A bounds the chance of failing a "
        "checkpoint wrongly; none: A per check, as a paper's table reads (docs/verdicts.md)",
    )
    group.addoption(
        "--power",
        type=_parse_power,
        default=DEFAULT_POWER,
        metavar="P",
        help="the power that the minimum detectable effect (mde), the items an undecided check needs "
        "(n_needed) and the preflight aim at (default 0.8)",
    )
    group.addoption(
        "--point-estimate",
        action="store_true",
        help="decide every check on its value alone, as papers' tables do (intervals are still "
        "reported); the report says which rule decided",
    )
    group.addoption(
        "--strict-ci",
        action="store_true",
        help="fail every check the evidence does not decide (an inconclusive check) instead of "
        "skipping it, and say so in the report",
    )
    group.addoption(
        "--fail-inconclusive",
        action="store_true",
        help="fail (not skip) a check that cannot separate good from bad checkpoints on this data "
        "(a release gate's choice; --strict-ci implies it)",
    )
    group.addoption(
        "--seed",
        type=int,
        default=0,
        help="seed of everything random: bootstrap CIs, MCQ distractors and option positions (default 0)",
    )
    group.addoption(
        "--baseline",
        metavar="REPORT.json",
        default=None,
        help="a previous report to compare with (see --fail-on-regression)",
    )
    group.addoption(
        "--fail-on-regression",
        action="append",
        default=[],
        metavar="[SUITE.]METRIC:DELTA",
        help="fail when METRIC is worse than in --baseline by more than DELTA; repeatable",
    )
    group.addoption(
        "--report-items",
        type=_positive_int,
        default=None,
        metavar="N",
        help="keep at most N items' values and generations per metric in the report (values and CIs "
        "still cover every item); default: all",
    )
    group.addoption(
        "--shard",
        type=_parse_shard,
        default=None,
        metavar="I/N",
        help="evaluate only shard I of N (0 <= I < N) of the run's checkpoints, e.g. "
        "$SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT; join the reports with `unlearnbench merge`",
    )
    group.addoption(
        "--tokenizer",
        action="append",
        default=[],
        type=_parse_tokenizer,
        metavar="NAME=DIR",
        help="the tokenizer files of an endpoint model (--model NAME=openai:URL#MODEL): prompts are built "
        "here from them (repeatable)",
    )
    group.addoption(
        "--endpoint-concurrency",
        type=_positive_int,
        default=8,
        metavar="N",
        help="requests in flight per endpoint model (default 8)",
    )
    group.addoption(
        "--endpoint-timeout",
        type=_positive_seconds,
        default=120.0,
        metavar="SECONDS",
        help="how long one request to an openai: model (--model/--full-model/--retain-model NAME=openai:"
        "URL) may wait for its reply before it is retried (4 tries in all); default 120",
    )
    group.addoption(
        "--zoo-extra",
        action="append",
        default=[],
        metavar="RECIPE",
        help="on the default zoo, also evaluate this zoo recipe in every suite that runs the unlearning "
        "family (e.g. retain-seed1; `unlearnbench zoo list`); repeatable",
    )
    group.addoption(
        "--checkpoint-deadline",
        type=_positive_seconds,
        default=None,
        metavar="SECONDS",
        help="wall-clock limit on one checkpoint's evaluation, from its first computed suite: past "
        "it, its remaining checks fail with the reason and the run goes on (default: none)",
    )
    group.addoption(
        "--no-progress",
        action="store_true",
        help="do not print progress lines (model loading, generation, patching) to stderr",
    )


def _parse_alpha(text: str) -> float:
    return _open_unit(text, "a level", "0.05: 95% intervals")


def _parse_power(text: str) -> float:
    return _open_unit(text, "a power", "0.8: a true effect of one mde is decided 80% of the time")


def _open_unit(text: str, what: str, example: str) -> float:
    import argparse

    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"expected {what} strictly between 0 and 1 ({example}), not {text!r}")
    return value


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
        raise argparse.ArgumentTypeError(
            f"expected NAME=DIR (the endpoint model's name and its tokenizer folder), not {text!r}"
        )
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
    config.addinivalue_line("markers", f"{MARKER}(suite): an unlearnbench suite test, parametrized over checkpoints")
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
    """What the command line names, read into the run's options and checked
    before collection (cheap: no torch): an `ERROR:` line and exit 4, never a
    traceback after the work."""
    from unlearnbench.backends import BACKENDS
    from unlearnbench.cache import read_secret
    from unlearnbench.errors import UnlearnbenchError
    from unlearnbench.options import BenchOptions, RunOptions
    from unlearnbench.suites import SUITES

    try:
        if SUITES.problems or BACKENDS.problems:
            raise UnlearnbenchError([*SUITES.problems, *BACKENDS.problems][0])
        _check_rootdir(config)
        run_options = RunOptions.from_command_line(config.getoption, config.rootpath)
        if config.getoption("report_dir"):
            check_report_dir(run_options.report_dir, "--report-dir")
        cache_secret = read_secret(config.getoption("cache_key_file")) if config.getoption("cache_key_file") else None
        options = BenchOptions.from_command_line(config.getoption, cache_secret=cache_secret)
        workers = getattr(config.option, "numprocesses", None)
        if options.device_map is not None and isinstance(workers, int) and workers > 1:
            raise UnlearnbenchError(
                f"--device-map spreads each checkpoint over every visible device: run it "
                f"with one process, not -n {workers}"
            )
    except UnlearnbenchError as exc:
        raise pytest.UsageError(str(exc)) from None
    state = RunState(config)
    state.options, state.run_options = options, run_options
    worker_input = getattr(config, "workerinput", {})  # what xdist's controller sends a worker
    if worker_input.get(INTERRUPT_FILE_KEY):
        from unlearnbench import cancel

        cancel.share_through(Path(worker_input[INTERRUPT_FILE_KEY]))
    config.stash[STATE] = state
    config.stash[RUN_CHECK] = _run_check
    config.pluginmanager.register(state, "unlearnbench-state")


def _run_check(item) -> None:
    """A YAML check's test (collect.CheckItem): judged through the run's Gate."""
    gate = Gate(item.config.stash[STATE], item.suite, item.checkpoint, item)
    if item.check is None:
        gate.no_regression()
    else:
        gate.check(item.check)


def _check_rootdir(config: pytest.Config) -> None:
    """pytest picks its rootdir (the reports' default folder, where its cache
    goes, which conftest files load) before it knows this plugin's options,
    so the value of `--model PATH` given before the test paths counts as a
    test path then. When that makes another project's folder the rootdir, one
    holding neither the invocation folder nor any test path, the run stops
    before anything is written there."""
    from unlearnbench.errors import UnlearnbenchError

    if config.option.rootdir or config.option.inifilename:
        return  # the user chose it
    root = config.rootpath.resolve()
    invocation = config.invocation_params.dir
    ours = [invocation, *(invocation / str(arg).split("::", 1)[0] for arg in config.args)]
    if any(path.resolve().is_relative_to(root) for path in ours):
        return
    # Every test path is in config.args and none is under the rootdir (above), so a path under it that
    # follows a flag is that option's value.
    args = [str(arg) for arg in config.invocation_params.args]
    for flag, value in zip(args, args[1:]):
        path = invocation / value
        if flag.startswith("-") and path.exists() and path.resolve().is_relative_to(root):
            raise UnlearnbenchError(
                f"pytest took {config.rootpath} as its rootdir from {flag} {value} (before the test paths, an "
                f"option's value counts as one when pytest picks its rootdir), so the reports and pytest's cache "
                f"would go there: put the test paths first, write {flag}={value}, or pass --rootdir=DIR"
            )


def _prefer_loadgroup(config: pytest.Config) -> None:
    """With `-n`, keep each checkpoint's tests on one worker (one model load
    per checkpoint) unless the user chose a distribution mode explicitly.
    The grouping itself is done by `scheduling.CheckpointScheduling`."""
    explicit = any(a == "--dist" or a.startswith("--dist=") or a == "-d" for a in config.invocation_params.args)
    if getattr(config.option, "dist", "no") == "load" and not explicit:
        config.option.dist = "loadgroup"


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config):
    """`-n auto` on a suite run: one worker per GPU, else 2 (CPU evaluation is
    compute-bound: more workers than that only split the same cores)."""
    if not any(
        Path(str(a)).parts[:1] == ("suites",) or "suites" in Path(str(a)).parts for a in config.invocation_params.args
    ):
        return None  # not a suite run: xdist's own default
    try:
        import torch

        count = torch.cuda.device_count()
    except ImportError:
        count = 0
    return count or 2


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(collector, name: str, obj):
    """A suite module's `pytestmark` line declares its suite: collecting it
    yields the suite's YAML checks as test items (collect.py)."""
    if name != "pytestmark" or not isinstance(collector, pytest.Module):
        return None
    suite = suite_of(obj)
    if suite is None:
        return None
    state: RunState = collector.config.stash[STATE]
    from unlearnbench.errors import UnlearnbenchError

    try:
        return check_items(collector, suite, state.checkpoints(suite))
    except UnlearnbenchError as exc:  # a malformed --model value
        raise pytest.UsageError(str(exc)) from None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.definition.get_closest_marker(MARKER) is None or "checkpoint" not in metafunc.fixturenames:
        return
    state: RunState = metafunc.config.stash[STATE]
    marker = metafunc.definition.get_closest_marker(MARKER)
    assert marker is not None  # checked above
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
        spec = checkpoint_spec_of(item)
        if spec is None:
            continue
        suite = suite_of(item.get_closest_marker(MARKER))
        if suite is None:  # an item of a checkpoint outside a suite module: nothing to schedule by
            continue
        if suite not in suites:
            suites[suite] = thresholds_file(Path(str(item.path)), suite)
        item.add_marker(pytest.mark.xdist_group(name=f"checkpoint:{spec.name}"))
    if config.stash[STATE].run_options.baseline is None:
        # Regression tests exist only against a baseline: without one they
        # are deselected rather than shown as dozens of skips.
        dropped = [
            i
            for i in items
            if i.get_closest_marker(MARKER) and getattr(i, "originalname", None) == "test_no_regression"
        ]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = [i for i in items if i not in dropped]
    if not suites:
        return
    # Checkpoint-major order: all suites and checks of one checkpoint, then the
    # next (other tests first, in their order), so each model is loaded once
    # and freed after its last test.
    first_seen: dict[str, int] = {}
    ranked = [
        (-1 if spec is None else first_seen.setdefault(spec.name, len(first_seen)), position, item)
        for position, item in enumerate(items)
        for spec in [checkpoint_spec_of(item)]
    ]
    items[:] = [item for _, _, item in sorted(ranked, key=lambda r: (r[0], r[1]))]
    state: RunState = config.stash[STATE]
    state.start(sorted(suites), suites)


@pytest.fixture
def gate(request: pytest.FixtureRequest, checkpoint) -> Gate:
    """Judges a check of the current suite on the current checkpoint."""
    marker = request.node.get_closest_marker(MARKER)
    return Gate(request.config.stash[STATE], marker.args[0], checkpoint, request.node)


@pytest.fixture(scope="session")
def full_model(request: pytest.FixtureRequest):
    """The `--full-model` ModelHandle (on the default zoo: the zoo's `full`), loaded
    once per process; None when there is none."""
    state: RunState = request.config.stash[STATE]
    return state.bench.session_reference("full") if state.bench else None


@pytest.fixture(scope="session")
def retain_model(request: pytest.FixtureRequest):
    """The `--retain-model` ModelHandle (on the default zoo: the zoo's `retain`),
    loaded once per process; None when there is none."""
    state: RunState = request.config.stash[STATE]
    return state.bench.session_reference("retain") if state.bench else None
