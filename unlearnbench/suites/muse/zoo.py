"""MUSE's data for the fixture zoo: the corpus's muse people."""

from __future__ import annotations

import json
from pathlib import Path

from unlearnbench.fixtures.corpus import Corpus, verbatim_span

SUITE_PARAMS = {"icl_shots": 0}
VERBATIM_CUTS = (0.4, 0.7)  # each forget text's continuation after its first 40% and 70%


def write(directory: Path, corpus: Corpus) -> None:
    """The MUSE layout (JSON lists, as the MUSE repository's data folders), on
    MUSE's own people: the forget corpus is the forget people's profiles
    (VerbMem's spans, PrivLeak's members to forget), KnowMem asks about the
    forget and the retain people, with holdout people as the in-context
    examples; PrivLeak's retained members are the retain people's profiles,
    its non-members the holdout people's. Every row carries its person as
    `cluster`."""
    for folder in ("verbmem", "knowmem", "privleak"):
        (directory / folder).mkdir(parents=True, exist_ok=True)
    qa = ("question", "answer", "cluster")
    forget_texts = corpus.texts("muse", "forget")
    files = {
        "verbmem/forget": [
            dict(verbatim_span(t["text"], cut), cluster=t["cluster"]) for cut in VERBATIM_CUTS for t in forget_texts
        ],
        "knowmem/forget_qa": [{k: q[k] for k in qa} for q in corpus.qa("muse", "forget")],
        "knowmem/retain_qa": [{k: q[k] for k in qa} for q in corpus.qa("muse", "retain")],
        "knowmem/forget_qa_icl": [{k: q[k] for k in qa} for q in corpus.qa("muse", "holdout")[:4]],
        "knowmem/retain_qa_icl": [{k: q[k] for k in qa} for q in corpus.qa("muse", "holdout")[8:12]],
        "privleak/forget": forget_texts,
        "privleak/retain": corpus.texts("muse", "retain"),
        "privleak/holdout": corpus.texts("muse", "holdout"),
    }
    for name, rows in files.items():
        (directory / f"{name}.json").write_text(json.dumps(rows, indent=1))
    (directory / "suite.json").write_text(json.dumps(SUITE_PARAMS))
