"""Entry-point registries: what other packages add (suites, backends).

One reader for every group: each entry point must name an object of the
group's type whose `name` equals the entry point's and is not taken yet.
Anything else becomes one message naming the entry point and its package,
which the plugin reports as a usage error before any model loads.

A `Registry` reads its entry points on first use, not at import: a package
whose module defines both a suite and a backend imports our registries while
one of them is loading it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Generic, Protocol, TypeVar


class Named(Protocol):
    """What a registry holds: things with a name."""

    @property
    def name(self) -> str: ...


T = TypeVar("T", bound=Named)


class Registry(Mapping, Generic[T]):
    """The built-in entries, then the installed ones (read once, on first use)."""

    def __init__(self, group: str, kind: type[T], builtin: dict[str, T]):
        self.group, self.kind, self.builtin = group, kind, builtin
        self._entries: dict[str, T] | None = None
        self._problems: list[str] = []

    def _loaded(self) -> dict[str, T]:
        if self._entries is None:
            found, self._problems = installed(self.group, self.kind, self.builtin)
            self._entries = {**self.builtin, **found}
        return self._entries

    @property
    def problems(self) -> list[str]:
        self._loaded()
        return self._problems

    def __getitem__(self, name: str) -> T:
        return self._loaded()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._loaded())

    def __len__(self) -> int:
        return len(self._loaded())


def installed(group: str, kind: type[T], builtin: dict[str, T]) -> tuple[dict[str, T], list[str]]:
    """(name -> object, problems) for the entry points of `group`."""
    from importlib.metadata import entry_points

    what = group.rsplit(".", 1)[-1].removesuffix("s")  # "suite", "backend"
    found: dict[str, T] = {}
    problems: list[str] = []
    for entry in entry_points(group=group):
        where = f"{what} entry point {entry.name} = {entry.value!r}" + (
            f" (package {entry.dist.name})" if entry.dist is not None else ""
        )
        try:
            obj = entry.load()
        except Exception as exc:  # noqa: BLE001 - a third-party import error is reported, not raised here
            problems.append(f"{where}: cannot import it ({type(exc).__name__}: {exc})")
            continue
        if not isinstance(obj, kind):
            problems.append(f"{where}: expected a {kind.__module__}.{kind.__name__}, got {type(obj).__name__}")
        elif obj.name != entry.name:
            problems.append(f"{where}: the {kind.__name__} is named '{obj.name}', not '{entry.name}'")
        elif obj.name in builtin or obj.name in found:
            problems.append(f"{where}: a {what} named '{obj.name}' is already registered")
        else:
            found[obj.name] = obj
    return found, problems
