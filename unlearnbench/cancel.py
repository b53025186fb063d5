"""Stopping work early: a run interrupted by Ctrl-C, a checkpoint past its deadline.

Work that can take long calls `check()` between its steps (each batch of a
forward pass, each endpoint request, each wait between retries), so the
first Ctrl-C ends the running evaluation at the next step rather than after
it, and a checkpoint past `--checkpoint-deadline` stops within one step.
Both raise a `Cancelled` error that names why; the session turns it into
failed checks with that reason, and the report is written as usual.

The state is per process (one evaluation runs at a time in a process; its
endpoint requests run in helper threads, which read the same state). Under
pytest-xdist the workers do not see Ctrl-C (the controller does): the
controller's interrupt also creates a file the workers watch (`share_through`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from unlearnbench.errors import UnlearnbenchError

_interrupted = threading.Event()
_deadline: tuple[float, str] | None = None  # (time.monotonic() it passes at, the reason to give then)
_shared: Path | None = None  # a file whose existence means "interrupted", shared with other processes
POLL_S = 0.2


class Cancelled(UnlearnbenchError):
    """Work stopped before it finished (interrupted, or past a deadline)."""


class Interrupted(Cancelled):
    pass


class DeadlineExceeded(Cancelled):
    pass


INTERRUPTED = "interrupted (Ctrl-C) before this finished"


def share_through(path: Path | None) -> None:
    """Interrupts of this process also create `path`; its existence interrupts this one."""
    global _shared
    _shared = path


def interrupt() -> None:
    _interrupted.set()
    if _shared is not None:
        _shared.touch()


def interrupted() -> bool:
    if not _interrupted.is_set() and _shared is not None and _shared.exists():
        _interrupted.set()
    return _interrupted.is_set()


@contextlib.contextmanager
def deadline(at: float | None, reason: str) -> Iterator[None]:
    """Within the block, work past `at` (time.monotonic()) raises DeadlineExceeded(reason)."""
    global _deadline
    previous, _deadline = _deadline, ((at, reason) if at is not None else None)
    try:
        yield
    finally:
        _deadline = previous


def check() -> None:
    if interrupted():
        raise Interrupted(INTERRUPTED)
    current = _deadline
    if current is not None and time.monotonic() >= current[0]:
        raise DeadlineExceeded(current[1])


def remaining() -> float | None:
    """Seconds until the deadline (None: no deadline)."""
    current = _deadline
    return None if current is None else max(0.0, current[0] - time.monotonic())


def sleep(seconds: float) -> None:
    """time.sleep that ends early on an interrupt or the deadline (and then raises)."""
    left = remaining()
    until = time.monotonic() + (seconds if left is None else min(seconds, left))
    while not interrupted() and (now := time.monotonic()) < until:
        _interrupted.wait(min(POLL_S, until - now))
    check()


def install_sigint_handler(message: str) -> None:
    """The first Ctrl-C (SIGINT) sets the interrupt and prints `message`; the
    second exits at once (status 130). Only from the main thread (where
    Python runs signal handlers); elsewhere Ctrl-C keeps its usual meaning."""
    if threading.current_thread() is not threading.main_thread():
        return

    def handle(_signum, _frame) -> None:
        if interrupted():
            sys.stderr.write("\nunlearnbench: second Ctrl-C: exiting now, without a report\n")
            sys.stderr.flush()
            os._exit(130)
        interrupt()
        sys.stderr.write(f"\nunlearnbench: {message}\n")
        sys.stderr.flush()

    signal.signal(signal.SIGINT, handle)
