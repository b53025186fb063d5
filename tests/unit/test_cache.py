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


# ------------------------------------------------------------ a shared cache under a key
SECRET = b"a-team-secret-of-32-bytes-or-so!"


def _forge(root, parts, value) -> None:
    """What anyone who can write the cache folder, without the key, can do:
    a well-formed entry with a valid plain checksum."""
    DiskCache(root).store(parts, value)


def test_without_a_key_a_forged_entry_is_trusted(tmp_path):
    # The trust boundary the README states: a shared folder's writers decide the results.
    _forge(tmp_path, PARTS, {"verdict": "forged pass"})
    assert DiskCache(tmp_path).get_or_compute(PARTS, lambda: {"verdict": "computed"}) == {"verdict": "forged pass"}


def test_under_a_key_a_forged_entry_is_recomputed_not_trusted(tmp_path):
    signed = DiskCache(tmp_path, secret=SECRET)
    assert signed.get_or_compute(PARTS, lambda: {"verdict": "computed"}) == {"verdict": "computed"}
    assert DiskCache(tmp_path, secret=SECRET).get_or_compute(PARTS, lambda: None) == {"verdict": "computed"}
    _forge(tmp_path, PARTS, {"verdict": "forged pass"})
    again = DiskCache(tmp_path, secret=SECRET)
    assert again.get_or_compute(PARTS, lambda: {"verdict": "computed"}) == {"verdict": "computed"}
    assert again.stats.as_dict() == {"hits": 0, "misses": 1, "corrupt": 1}
    other_key = DiskCache(tmp_path, secret=b"another-teams-secret-32-bytes-xx")
    assert other_key.lookup(PARTS) == (False, None)


def test_under_a_key_a_forged_fingerprint_memo_is_not_trusted(tmp_path):
    import hashlib
    import json

    from unlearnbench.models.checkpoint import fingerprint

    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"new weights")
    memo = tmp_path / "fingerprints.json"
    honest = fingerprint((weights,), memo, secret=SECRET)
    # Someone maps the new weights' (path, size, mtime) to an old checkpoint's digest.
    forged = {key: hashlib.sha256(b"old weights").hexdigest() for key in json.loads(memo.read_text())}
    memo.write_text(json.dumps(forged))
    assert fingerprint((weights,), memo) != honest  # without a key the memo is trusted
    assert fingerprint((weights,), memo, secret=SECRET) == honest


def test_the_cache_key_file_is_checked_at_the_start(tmp_path, warm_python):
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    short = tmp_path / "short.key"
    short.write_text("abc\n")
    for path, problem in [(tmp_path / "missing.key", "cannot read it"), (short, "at least 16 bytes")]:
        run = warm_python.run(["-m", "pytest", "suites/smoke", "-p", "no:cacheprovider", "-q",
                               "--cache-dir", str(tmp_path / "cache"), "--cache-key-file", str(path)],
                              cwd=root, timeout=300)
        output = run.stdout + run.stderr
        assert run.returncode == 4 and f"--cache-key-file {path}" in output and problem in output, output
