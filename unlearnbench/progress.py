"""Progress lines for long steps (model loading, generation, scoring, patching).

One line per step, when it ends, with its duration (on a terminal the step's
name shows while it runs and the line is completed in place). Lines go to a
duplicate of the process's stderr taken when the plugin is imported, before
pytest starts capturing: so they show under pytest's default capture (and
are not replayed inside failure reports), and under xdist each line carries
the worker id. Off unless a suite run turns it on (the plugin does, unless
--no-progress); library use stays silent.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import TextIO

_enabled = False
_terminal: TextIO | None = None
# How far pytest's own output line (its progress dots) has got: a progress line
# after new dots starts on a new line rather than after them (set by the plugin).
_line_width: Callable[[], int] = lambda: 0  # noqa: E731
_broken_at = 0  # the line width at which a progress line last started a new line


def keep_terminal() -> None:
    """Duplicate fd 2 now, before pytest's capture replaces it (plugin import time)."""
    global _terminal
    if _terminal is not None:
        return
    try:
        _terminal = os.fdopen(os.dup(2), "w", buffering=1, encoding="utf-8", errors="replace")
    except OSError:  # no stderr at all (a daemon): progress goes nowhere rather than failing
        _terminal = None


def enable(on: bool = True, line_width: Callable[[], int] | None = None) -> None:
    global _enabled, _line_width
    _enabled = on
    if line_width is not None:
        _line_width = line_width


def _stream() -> TextIO | None:
    return _terminal or sys.__stderr__


def note(text: str) -> None:
    """One line that is not a step (the power preflight's warnings)."""
    global _broken_at
    stream = _stream() if _enabled else None
    if stream is None:
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    width = _line_width() if worker is None else 0
    if width and width != _broken_at:
        stream.write("\n")
        _broken_at = width
    stream.write(f"[unlearnbench{' ' + worker if worker else ''}] {text}\n")
    stream.flush()


@contextlib.contextmanager
def step(what: str) -> Iterator[None]:
    global _broken_at
    stream = _stream() if _enabled else None
    if stream is None:
        yield
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    prefix = f"[unlearnbench{' ' + worker if worker else ''}] "
    in_place = worker is None and stream.isatty()
    width = _line_width() if worker is None else 0
    if width and width != _broken_at:
        stream.write("\n")
        _broken_at = width
    if in_place:
        stream.write(f"\r\x1b[K{prefix}{what} ...")
        stream.flush()
    started = time.perf_counter()
    try:
        yield
    finally:
        end = "\r\x1b[K" if in_place else ""
        stream.write(f"{end}{prefix}{what}: {time.perf_counter() - started:.1f} s\n")
        stream.flush()
