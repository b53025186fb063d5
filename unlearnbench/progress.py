"""Progress lines for long steps (model loading, generation, scoring, patching).

One line when a step starts and one when it ends, written to the process's
real stderr: readable under xdist (each line carries the worker id) and not
swallowed by pytest's output capture. Off unless a suite run turns it on
(the plugin does, unless --no-progress); library use stays silent.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from typing import Iterator

_enabled = False


def enable(on: bool = True) -> None:
    global _enabled
    _enabled = on


@contextlib.contextmanager
def step(what: str) -> Iterator[None]:
    if not _enabled:
        yield
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    stream = sys.__stderr__
    stream.write(f"[unlearnbench {worker}] {what} ...\n")
    stream.flush()
    started = time.perf_counter()
    yield
    stream.write(f"[unlearnbench {worker}] {what}: done in {time.perf_counter() - started:.1f} s\n")
    stream.flush()
