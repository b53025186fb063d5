"""pytest-xdist scheduling that keeps each checkpoint's tests on one worker.

xdist's own `loadgroup` mode groups tests by an `@group` suffix that it
writes into node ids; pytest 9.2 stores node ids elsewhere, so with pytest
>= 9.2 and xdist 3.8 that suffix silently never appears and groups are not
kept together. This scheduler groups by the checkpoint in the test id
instead, and still honours `@group` suffixes where they exist.
"""

from __future__ import annotations

from collections.abc import Iterable

from xdist.scheduler import LoadGroupScheduling


class CheckpointScheduling(LoadGroupScheduling):
    def __init__(self, config, log=None, checkpoint_names: Iterable[str] = ()):
        super().__init__(config, log)
        # Longest first, so "ga-step5" wins over "ga" inside "[ga-step5]".
        self.checkpoint_names = sorted(set(checkpoint_names), key=len, reverse=True)
        # crash item -> (checkpoint, its tests that will not run): read by the
        # plugin's pytest_handlecrashitem.
        self.lost: dict[str, tuple[str, list[str]]] = {}

    def remove_node(self, node) -> str | None:
        """As xdist's, except for the work unit that was running when the
        worker died: xdist puts it back in the queue, so the next worker runs
        the same checkpoint and dies the same way until the restart limit ends
        the whole run. Here that checkpoint's unit is dropped (recorded in
        `lost`); the dead worker's other, unstarted units are rescheduled."""
        workload = self.assigned_work.pop(node)
        crashed = next(
            (
                (scope, nodeid)
                for scope, unit in workload.items()
                for nodeid, completed in unit.items()
                if not completed
            ),
            None,
        )
        if crashed is None:
            return None
        scope, crashitem = crashed
        unit = workload.pop(scope)
        name = scope.removeprefix("checkpoint:")
        self.lost[crashitem] = (name, [nodeid for nodeid, completed in unit.items() if not completed])
        self.workqueue.update({s: u for s, u in workload.items() if not all(u.values())})
        for other in self.assigned_work:
            self._reschedule(other)
        return crashitem

    def _split_scope(self, nodeid: str) -> str:
        if nodeid.rfind("@") > nodeid.rfind("]"):
            return super()._split_scope(nodeid)
        name = checkpoint_of(nodeid, self.checkpoint_names)
        return f"checkpoint:{name}" if name is not None else nodeid


def checkpoint_of(nodeid: str, names: Iterable[str]) -> str | None:
    """The checkpoint whose name is the test id, or a '-'-joined part of it."""
    if not nodeid.endswith("]") or "[" not in nodeid:
        return None
    param_id = nodeid[nodeid.index("[") + 1 : -1]
    for name in names:
        if (
            param_id == name
            or param_id.startswith(name + "-")
            or param_id.endswith("-" + name)
            or f"-{name}-" in param_id
        ):
            return name
    return None
