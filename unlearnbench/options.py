"""A run's settings as frozen values: `BenchOptions`, what an evaluation
session needs, and `RunOptions`, what the pytest run adds (its reports, its
baseline, how it shows undecided checks). The package builds a `BenchOptions`
in one place, `BenchOptions.from_command_line`: the plugin calls it once per
process with pytest's `config.getoption`, `unlearnbench preflight` and the
training callback through `from_values` (the same parsing, their values
given by name, the plugin's defaults for the rest). A notebook may build the
dataclass directly; `__post_init__` checks what every builder's values must
be. Nothing here imports torch."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from unlearnbench.cache import DEFAULT_CACHE_DIR
from unlearnbench.errors import UnlearnbenchError
from unlearnbench.models.checkpoint import CheckpointSpec, discover, split_name
from unlearnbench.rule import DecisionRule

DEVICE = re.compile(r"auto|cpu|cuda(:\d+)?")
DTYPES = ("auto", "float32", "bfloat16", "float16")
_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
    "k": 2**10,
    "m": 2**20,
    "g": 2**30,
    "t": 2**40,
}


def memory_budget_of(text: str) -> int | None:
    """`--memory-budget`: None for "auto", else bytes ("512MiB", "4GB", "1.5g": binary for
    K/M/G/T and the *iB units, decimal for kB/MB/GB/TB)."""
    if text.strip().lower() == "auto":
        return None
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*", text.lower())
    if not match or match.group(2) not in _UNITS or float(match.group(1)) * _UNITS[match.group(2)] < 1 << 20:
        raise UnlearnbenchError(
            f"--memory-budget must be 'auto' or a size of at least 1 MiB such as 512MiB or 4GB, not {text!r}"
        )
    return int(float(match.group(1)) * _UNITS[match.group(2)])


# What `from_command_line` reads, by pytest dest, and the plugin's default for each (checked
# against the plugin's parser in tests/unit/test_options.py); a suite's flags default to None.
COMMAND_LINE_DEFAULTS: dict[str, Any] = {
    "model": [],
    "model_dir": [],
    "full_model": None,
    "retain_model": None,
    "base_model": None,
    "thresholds": None,
    "device": "auto",
    "device_map": None,
    "dtype": "auto",
    "batch_size": "auto",
    "memory_budget": "auto",
    "cache_dir": None,
    "data_dir": [],
    "suite_option": [],
    "alpha": 0.05,
    "correction": None,
    "power": 0.8,
    "point_estimate": False,
    "strict_ci": False,
    "seed": 0,
    "shard": None,
    "tokenizer": [],
    "endpoint_concurrency": 8,
    "endpoint_timeout": 120.0,
    "zoo_extra": [],
    "checkpoint_deadline": None,
}


@dataclass(frozen=True)
class BenchOptions:
    models: list[CheckpointSpec]  # empty: each suite's default fixture-zoo checkpoints
    full: CheckpointSpec | None = None
    retain: CheckpointSpec | None = None
    thresholds_override: Path | None = None
    data_dirs: dict[str, str] = field(default_factory=dict)  # suite -> dir or hf:ID ("*" = every suite)
    suite_options: dict[str, dict[str, str]] = field(default_factory=dict)  # suite -> key -> value
    device: str = "auto"
    device_map: str | dict | None = None  # accelerate's device_map; replaces `device`
    dtype: str = "auto"
    batch_size: int | None = None
    memory_budget: int | None = None  # --memory-budget in bytes; None: auto (models/batching.Batcher)
    cache_dir: Path = DEFAULT_CACHE_DIR
    cache_secret: bytes | None = None  # --cache-key-file: entries signed with it, others recomputed
    rule: DecisionRule = field(default_factory=DecisionRule)  # --alpha, --correction, --point-estimate, --strict-ci
    seed: int = 0
    shard: object | None = None  # shard.Shard: evaluate only this shard's checkpoints
    tokenizers: dict[str, str] = field(default_factory=dict)  # model name -> tokenizer dir (endpoint models)
    endpoint_concurrency: int = 8  # requests in flight per endpoint model
    endpoint_timeout: float = 120.0  # seconds one endpoint request may wait for its reply
    checkpoint_deadline: float | None = None  # seconds one checkpoint's evaluation may take in all
    zoo_extra: tuple[str, ...] = ()  # --zoo-extra: more zoo recipes beside the family (meta-evaluation's seeds)
    base_model: str | None = None  # --base-model: the base of every PEFT adapter checkpoint

    def __post_init__(self):
        """What every builder's values must be; raises UnlearnbenchError naming the option."""
        from unlearnbench.suites import SUITES

        if not DEVICE.fullmatch(self.device):
            raise UnlearnbenchError(f"--device must be auto, cpu, cuda or cuda:N, not {self.device!r}")
        if self.dtype not in DTYPES:
            raise UnlearnbenchError(f"--dtype must be one of {', '.join(DTYPES)}, not {self.dtype!r}")
        if self.batch_size is not None and (not isinstance(self.batch_size, int) or self.batch_size < 1):
            raise UnlearnbenchError(f"--batch-size must be 'auto' or a positive integer, not {self.batch_size!r}")
        if self.memory_budget is not None and self.memory_budget < 1 << 20:
            raise UnlearnbenchError(
                f"--memory-budget must be 'auto' or a size of at least 1 MiB such as 512MiB or "
                f"4GB, not {self.memory_budget!r} bytes"
            )
        for suite in self.data_dirs:
            if suite != "*" and suite not in SUITES:
                raise UnlearnbenchError(
                    f"--data-dir {suite}={self.data_dirs[suite]}: unknown suite '{suite}' (known: {', '.join(SUITES)})"
                )
        for suite, values in self.suite_options.items():
            for name in values:
                if suite not in SUITES or name not in SUITES[suite].options:
                    known = ", ".join(f"{s}.{o}" for s, spec in SUITES.items() for o in spec.options)
                    entry = f"{suite}.{name}={values[name]}"
                    raise UnlearnbenchError(f"--suite-option {entry!r}: expected SUITE.KEY=VALUE, one of {known}")
        if self.zoo_extra:
            if self.models:
                raise UnlearnbenchError(
                    "--zoo-extra adds zoo recipes to the default zoo run: give it without --model/--model-dir"
                )
            from unlearnbench.fixtures.zoo import RECIPES

            for name in self.zoo_extra:
                if name not in RECIPES:
                    raise UnlearnbenchError(
                        f"--zoo-extra {name}: no zoo recipe of this name (known: {', '.join(RECIPES)})"
                    )

    @classmethod
    def from_command_line(cls, get: Callable[[str], Any], *, cache_secret: bytes | None = None) -> BenchOptions:
        """The plugin's options (`get(dest)`: pytest's `config.getoption`), parsed and validated."""
        from unlearnbench.suites import SUITES

        batch = str(get("batch_size"))
        if batch != "auto" and (not batch.isdigit() or int(batch) < 1):
            raise UnlearnbenchError(f"--batch-size must be 'auto' or a positive integer, not {batch!r}")
        if get("point_estimate") and get("strict_ci"):
            raise UnlearnbenchError(
                "--point-estimate decides on values alone and --strict-ci on intervals: give one of them"
            )
        if get("point_estimate") and get("correction") == "holm":
            raise UnlearnbenchError("--correction corrects the intervals' decisions; --point-estimate makes none")
        suite_options: dict[str, dict[str, str]] = {}
        for entry in get("suite_option"):
            key, sep, value = entry.partition("=")
            suite, dot, name = key.partition(".")
            if not (sep and dot):
                known = ", ".join(f"{s}.{o}" for s, spec in SUITES.items() for o in spec.options)
                raise UnlearnbenchError(f"--suite-option {entry!r}: expected SUITE.KEY=VALUE, one of {known}")
            suite_options.setdefault(suite, {})[name] = value
        for suite, spec in SUITES.items():
            for flag, key, _metavar, _help in spec.flags:
                value = get(flag.lstrip("-").replace("-", "_"))
                if value is not None:
                    suite_options.setdefault(suite, {})[key] = value
        models = [m if isinstance(m, CheckpointSpec) else CheckpointSpec.parse(m) for m in get("model")]
        for directory in get("model_dir"):
            models += discover(directory)
        return cls(
            models=models,
            full=CheckpointSpec.parse(get("full_model")) if get("full_model") else None,
            retain=CheckpointSpec.parse(get("retain_model")) if get("retain_model") else None,
            thresholds_override=Path(get("thresholds")) if get("thresholds") else None,
            data_dirs=data_dirs_of(get("data_dir")),
            suite_options=suite_options,
            device=get("device"),
            device_map=get("device_map"),
            dtype=get("dtype"),
            batch_size=None if batch == "auto" else int(batch),
            memory_budget=memory_budget_of(get("memory_budget")),
            cache_dir=Path(get("cache_dir")).expanduser() if get("cache_dir") else DEFAULT_CACHE_DIR,
            cache_secret=cache_secret,
            rule=DecisionRule(
                alpha=get("alpha"),
                power=get("power"),
                correction=get("correction") or "holm",
                point_estimate=get("point_estimate"),
                strict=get("strict_ci"),
            ),
            seed=get("seed"),
            shard=get("shard"),
            tokenizers=dict(get("tokenizer")),
            endpoint_concurrency=get("endpoint_concurrency"),
            endpoint_timeout=get("endpoint_timeout"),
            checkpoint_deadline=get("checkpoint_deadline"),
            zoo_extra=tuple(get("zoo_extra")),
            base_model=get("base_model"),
        )

    @classmethod
    def from_values(cls, *, cache_secret: bytes | None = None, **values: Any) -> BenchOptions:
        """`from_command_line` of a command line that gives `values` (by dest: `data_dir=["dusk=D"]`,
        `alpha=0.01`; `model` may hold `CheckpointSpec`s) and the plugin's defaults otherwise."""
        from unlearnbench.suites import SUITES

        flags = {flag.lstrip("-").replace("-", "_") for spec in SUITES.values() for flag, *_ in spec.flags}
        unknown = sorted(set(values) - set(COMMAND_LINE_DEFAULTS) - flags)
        if unknown:
            raise TypeError(f"BenchOptions.from_values: no option {', '.join(unknown)}")
        return cls.from_command_line(
            lambda dest: values[dest] if dest in values else COMMAND_LINE_DEFAULTS.get(dest), cache_secret=cache_secret
        )


@dataclass(frozen=True)
class RunOptions:
    report_dir: Path  # where run reports go: --report-dir, else <rootdir>/reports
    report_items: int | None = None  # items' values and generations kept per metric (None: all)
    baseline: Path | None = None  # a previous report to compare with
    regression_rules: tuple = ()  # report.baseline.RegressionRule: --fail-on-regression
    fail_inconclusive: bool = False
    progress: bool = True  # progress lines on stderr
    verbose: bool = False  # pytest -v: every check in the summary, not only the undecided and failed
    long_tracebacks: bool = False  # pytest --tb=long: an error's traceback through our code, not one line

    @classmethod
    def from_command_line(cls, get: Callable[[str], Any], rootpath: Path) -> RunOptions:
        from unlearnbench.report.baseline import RegressionRule

        rules = tuple(RegressionRule.parse(r) for r in get("fail_on_regression"))
        if rules and not get("baseline"):
            raise UnlearnbenchError("--fail-on-regression needs --baseline REPORT.json")
        if get("baseline") and not rules:
            raise UnlearnbenchError("--baseline needs at least one --fail-on-regression [SUITE.]METRIC:DELTA")
        return cls(
            report_dir=Path(get("report_dir")) if get("report_dir") else Path(rootpath) / "reports",
            report_items=get("report_items"),
            baseline=Path(get("baseline")) if get("baseline") else None,
            regression_rules=rules,
            fail_inconclusive=bool(get("fail_inconclusive")),
            progress=not get("no_progress"),
            verbose=(get("verbose") or 0) > 0,
            long_tracebacks=get("tbstyle") == "long",
        )


def data_dirs_of(entries: list[str]) -> dict[str, str]:
    """`--data-dir [SUITE=]DIR` entries as `BenchOptions.data_dirs` (no suite: "*", every suite)."""
    out = {}
    for entry in entries:
        suite, directory = split_name(entry)
        out[suite or "*"] = directory
    return out
