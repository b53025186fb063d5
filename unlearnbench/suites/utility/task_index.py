"""lm-eval's task index without indexing lm-eval's thousands of task files in
every process.

lm-eval's `TaskManager()` parses every YAML file it ships (about 14,000) to
learn where each task, group and tag is defined: 7-10 s of a core, paid again
by every process that runs the utility suite (each xdist worker, each Ray
task, each run). What a run needs is the definitions of the tasks it names.
So the built-in index is kept as {name: kind, file, referenced names} in
`$UNLEARNBENCH_CACHE_DIR/lm-eval-tasks/`, keyed by lm-eval's version and the
path, size and mtime of every task file it ships (a reinstall or an edited
task file builds it again), and a run's `TaskManager` indexes only the
folders that define its tasks and what they reference (a group's tasks, a
tag's tasks, recursively), then the user's `include_path`, in lm-eval's
order (later folders override earlier ones).

Every name the run may load is then checked against the whole index: defined
in the same file as lm-eval's own `TaskManager(include_path=...)` would have
it. If any is not (a name defined twice across folders, an index that no
longer matches the files), the run gets lm-eval's full `TaskManager` instead.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path

from unlearnbench.atomic import atomic_write_text

INDEX_FORMAT = 1


def _builtin_root() -> Path:
    import lm_eval.tasks

    return Path(lm_eval.tasks.__file__).resolve().parent


def _summary(task_index: dict, root: Path | None) -> dict[str, list]:
    """{name: [kind, file (relative to `root` when given), referenced names]}
    from a TaskManager's `task_index`."""
    out = {}
    for name, entry in task_index.items():
        kind = entry.kind.name
        if kind == "TAG":
            refs = sorted(entry.tags)  # a tag's entry lists the tasks that carry it
        elif kind == "GROUP":
            refs = sorted(set(_names_in((entry.cfg or {}).get("task"))))
        else:
            refs = []
        path = entry.yaml_path
        if path is not None:
            path = Path(path).resolve()
            path = str(path.relative_to(root)) if root is not None else str(path)
        out[name] = [kind, path, refs]
    return out


def _names_in(spec) -> Iterable[str]:
    """Task, group and tag names a group's `task:` entry refers to: names,
    lists of them, inline configs (their `task` and `group`)."""
    if isinstance(spec, str):
        yield spec
    elif isinstance(spec, list):
        for item in spec:
            yield from _names_in(item)
    elif isinstance(spec, dict):
        for key in ("group", "task"):
            if key in spec:
                yield from _names_in(spec[key])


def _files_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for dirpath, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(f for f in files if f.endswith(".yaml")):
            stat = os.stat(os.path.join(dirpath, name))
            relative = os.path.relpath(os.path.join(dirpath, name), root)
            digest.update(f"{relative}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


@functools.lru_cache(maxsize=2)
def builtin_index(root: Path) -> dict[str, list]:
    """lm-eval's built-in index (its task files under `root`) as {name: [kind,
    file relative to `root`, referenced names]}: read from the cache when
    those files are the ones it was built from, else built by lm-eval's own
    full TaskManager and written there (when the cache folder is writable)."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    from unlearnbench.cache import DEFAULT_CACHE_DIR

    key = hashlib.sha256(f"{INDEX_FORMAT}\0{lm_eval.__version__}\0{root}\0{_files_digest(root)}".encode())
    path = DEFAULT_CACHE_DIR / "lm-eval-tasks" / f"{key.hexdigest()[:24]}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        pass
    index = _summary(TaskManager().task_index, root)
    try:
        atomic_write_text(path, json.dumps(index))
    except OSError:
        pass  # a read-only cache: the next process builds it again, as lm-eval would
    return index


def known_tasks(include: str) -> set[str]:
    """Every task, group and tag name a run may name: lm-eval's and the user's."""
    return set(builtin_index(_builtin_root())) | set(_user_index(include))


@functools.lru_cache(maxsize=8)
def _user_index(include: str) -> dict[str, list]:
    if not include:
        return {}
    from lm_eval.tasks import TaskManager

    return _summary(TaskManager(include_path=include, include_defaults=False).task_index, None)


@functools.lru_cache(maxsize=4)
def task_manager(include: str, tasks: tuple[str, ...]):
    """A TaskManager that loads `tasks` (and what they reference) exactly as
    `TaskManager(include_path=include or None)` would, indexing only the folders
    that define them; that full TaskManager when it cannot tell."""
    from lm_eval.tasks import TaskManager

    root = _builtin_root()
    builtin, user = builtin_index(root), _user_index(include)
    expected = {name: [kind, str(root / path) if path else None, refs] for name, (kind, path, refs) in builtin.items()}
    expected.update(user)  # lm-eval indexes include_path after its own tasks: the user's definitions win
    needed, pending = set(), list(tasks)
    while pending:
        name = pending.pop()
        if name in needed or name not in expected:
            continue
        needed.add(name)
        pending.extend(expected[name][2])
    parents = {name: Path(expected[name][1]).parent for name in needed if expected[name][1] and name not in user}
    # The folder lm-eval indexes for each built-in name: its file's folder, or an enclosing one that is indexed too.
    folder_of = {
        name: str(min((p for p in parents.values() if p == parent or p in parent.parents), key=lambda p: len(p.parts)))
        for name, parent in parents.items()
    }
    paths = sorted(set(folder_of.values())) + ([include] if include else [])
    # lm-eval registers a tag once per folder it indexes, the last replacing the others: a built-in tag
    # whose tasks lie in two of these folders would lose members (and log each replacement).
    split_tag = any(
        expected[name][0] == "TAG"
        and name not in user
        and len({folder_of[member] for member in expected[name][2] if member in folder_of}) > 1
        for name in needed
    )
    if paths and not split_tag:
        manager = TaskManager(include_path=paths, include_defaults=False)
        found = _summary(manager.task_index, None)
        if all(found.get(name) == expected[name] for name in needed):
            return manager
    return TaskManager(include_path=include or None)
