"""ConceptGuard's data for the fixture zoo: the corpus's dual-use concept pairs."""

from __future__ import annotations

from pathlib import Path

from unlearnbench.fixtures.corpus import Corpus, jsonl
from unlearnbench.suites.conceptguard.data import FIELDS


def write(directory: Path, corpus: Corpus) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    jsonl(directory / "pairs.jsonl", corpus.concept_pairs(), FIELDS)
