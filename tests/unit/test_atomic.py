"""Atomic writes: a reader sees the old file or the new one, and the new one
has the permissions a plain `open(path, "w")` would give it (a report or a
leaderboard site is read by others: a web server, a shared folder)."""

from __future__ import annotations

import os
import stat

from unlearnbench.atomic import atomic_write_text


def test_an_atomic_write_gets_the_permissions_of_a_plain_write(tmp_path):
    previous = os.umask(0o022)
    try:
        plain = tmp_path / "plain.txt"
        plain.write_text("x")
        atomic = tmp_path / "atomic.txt"
        atomic_write_text(atomic, "x")
        atomic_write_text(atomic, "y")  # replacing keeps it so
    finally:
        os.umask(previous)
    assert stat.S_IMODE(atomic.stat().st_mode) == stat.S_IMODE(plain.stat().st_mode) == 0o644
    assert atomic.read_text() == "y"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary left behind
