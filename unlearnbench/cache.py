"""Content-addressed on-disk cache for reference-model work.

Key = sha256 of the canonical JSON of (model fingerprint, data fingerprint,
operation, parameters, metric-code version). Entries are written atomically
(temp file + rename) and carry a checksum of their payload; an entry that does
not verify is recomputed and overwritten, never trusted. Concurrent pytest-xdist
workers asking for the same key wait on a per-key `flock`, so the work is done
once and the others read it.

Whoever can write the cache folder decides what it holds: an entry's
checksum finds corruption, not forgery. With a secret (`--cache-key-file`),
each entry carries an HMAC-SHA256 of its payload under that secret instead,
and an entry that does not verify under it (written without the key, with
another key, or altered) is recomputed and overwritten, never trusted.

An entry holds data only, never code: JSON for the structure and `.npy`
arrays, together in one `.npz` read with `allow_pickle=False`, so a cache
directory on a shared file system is not a way to run code in someone else's
evaluation (a pickle would be).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import io
import json
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from unlearnbench.atomic import atomic_write_bytes

MAGIC = b"UNLEARNBENCH-CACHE-2\n"
DEFAULT_CACHE_DIR = Path(os.environ.get("UNLEARNBENCH_CACHE_DIR", "~/.cache/unlearnbench")).expanduser()
CACHE_KEY_VARIABLE = "UNLEARNBENCH_CACHE_KEY_FILE"  # the default of --cache-key-file
MIN_SECRET_BYTES = 16


def read_secret(path: Path | str) -> bytes:
    """The cache secret in `path` (surrounding whitespace dropped)."""
    from unlearnbench.errors import UnlearnbenchError

    try:
        secret = Path(path).expanduser().read_bytes().strip()
    except OSError as exc:
        raise UnlearnbenchError(f"--cache-key-file {path}: cannot read it ({exc.strerror or exc})") from None
    if len(secret) < MIN_SECRET_BYTES:
        raise UnlearnbenchError(
            f"--cache-key-file {path}: the key must be at least {MIN_SECRET_BYTES} bytes "
            f"(it has {len(secret)}); e.g. `openssl rand -hex 32 > {path}`"
        )
    return secret


def payload_tag(payload: bytes, secret: bytes | None) -> str:
    """sha256 of `payload`, or its HMAC-SHA256 under `secret`."""
    if secret is None:
        return hashlib.sha256(payload).hexdigest()
    return hmac.new(secret, payload, hashlib.sha256).hexdigest()


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    corrupt: int = 0

    def as_dict(self) -> dict:
        return {"hits": self.hits, "misses": self.misses, "corrupt": self.corrupt}


def cache_key(parts: dict) -> str:
    canonical = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Exclusive advisory lock held for the duration of the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


class DiskCache:
    def __init__(self, root: Path | str = DEFAULT_CACHE_DIR, *, secret: bytes | None = None):
        self.root = Path(root).expanduser()
        self.secret = secret
        self.stats = CacheStats()

    def _path(self, key: str) -> Path:
        return self.root / "results" / key[:2] / f"{key}.npz"

    def get_or_compute(self, parts: dict, compute: Callable[[], Any]) -> Any:
        """The cached value for `parts`, computing and storing it on a miss."""
        path = self._path(cache_key(parts))
        found, value = self._read(path, count_corrupt=False)
        if found:
            self.stats.hits += 1
            return value
        with file_lock(path.with_suffix(".lock")):
            found, value = self._read(path)  # another worker may have finished it
            if found:
                self.stats.hits += 1
                return value
            self.stats.misses += 1
            value = compute()
            self._write(path, parts, value)
        return value

    def lookup(self, parts: dict) -> tuple[bool, Any]:
        """(found, value) without computing: for callers that batch their misses."""
        found, value = self._read(self._path(cache_key(parts)))
        if found:
            self.stats.hits += 1
        else:
            self.stats.misses += 1
        return found, value

    def store(self, parts: dict, value: Any) -> None:
        self._write(self._path(cache_key(parts)), parts, value)

    def _write(self, path: Path, parts: dict, value: Any) -> None:
        arrays: dict[str, np.ndarray] = {}
        structure = json.dumps({"parts": parts, "value": _encode(value, arrays)}, default=str)
        buffer = io.BytesIO()
        np.savez(buffer, __json__=np.frombuffer(structure.encode(), dtype=np.uint8), **arrays)  # type: ignore[arg-type]  # numpy's stub types **kwds as its bool flag
        payload = buffer.getvalue()
        atomic_write_bytes(path, MAGIC + payload_tag(payload, self.secret).encode() + b"\n" + payload)

    def _read(self, path: Path, count_corrupt: bool = True) -> tuple[bool, Any]:
        try:
            blob = path.read_bytes()
        except FileNotFoundError:
            return False, None
        header_len = len(MAGIC) + 65
        digest, payload = blob[len(MAGIC) : header_len - 1], blob[header_len:]
        try:
            if not blob.startswith(MAGIC) or not hmac.compare_digest(
                payload_tag(payload, self.secret).encode(), digest
            ):
                raise ValueError("checksum mismatch (corrupt, or not written under this run's key)")
            with np.load(io.BytesIO(payload), allow_pickle=False) as stored:
                arrays = {name: stored[name] for name in stored.files}
            return True, _decode(json.loads(arrays.pop("__json__").tobytes())["value"], arrays)
        except Exception:  # noqa: BLE001 - anything unreadable is corrupt: recompute
            self.stats.corrupt += count_corrupt
            return False, None


def _encode(value: Any, arrays: dict[str, np.ndarray]) -> Any:
    """`value` as JSON, arrays moved into `arrays` (tagged objects keep tuples,
    arrays and non-string keys); anything else is refused, never pickled."""
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            raise TypeError("cannot cache an object array")
        name = f"a{len(arrays)}"
        arrays[name] = value
        return {"__ndarray__": name}
    if isinstance(value, np.generic):
        return value.item()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, tuple):
        return {"__tuple__": [_encode(v, arrays) for v in value]}
    if isinstance(value, list):
        return [_encode(v, arrays) for v in value]
    if isinstance(value, dict):
        if all(isinstance(k, str) and not k.startswith("__") for k in value):
            return {k: _encode(v, arrays) for k, v in value.items()}
        return {"__items__": [[_encode(k, arrays), _encode(v, arrays)] for k, v in value.items()]}
    raise TypeError(f"cannot cache a {type(value).__name__}: only JSON values, tuples and numeric arrays")


def _decode(value: Any, arrays: dict[str, np.ndarray]) -> Any:
    if isinstance(value, list):
        return [_decode(v, arrays) for v in value]
    if not isinstance(value, dict):
        return value
    if "__ndarray__" in value:
        return arrays[value["__ndarray__"]]
    if "__tuple__" in value:
        return tuple(_decode(v, arrays) for v in value["__tuple__"])
    if "__items__" in value:
        return {_decode(k, arrays): _decode(v, arrays) for k, v in value["__items__"]}
    return {k: _decode(v, arrays) for k, v in value.items()}


class SuiteMemo:
    """`metrics.core.ReferenceMemo` on the disk cache, for one suite's data:
    the one place reference-model work gets its cache key (the suite, its
    data key (files and resolved parameters: `SuiteDataStore.data_key`), the suite's code version, each model's fingerprint and
    dtype, and the work's own params)."""

    def __init__(self, disk: DiskCache, suite: str, data_fingerprint: str, version: int):
        self.disk, self.suite, self.data, self.version = disk, suite, data_fingerprint, version

    def _parts(self, op: str, models: Mapping[str, Any], params: dict) -> dict:
        return {
            "op": f"{self.suite}:{op}",
            "data": self.data,
            "version": self.version,
            "models": {role: [m.fingerprint, str(m.dtype)] for role, m in sorted(models.items())},
            "params": params,
        }

    def get_or_compute(self, op: str, models: Mapping[str, Any], params: dict, compute: Callable[[], Any]) -> Any:
        return self.disk.get_or_compute(self._parts(op, models, params), compute)

    def lookup(self, op: str, params: dict) -> tuple[bool, Any]:
        return self.disk.lookup(self._parts(op, {}, params))

    def store(self, op: str, params: dict, value: Any) -> None:
        self.disk.store(self._parts(op, {}, params), value)
