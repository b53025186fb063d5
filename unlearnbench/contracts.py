"""What a suite's functions are: the typed contracts `SuiteSpec` holds them
by (`unlearnbench.api` publishes them; docs/extending.md shows a suite
written against them).

A suite's functions may be given as functions or as "module:function"
references, imported on first use so that reading the registry imports one
small module per suite. Either way a `FunctionRef` checks, when it resolves
the function, that it can be called the way the session calls it, and says
which suite's which hook is wrong and why before any model loads.

This module imports no numpy, torch or pytest: the registry (and the plugin,
through it) reads it at import.
"""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, cast, runtime_checkable

from unlearnbench.errors import UnlearnbenchError

if TYPE_CHECKING:
    from pathlib import Path

    from unlearnbench.metrics.core import MetricResult, References, Unavailable
    from unlearnbench.models.interface import LanguageModel


@runtime_checkable
class SuiteData(Protocol):
    """What a suite's loader returns. Besides its items (the suite's own
    business), the session reads three fields: `fingerprint` (a digest of the
    data files: part of every cache key), `source` (where the data came
    from: the report records it) and `params` (every parameter as resolved:
    defaults, the data folder's suite.json, --suite-option; part of the cache
    key, so changing one recomputes)."""

    @property
    def fingerprint(self) -> str: ...

    @property
    def source(self) -> str: ...

    @property
    def params(self) -> Mapping[str, Any]: ...


@runtime_checkable
class ClusteredData(Protocol):
    """Suite data whose items come in clusters (several questions about one
    fact or one document): {item id: cluster id}. Intervals then resample
    clusters, not items (docs/verdicts.md)."""

    @property
    def clusters(self) -> Mapping[str, str]: ...


@runtime_checkable
class OptionalData(Protocol):
    """Suite data that can say the suite cannot run in this environment at
    all (a missing optional dependency): `unavailable` is why, or None. Every
    metric is then n/a with that reason and no model loads."""

    @property
    def unavailable(self) -> str | None: ...


class Loader(Protocol):
    """`load(source, options) -> SuiteData`: `source` is the --data-dir
    folder (or a hub reference) or None for the suite's default; `options`
    are the suite's --suite-option values as given (strings)."""

    def __call__(self, source: str | Path | None, options: dict[str, Any], /) -> SuiteData: ...


class OpenLoader(Protocol):
    """An open suite's loader (`SuiteSpec.open_metrics`) also receives the
    metric names its gate checks."""

    def __call__(self, source: str | Path | None, options: dict[str, Any], gated: tuple[str, ...], /) -> SuiteData: ...


class Evaluator(Protocol):
    """`evaluate(model, data, refs) -> {metric: MetricResult | Unavailable}`:
    one entry per metric the spec declares; `refs` holds the run's reference
    models (the full and retain models) and the memo of work done on them."""

    def __call__(
        self, model: LanguageModel, data: Any, refs: References, /
    ) -> Mapping[str, MetricResult | Unavailable]: ...


class ProbeFunction(Protocol):
    """One forget-knowledge measurement cheap enough to repeat on every
    attacked copy of a model (the robustness suite runs it)."""

    def __call__(self, model: LanguageModel, data: Any, refs: References, /) -> MetricResult | Unavailable: ...


class Preflight(Protocol):
    """Cheap checks after the data loaded and before any weights load:
    `(run, suite) -> {checkpoint name: why this suite cannot run on it}`;
    raising UnlearnbenchError stops the run with its message."""

    def __call__(self, run: Any, suite: str, /) -> dict[str, str]: ...


class ReportHook(Protocol):
    """`(view) -> list`: the suite's figures (SVG strings) for its section
    of the HTML report, or the lines the console prints after its verdicts."""

    def __call__(self, view: Any, /) -> list[str]: ...


class ZooWriter(Protocol):
    """Writes the suite's data for the fixture zoo's corpus, in the suite's
    own format, into `directory`."""

    def __call__(self, directory: Path, corpus: Any, /) -> None: ...


class NameCheck(Protocol):
    """An open suite's check of a metric name its gate uses: what is wrong
    with it or None (`open_metrics`), or the name's kind (`open_kind`)."""

    def __call__(self, name: str, /) -> str | None: ...


# The arguments the session passes to each kind of hook: a resolved function
# must accept them positionally.
CALLED_WITH: dict[type, tuple[str, ...]] = {
    Loader: ("source", "options"),
    OpenLoader: ("source", "options", "gated"),
    Evaluator: ("model", "data", "refs"),
    ProbeFunction: ("model", "data", "refs"),
    Preflight: ("run", "suite"),
    ReportHook: ("view",),
    ZooWriter: ("directory", "corpus"),
    NameCheck: ("name",),
}
_REFERENCE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


class FunctionRef:
    """A suite's function, given or named "module:function", checked against
    its contract (`CALLED_WITH`) when it is first resolved."""

    def __init__(self, target: str | Callable[..., Any], contract: type, owner: str):
        if isinstance(target, str) and not _REFERENCE.match(target):
            raise UnlearnbenchError(f"{owner}: {target!r} is not a 'module:function' reference")
        if not isinstance(target, str) and not callable(target):
            raise UnlearnbenchError(
                f"{owner}: expected a function or a 'module:function' reference, got {type(target).__name__}"
            )
        self.target, self.contract, self.owner = target, contract, owner
        self._function: Callable[..., Any] | None = None

    @property
    def name(self) -> str:
        """The reference as written: "module:function"."""
        if isinstance(self.target, str):
            return self.target
        return f"{self.target.__module__}:{getattr(self.target, '__qualname__', repr(self.target))}"

    def resolve(self) -> Callable[..., Any]:
        if self._function is None:
            function = self.target if callable(self.target) else _imported(self.target, self.owner)
            _check_signature(function, CALLED_WITH[self.contract], f"{self.owner} ({self.name})")
            self._function = function
        return self._function

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.resolve()(*args, **kwargs)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FunctionRef) and (self.target, self.contract) == (other.target, other.contract)

    def __hash__(self) -> int:
        return hash((self.name, self.contract))

    def __repr__(self) -> str:
        return f"FunctionRef({self.name!r}, {self.contract.__name__})"


def _imported(target: str, owner: str) -> Callable[..., Any]:
    module, _, attribute = target.partition(":")
    try:
        function = getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as exc:
        raise UnlearnbenchError(f"{owner}: cannot import {target} ({type(exc).__name__}: {exc})") from exc
    if not callable(function):
        raise UnlearnbenchError(f"{owner}: {target} is a {type(function).__name__}, not a function")
    return cast("Callable[..., Any]", function)


def _check_signature(function: Callable[..., Any], arguments: Sequence[str], where: str) -> None:
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):  # a builtin without a signature: trusted as given
        return
    try:
        signature.bind(*arguments)
    except TypeError as exc:
        raise UnlearnbenchError(
            f"{where}: it is called as f({', '.join(arguments)}), which its signature "
            f"{signature} does not accept ({exc})"
        ) from exc


@dataclass(frozen=True)
class Probe:
    """A forget-knowledge probe a suite owns and the robustness suite repeats
    on attacked copies of a model: declared once, by its owner's spec."""

    name: str
    function: FunctionRef | str | ProbeFunction
    # True where a higher value means more of the forget knowledge is there
    # (a recall, a leak rate); False where it means less (UDS: 1 = erased).
    more_is_knowledge: bool

    def __post_init__(self) -> None:
        if not isinstance(self.function, FunctionRef):
            object.__setattr__(self, "function", FunctionRef(self.function, ProbeFunction, f"probe {self.name}"))

    def measure(self, model: LanguageModel, data: Any, refs: References) -> MetricResult | Unavailable:
        """The probe's value on `model`: its owner's function on its owner's data."""
        assert isinstance(self.function, FunctionRef)  # made one above
        result: MetricResult | Unavailable = self.function(model, data, refs)
        return result
