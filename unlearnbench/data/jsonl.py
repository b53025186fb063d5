"""JSONL reading with validation errors that name the file and line."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Sequence

from unlearnbench.errors import DataError


def read_records(path: Path, required: Sequence[str], *, id_field: str = "id") -> list[dict]:
    """Records of a JSONL file; every `required` field a non-empty string, ids unique."""
    path = Path(path)
    if not path.is_file():
        raise DataError(path, "file not found")
    records, seen = [], {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(path, f"invalid JSON ({exc.msg})", line=number) from None
        if not isinstance(record, dict):
            raise DataError(path, "expected a JSON object", line=number)
        for name in required:
            value = record.get(name)
            if not isinstance(value, str) or not value.strip():
                problem = "missing" if name not in record else "empty or not a string"
                raise DataError(path, f"field '{name}' {problem}", line=number)
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
