"""JSONL reading with validation errors that name the file and line."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from unlearnbench.errors import DataError


def json_objects(path: Path) -> Iterator[tuple[int, dict]]:
    """(line number, object) of each non-blank line of a JSONL file; a missing
    file, invalid JSON or a line that is not an object is a DataError."""
    path = Path(path)
    if not path.is_file():
        raise DataError(path, "file not found")
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(path, f"invalid JSON ({exc.msg})", line=number) from None
        if not isinstance(record, dict):
            raise DataError(path, "expected a JSON object", line=number)
        yield number, record


def read_records(path: Path, required: Sequence[str], *, id_field: str = "id", lists: Sequence[str] = ()) -> list[dict]:
    """Records of a JSONL file; every `required` field a non-empty string,
    every `lists` field a non-empty list of them, ids unique."""
    records: list[dict] = []
    seen: dict[object, int] = {}
    for number, record in json_objects(path):
        for name in required:
            value = record.get(name)
            if not isinstance(value, str) or not value.strip():
                problem = "missing" if name not in record else "empty or not a string"
                raise DataError(path, f"field '{name}' {problem}", line=number)
        for name in lists:
            value = record.get(name)
            if not (isinstance(value, list) and value and all(isinstance(v, str) and v.strip() for v in value)):
                raise DataError(path, f"field '{name}' missing, empty or not a list of strings", line=number)
        if id_field in required:
            if record[id_field] in seen:
                raise DataError(
                    path, f"duplicate id '{record[id_field]}' (first on line {seen[record[id_field]]})", line=number
                )
            seen[record[id_field]] = number
        records.append(record)
    if not records:
        raise DataError(path, "no records")
    return records


def fingerprint_files(paths: Sequence[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(Path(path).name.encode() + b"\0" + Path(path).read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def params_digest(params: dict) -> str:
    """A short digest of a suite's parameters, for data fingerprints."""
    return hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:8]


def read_json_list(path: Path, what: str) -> list:
    """A JSON file holding a non-empty list (of `what`)."""
    path = Path(path)
    if not path.is_file():
        raise DataError(path, "file not found")
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataError(path, f"invalid JSON ({exc.msg})", line=exc.lineno) from None
    if not isinstance(rows, list) or not rows:
        raise DataError(path, f"expected a non-empty JSON list of {what}")
    return rows


@dataclass(frozen=True)
class Range:
    """The values a numeric suite parameter accepts: [low, high], or (low, high]
    with `low_open`; `meaning` says what a special value means ("0 = all items")."""

    low: float
    high: float | None = None
    low_open: bool = False
    meaning: str = ""

    def contains(self, value: float) -> bool:
        if not math.isfinite(value):
            return False
        above = value > self.low if self.low_open else value >= self.low
        return above and (self.high is None or value <= self.high)

    def describe(self, kind: type) -> str:
        what = "an integer" if kind is int else "a number"
        if self.high is None:
            bound = f"{'>' if self.low_open else '>='} {self.low:g}"
        else:
            bound = f"in {'(' if self.low_open else '['}{self.low:g}, {self.high:g}]"
        return f"{what} {bound}" + (f" ({self.meaning})" if self.meaning else "")


COUNT = Range(1)  # token counts, steps, ranks
COUNT_OR_ALL = Range(0, meaning="0 = all items")  # item limits
PROPORTION = Range(0, 1, low_open=True)  # Min-K%'s k


def merge_params(
    defaults: dict, layers: Sequence[tuple[str, dict]], source: object, suite: str, ranges: dict[str, Range]
) -> dict:
    """Suite parameters: `defaults`, overridden by each (origin, values) layer
    in turn; unknown keys, values of the wrong type and numbers outside their
    `ranges` (every numeric parameter has one) are errors."""
    unbounded = [k for k, v in defaults.items() if isinstance(v, (int, float)) and k not in ranges]
    if unbounded:
        raise TypeError(f"{suite}: numeric parameters without a range: {', '.join(unbounded)}")
    params = dict(defaults)
    for origin, values in layers:
        for key, value in values.items():
            if key not in defaults:
                raise DataError(source, f"{origin}: unknown {suite} parameter '{key}' (known: {', '.join(defaults)})")
            kind = type(defaults[key])
            try:
                params[key] = kind(value)
            except (TypeError, ValueError):
                what = ranges[key].describe(kind) if key in ranges else kind.__name__
                raise DataError(source, f"{origin}: '{key}' must be {what}, not {value!r}") from None
            if key in ranges and not ranges[key].contains(params[key]):
                raise DataError(source, f"{origin}: '{key}' must be {ranges[key].describe(kind)}, not {value!r}")
    return params


def suite_params(folder: Path) -> dict:
    """The parameters a data folder sets for its suite (`suite.json`), or none."""
    path = Path(folder) / "suite.json"
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise DataError(path, f"invalid JSON ({exc.msg})", line=exc.lineno) from None


def hf_snapshot(source: str, patterns: Sequence[str]) -> Path:
    """A local snapshot folder of an HF dataset: a path, or a Hub id resolved
    through the local HF cache (fetched only when the environment allows it)."""
    if Path(source).is_dir():
        return Path(source)
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(source, repo_type="dataset", allow_patterns=list(patterns)))
    except Exception as exc:  # noqa: BLE001 - any hub failure becomes one message
        raise DataError(
            f"hf:{source}", f"not a local folder and not resolvable as a dataset id ({type(exc).__name__}: {exc})"
        ) from None


def suite_folder(source: str | Path, suite: str, patterns: Sequence[str], what: str) -> Path:
    """The folder holding a suite's data: a path, or `hf:ID` from the local HF
    cache (`patterns`: the files it needs); a folder with the suite's own
    subfolder (the zoo's data folder holds every suite's) gives that."""
    where = str(source)
    root = hf_snapshot(where[3:], patterns) if where.startswith("hf:") else Path(where)
    if (root / suite).is_dir():
        root = root / suite
    if not root.is_dir():
        raise DataError(root, f"{what} data directory not found")
    return root


def parquet_rows(
    root: Path, pattern: str, columns: tuple[str, ...], where: str, optional: tuple[str, ...] = ("cluster",)
) -> list[dict]:
    """The rows (`columns`, and those of `optional` a file has: an item's
    cluster) of the parquet files matching `pattern` under `root`."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise DataError(where, "reading the HF dataset needs pyarrow (pip install 'unlearnbench[hf]')") from None
    files = sorted(root.glob(pattern))
    if not files:
        raise DataError(root / pattern, "no such parquet file in the dataset snapshot")
    rows = []
    for path in files:
        table = pq.read_table(path)
        missing = set(columns) - set(table.column_names)
        if missing:
            raise DataError(
                path, f"missing column(s) {', '.join(sorted(missing))} (has: {', '.join(table.column_names)})"
            )
        rows.extend(table.select([*columns, *(c for c in optional if c in table.column_names)]).to_pylist())
    if not rows:
        raise DataError(root / pattern, "no rows")
    return rows
