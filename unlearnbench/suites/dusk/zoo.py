"""DUSK's data for the fixture zoo: the corpus in AI-ISL/DUSK's layout (five
documents in five styles, the QA sets, ICL examples, verbatim prompts,
holdout text)."""

from __future__ import annotations

import json
from pathlib import Path

from unlearnbench.fixtures.corpus import STYLES, Corpus, jsonl

# What the zoo's models need: their answers are short, and the corpus's texts are short.
SUITE_PARAMS = {"icl_shots": 0, "mia_chunk_tokens": 64}


def write(directory: Path, corpus: Corpus) -> None:
    ev = directory / "eval"
    ev.mkdir(parents=True, exist_ok=True)
    for style in STYLES:
        (directory / f"{style}.txt").write_text("\n\n\n\n".join(corpus.documents[style]) + "\n")
    qa_keys = ("question", "answer")
    jsonl(ev / "SpecificForgetQA.jsonl", corpus.unique_forget_qa, qa_keys)
    jsonl(ev / "GeneralQA.jsonl", corpus.shared_qa, qa_keys)
    jsonl(ev / "SpecificRetainQA.jsonl", corpus.unique_retain_qa, qa_keys)
    jsonl(ev / "HoldoutQA.jsonl", corpus.holdout_qa, qa_keys)
    # ICL examples are about the holdout people: never the evaluated facts.
    jsonl(ev / "icl.jsonl", corpus.holdout_qa[:4], qa_keys)
    (ev / "verbatim.json").write_text(json.dumps(corpus.verbatim(), indent=1))
    (ev / "holdout.txt").write_text("\n\n\n\n".join(corpus.holdout_bios) + "\n")
    (directory / "suite.json").write_text(json.dumps(SUITE_PARAMS))
