"""DUSK's data for the fixture zoo: the corpus's dusk people in AI-ISL/DUSK's
layout (five documents in five styles, the QA sets, ICL examples, verbatim
prompts, holdout text). Every QA row and verbatim span carries its person
as `cluster`."""

from __future__ import annotations

import json
from pathlib import Path

from unlearnbench.fixtures.corpus import STYLES, Corpus, jsonl

# What the zoo's models need: their answers are short, and the corpus's texts are short.
SUITE_PARAMS = {"icl_shots": 0, "mia_chunk_tokens": 64}
# Each forget-document profile is cut twice: the continuation after its first 40% and after its first 70%.
VERBATIM_CUTS = (0.4, 0.7)


def write(directory: Path, corpus: Corpus) -> None:
    ev = directory / "eval"
    ev.mkdir(parents=True, exist_ok=True)
    for style in STYLES:
        (directory / f"{style}.txt").write_text("\n\n\n\n".join(corpus.documents[style]) + "\n")
    qa_keys = ("question", "answer", "cluster")
    jsonl(ev / "SpecificForgetQA.jsonl", corpus.unique_forget_qa, qa_keys)
    jsonl(ev / "GeneralQA.jsonl", corpus.shared_qa, qa_keys)
    jsonl(ev / "SpecificRetainQA.jsonl", corpus.unique_retain_qa, qa_keys)
    jsonl(ev / "HoldoutQA.jsonl", corpus.holdout_qa, qa_keys)
    # ICL examples are about the holdout people: never the evaluated facts.
    jsonl(ev / "icl.jsonl", corpus.holdout_qa[:4], qa_keys)
    spans = [span for cut in VERBATIM_CUTS for span in corpus.verbatim(cut)]
    (ev / "verbatim.json").write_text(json.dumps(spans, indent=1))
    (ev / "holdout.txt").write_text("\n\n\n\n".join(corpus.holdout_bios) + "\n")
    (directory / "suite.json").write_text(json.dumps(SUITE_PARAMS))
