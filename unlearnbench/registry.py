"""Entry-point registries: what other packages add (suites, backends).

One reader for every group: each entry point must name an object of the
group's type whose `name` equals the entry point's and is not taken yet.
Anything else becomes one message naming the entry point and its package,
which the plugin reports as a usage error before any model loads.
"""

from __future__ import annotations

from typing import TypeVar

T = TypeVar("T")


def installed(group: str, kind: type[T], builtin: dict[str, T]) -> tuple[dict[str, T], list[str]]:
    """(name -> object, problems) for the entry points of `group`."""
    from importlib.metadata import entry_points

    what = group.rsplit(".", 1)[-1].removesuffix("s")  # "suite", "backend"
    found: dict[str, T] = {}
    problems: list[str] = []
    for entry in entry_points(group=group):
        where = f"{what} entry point {entry.name} = {entry.value!r}" + (
            f" (package {entry.dist.name})" if entry.dist is not None else "")
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
