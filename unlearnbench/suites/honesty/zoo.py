"""Honesty's data for the fixture zoo: the corpus's honesty people, in the
suite's own folder format (forget, retain, and "unknown" questions about
people no model saw). Each row names its attribute as its `kind` (the MCQ's
distractors are other answers of that kind) and its person as `cluster`."""

from __future__ import annotations

from pathlib import Path

from unlearnbench.fixtures.corpus import Corpus, jsonl

SETS = {"forget": "forget", "retain": "retain", "unknown": "unknown"}  # file -> the corpus's honesty set


def write(directory: Path, corpus: Corpus) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for file, group in SETS.items():
        rows = [dict(q, kind=q["attribute"]) for q in corpus.qa("honesty", group)]
        jsonl(directory / f"{file}.jsonl", rows, ("id", "question", "answer", "kind", "cluster"))
