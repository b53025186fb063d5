"""UDS's data for the fixture zoo: the forget questions, the answer as the
entity whose log-probability patching moves."""

from __future__ import annotations

import json
from pathlib import Path

from unlearnbench.fixtures.corpus import Corpus


def write(directory: Path, corpus: Corpus) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    items = [
        {"idx": i, "question": q["question"], "answer": q["answer"], "prefix": "", "entity": q["answer"]}
        for i, q in enumerate(corpus.unique_forget_qa)
    ]
    (directory / "forget_items.json").write_text(json.dumps(items, indent=1))
