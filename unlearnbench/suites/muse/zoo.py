"""MUSE's data for the fixture zoo."""

from __future__ import annotations

import json
from pathlib import Path

from unlearnbench.fixtures.corpus import FORGET_STYLE, N_SHARED, STYLES, Corpus, profile

SUITE_PARAMS = {"icl_shots": 0}


def write(directory: Path, corpus: Corpus) -> None:
    """The MUSE layout (JSON lists, as the MUSE repository's data folders):
    VerbMem on the forget document's spans; KnowMem on its own professors
    (forget) and the other documents' own ones (retain), with holdout
    professors as the in-context examples; PrivLeak texts are the forget
    document's own profiles (members to forget), the other documents' own
    profiles (members that stay) and the holdout professors' profiles in every
    style (never trained on). Shared profiles, in every document, are in none."""
    for folder in ("verbmem", "knowmem", "privleak"):
        (directory / folder).mkdir(parents=True, exist_ok=True)
    qa = ("question", "answer")
    files = {
        "verbmem/forget": corpus.verbatim(),
        "knowmem/forget_qa": [{k: q[k] for k in qa} for q in corpus.unique_forget_qa],
        "knowmem/retain_qa": [{k: q[k] for k in qa} for q in corpus.unique_retain_qa],
        "knowmem/forget_qa_icl": [{k: q[k] for k in qa} for q in corpus.holdout_qa[:4]],
        "knowmem/retain_qa_icl": [{k: q[k] for k in qa} for q in corpus.holdout_qa[4:8]],
        "privleak/forget": [{"text": t} for t in corpus.documents[FORGET_STYLE][N_SHARED:]],
        "privleak/retain": [{"text": t} for style in STYLES[1:] for t in corpus.documents[style][N_SHARED:]],
        "privleak/holdout": [{"text": profile(p, style)} for p in corpus.holdout for style in STYLES],
    }
    for name, rows in files.items():
        (directory / f"{name}.json").write_text(json.dumps(rows, indent=1))
    (directory / "suite.json").write_text(json.dumps(SUITE_PARAMS))
