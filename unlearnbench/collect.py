"""Collection: a suite's test module declares its suite with
`pytestmark = pytest.mark.unlearnbench("<suite>")`, and collecting that line
yields one `CheckItem` per check of the suite's thresholds YAML (that the
module does not define as a test itself) and per checkpoint, plus the
regression check against --baseline. A check in YAML is a test; hand-written
suite tests (`def test_x(gate)`) are pytest functions parametrized over the
same checkpoints."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import pytest

MARKER = "unlearnbench"
# How a CheckItem runs: set by the plugin (plugin.py: a Gate over the run's
# state), so that collection imports nothing of the layers above it.
RUN_CHECK = pytest.StashKey[Callable[["CheckItem"], None]]()


class CheckItem(pytest.Item):
    """One check of a suite's thresholds YAML on one checkpoint (`check`
    None: no metric worse than in --baseline)."""

    def __init__(self, *, suite: str, check: str | None, checkpoint, **kwargs):
        super().__init__(**kwargs)
        self.suite, self.check, self.checkpoint = suite, check, checkpoint
        self.originalname = f"test_{check}" if check else "test_no_regression"

    def runtest(self) -> None:
        self.config.stash[RUN_CHECK](self)

    def reportinfo(self):
        what = f"check '{self.check}'" if self.check else "no regression against --baseline"
        return self.path, None, f"{self.originalname}[{self.checkpoint.name}]: {self.suite} {what}"


class NeedsCheckpoints(pytest.Item):
    """Stands for a suite's checks where there is no checkpoint to run them on:
    a suite with no fixture-zoo defaults (utility) and no --model. It skips
    with that reason, so the run says why it evaluated nothing."""

    def __init__(self, *, suite: str, **kwargs):
        super().__init__(**kwargs)
        self.suite = suite
        self.originalname = "test_needs_checkpoints"
        # A skip mark, so the summary points at the suite's module rather than this file.
        self.add_marker(
            pytest.mark.skip(
                reason=f"{suite} has no default checkpoints (the fixture zoo has none for it): give --model"
            )
        )

    def runtest(self) -> None:  # never reached: the skip mark skips it
        pytest.skip("no checkpoint")

    def reportinfo(self):
        return self.path, 0, f"{self.suite}: no checkpoint to evaluate"


def suite_of(mark) -> str | None:
    """The suite a module's `pytestmark` declares (None: not an unlearnbench suite module)."""
    for one in mark if isinstance(mark, list) else [mark]:
        if getattr(one, "name", None) == MARKER:
            if not one.args:
                raise pytest.UsageError(f"@pytest.mark.{MARKER} needs the suite name")
            return one.args[0]
    return None


def check_items(module: pytest.Module, suite: str, checkpoints: list) -> list[pytest.Item]:
    """The module's YAML checks (and regression check) on each checkpoint, in
    YAML order, each checkpoint in run order; without a checkpoint, one item
    that says so."""
    if not checkpoints:
        return [NeedsCheckpoints.from_parent(module, name="test_needs_checkpoints", suite=suite)]
    names: list[str | None] = [
        c for c in yaml_check_names(thresholds_file(module.path, suite)) if not hasattr(module.obj, f"test_{c}")
    ]
    if not hasattr(module.obj, "test_no_regression"):
        names.append(None)
    return [
        CheckItem.from_parent(
            module,
            name=f"{f'test_{c}' if c else 'test_no_regression'}[{spec.name}]",
            suite=suite,
            check=c,
            checkpoint=spec,
        )
        for c in names
        for spec in checkpoints
    ]


def yaml_check_names(path: Path) -> list[str]:
    """The check names of a thresholds YAML, read leniently: validating the
    file (a check that names no metric of the suite, a missing field) is the
    run's start (`RunState.start`), which turns a bad file into one `ERROR:`
    line naming it, as for every other bad input."""
    import yaml

    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return []
    checks = raw.get("checks") if isinstance(raw, dict) else None
    return [str(name) for name in checks] if isinstance(checks, dict) else []


def thresholds_file(test_file: Path, suite: str) -> Path:
    """`thresholds/<suite>.yaml` in the nearest folder above the suite's tests,
    else the suite's packaged default gate (`suites.default_file`): a
    repository that keeps its own gates edits them, one that does not is
    judged by the defaults."""
    from unlearnbench.suites import SUITES, default_file

    for parent in Path(test_file).parents:
        candidate = parent / "thresholds" / f"{suite}.yaml"
        if candidate.is_file():
            return candidate
    packaged = default_file(suite, f"thresholds/{suite}.yaml") if suite in SUITES else None
    if packaged is None:
        raise pytest.UsageError(
            f"no thresholds/{suite}.yaml found in any folder above {test_file}, and suite "
            f"'{suite}' ships no default gate"
        )
    return packaged


def checkpoint_spec_of(item: pytest.Item | None):
    """The CheckpointSpec a suite test runs on, else None."""
    if isinstance(item, CheckItem):
        return item.checkpoint
    callspec = getattr(item, "callspec", None)
    if item is None or callspec is None or item.get_closest_marker(MARKER) is None:
        return None
    return callspec.params.get("checkpoint")


@functools.cache
def is_suite_module(path: Path) -> bool:
    """Whether a test file declares a suite, for the xdist controller, which
    collects nothing and asks at every test's start (so: its text, read once)."""
    try:
        return f"mark.{MARKER}(" in path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
