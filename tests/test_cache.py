"""The on-disk cache: hits, corruption recovery, concurrent writers."""

from __future__ import annotations

import multiprocessing

import numpy as np

from unlearnbench.cache import DiskCache, cache_key

PARTS = {"op": "suite:demo", "model": "abc", "data": "def", "version": 1, "params": {"k": 0.4}}


def test_second_call_hits_the_cache(tmp_path):
    calls = []
    cache = DiskCache(tmp_path)
    value = cache.get_or_compute(PARTS, lambda: calls.append(1) or {"x": np.arange(3)})
    again = DiskCache(tmp_path).get_or_compute(PARTS, lambda: calls.append(1) or None)
    assert calls == [1]
    np.testing.assert_array_equal(again["x"], value["x"])
    assert cache.stats.as_dict() == {"hits": 0, "misses": 1, "corrupt": 0}


def test_key_depends_on_every_part():
    for field, other in [("model", "abd"), ("data", "deg"), ("op", "x"), ("version", 2), ("params", {"k": 0.5})]:
        assert cache_key(PARTS) != cache_key(PARTS | {field: other})
    assert cache_key(PARTS) == cache_key(dict(reversed(list(PARTS.items()))))


def test_corrupted_entry_is_recomputed_not_trusted(tmp_path):
    cache = DiskCache(tmp_path)
    cache.get_or_compute(PARTS, lambda: "good")
    (entry,) = (tmp_path / "results").rglob("*.npz")
    blob = bytearray(entry.read_bytes())
    blob[-3] ^= 0xFF
    entry.write_bytes(bytes(blob))
    fresh = DiskCache(tmp_path)
    assert fresh.get_or_compute(PARTS, lambda: "recomputed") == "recomputed"
    assert fresh.stats.as_dict() == {"hits": 0, "misses": 1, "corrupt": 1}
    assert DiskCache(tmp_path).get_or_compute(PARTS, lambda: "again") == "recomputed"


def test_truncated_entry_is_recomputed(tmp_path):
    DiskCache(tmp_path).get_or_compute(PARTS, lambda: list(range(1000)))
    (entry,) = (tmp_path / "results").rglob("*.npz")
    entry.write_bytes(entry.read_bytes()[:50])
    cache = DiskCache(tmp_path)
    assert cache.get_or_compute(PARTS, lambda: "new") == "new" and cache.stats.corrupt == 1


def _worker(root, log, barrier):
    barrier.wait()

    def compute():
        with open(log, "a") as fh:
            fh.write("computed\n")
        return "value"

    return DiskCache(root).get_or_compute(PARTS, compute)


def test_concurrent_processes_compute_once(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    log = tmp_path / "log.txt"
    with ctx.Manager() as manager:
        barrier = manager.Barrier(3)
        with ctx.Pool(3) as pool:
            results = pool.starmap(_worker, [(tmp_path / "c", log, barrier)] * 3)
    assert results == ["value"] * 3
    assert log.read_text() == "computed\n"
