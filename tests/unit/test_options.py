"""A run's settings are one frozen `BenchOptions`, validated however it is
built: from the plugin's command line (read once, in `from_command_line`),
by `unlearnbench preflight`, by the training callback, or in code. Before,
preflight and the callback built theirs without the plugin's checks, so a
bad `--device` passed them."""

from __future__ import annotations

import dataclasses

import pytest

from unlearnbench.errors import UnlearnbenchError
from unlearnbench.options import BenchOptions

DEFAULTS = {"batch_size": "auto", "memory_budget": "auto", "point_estimate": False, "strict_ci": False,
            "correction": None, "suite_option": [], "model": [], "model_dir": [], "full_model": None,
            "retain_model": None, "thresholds": None, "data_dir": [], "device": "auto", "device_map": None,
            "dtype": "auto", "cache_dir": None, "alpha": 0.05, "power": 0.8, "seed": 0, "shard": None,
            "tokenizer": [], "endpoint_concurrency": 8, "endpoint_timeout": 120.0, "checkpoint_deadline": None,
            "zoo_extra": [], "base_model": None}


def command_line(**given):
    """`config.getoption` of a command line giving `given` (every suite flag unset)."""
    values = DEFAULTS | given
    return lambda name: values.get(name)


def test_the_command_line_is_read_into_one_frozen_value(tmp_path):
    options = BenchOptions.from_command_line(command_line(
        model=["a=" + str(tmp_path)], data_dir=["dusk=/data/dusk", "/data/all"], suite_option=["tofu.max_items=5"],
        batch_size="4", memory_budget="512MiB", correction="none", device="cuda:1"))
    assert [(m.name, m.source) for m in options.models] == [("a", str(tmp_path))]
    assert options.data_dirs == {"dusk": "/data/dusk", "*": "/data/all"}
    assert options.suite_options == {"tofu": {"max_items": "5"}}
    assert (options.batch_size, options.memory_budget, options.device) == (4, 512 << 20, "cuda:1")
    assert options.rule.correction == "none"
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.device = "cpu"


@pytest.mark.parametrize("given, message", [
    ({"device": "gpu"}, "--device must be auto, cpu, cuda or cuda:N, not 'gpu'"),
    ({"batch_size": "0"}, "--batch-size must be 'auto' or a positive integer, not '0'"),
    ({"memory_budget": "lots"}, "--memory-budget must be 'auto' or a size of at least 1 MiB"),
    ({"suite_option": ["dusk.shots=3"]}, "--suite-option 'dusk.shots=3': expected SUITE.KEY=VALUE, one of"),
    ({"suite_option": ["dusk"]}, "--suite-option 'dusk': expected SUITE.KEY=VALUE, one of"),
    ({"data_dir": ["nosuch=/x"]}, "--data-dir nosuch=/x: unknown suite 'nosuch'"),
    ({"zoo_extra": ["nosuch"]}, "--zoo-extra nosuch: no zoo recipe of this name"),
    ({"point_estimate": True, "strict_ci": True}, "--point-estimate decides on values alone and --strict-ci"),
])
def test_a_bad_command_line_is_one_message_naming_the_option(given, message):
    with pytest.raises(UnlearnbenchError, match=message.replace("(", r"\(").replace(")", r"\)")):
        BenchOptions.from_command_line(command_line(**given))


def test_options_built_in_code_get_the_same_checks():
    with pytest.raises(UnlearnbenchError, match="--device must be auto, cpu, cuda or cuda:N, not 'gpu'"):
        BenchOptions(models=[], device="gpu")
    with pytest.raises(UnlearnbenchError, match="--suite-option 'tofu.nope=1'"):
        BenchOptions(models=[], suite_options={"tofu": {"nope": "1"}})


def test_preflight_checks_the_device_as_the_plugin_does_before_any_work(capsys, monkeypatch):
    """Before, the bad device surfaced only when the first reference model was placed, after the data loaded."""
    from unlearnbench import session
    from unlearnbench.cli import main

    monkeypatch.setattr(session.Bench, "prepare_suites", lambda *a, **k: pytest.fail("preflight began its work"))
    assert main(["preflight", "--device", "gpu", "--suite", "dusk"]) == 2
    assert "--device must be auto, cpu, cuda or cuda:N, not 'gpu'" in capsys.readouterr().err


def test_the_training_callback_checks_the_device_before_the_first_step(tmp_path, cache_dir):
    from transformers import TrainerControl, TrainerState, TrainingArguments

    from unlearnbench.callbacks import UnlearnbenchCallback

    callback = UnlearnbenchCallback(["dusk"], every_steps=2, device="gpu", cache_dir=cache_dir)
    args = TrainingArguments(output_dir=str(tmp_path / "run"), report_to=[], use_cpu=True)
    with pytest.raises(UnlearnbenchError, match="--device must be auto, cpu, cuda or cuda:N, not 'gpu'"):
        callback.on_train_begin(args, TrainerState(), TrainerControl())


def test_the_package_builds_its_options_in_one_place():
    """The plugin, preflight and the callback go through `from_command_line` (which calls `cls`):
    no module of the package calls the dataclass itself, so no builder can skip its parsing."""
    import ast
    from pathlib import Path

    import unlearnbench

    builders = []
    for path in Path(unlearnbench.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "BenchOptions":
                builders.append(path.name)
    assert builders == []


def test_the_defaults_from_values_fills_in_are_the_plugins():
    from _pytest.config.argparsing import Parser

    from unlearnbench import plugin
    from unlearnbench.options import COMMAND_LINE_DEFAULTS

    parser = Parser(_ispytest=True)  # pytest builds it for a run; here only to read its defaults
    plugin.pytest_addoption(parser)
    parsed = vars(parser.parse([]))
    assert {dest: parsed[dest] for dest in COMMAND_LINE_DEFAULTS} == COMMAND_LINE_DEFAULTS


def test_values_given_by_name_are_parsed_as_the_command_line_is(tmp_path):
    given = dict(data_dir=["dusk=/data/dusk"], device="cpu", alpha=0.01, full_model=f"full={tmp_path}")
    from_values = BenchOptions.from_values(**given)
    assert from_values == BenchOptions.from_command_line(command_line(**given))
    assert (from_values.full.name, from_values.rule.alpha, from_values.rule.correction) == ("full", 0.01, "holm")
    with pytest.raises(TypeError, match="no option devcie"):
        BenchOptions.from_values(devcie="cpu")
    with pytest.raises(UnlearnbenchError, match="--device must be auto, cpu, cuda or cuda:N, not 'gpu'"):
        BenchOptions.from_values(device="gpu")
