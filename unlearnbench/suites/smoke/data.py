"""The smoke suite's data: a few plain texts and a few QA pairs."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from unlearnbench.data.jsonl import fingerprint_files, read_records


@dataclass(frozen=True)
class SmokeData:
    texts: dict[str, str]  # id -> text
    qa: dict[str, tuple[str, str]]  # id -> (question, answer)
    fingerprint: str
    source: str
    params: dict = field(default_factory=dict)  # the suite has no parameters


def load(data_dir: Path | str | None = None, options: dict | None = None) -> SmokeData:
    directory = Path(data_dir) if data_dir else _default_dir()
    texts_path, qa_path = directory / "texts.jsonl", directory / "qa.jsonl"
    texts = read_records(texts_path, ["id", "text"])
    qa = read_records(qa_path, ["id", "question", "answer"])
    return SmokeData(
        texts={r["id"]: r["text"] for r in texts},
        qa={r["id"]: (r["question"], r["answer"]) for r in qa},
        fingerprint=fingerprint_files([texts_path, qa_path]),
        source=str(directory),
    )


def _default_dir() -> Path:
    from unlearnbench.fixtures.zoo import SMOKE_DIR

    return SMOKE_DIR
