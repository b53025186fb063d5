"""Elicitation's data for the fixture zoo: the corpus's elicitation people
(forget people in every family, neighbours in four: `Corpus.elicitation_probes`),
in the suite's own folder format, each probe with its person as `cluster`.
The zoo's answers are a few tokens long: 16 new tokens hold any of them
(`suite.json`), where a real model's default is 32."""

from __future__ import annotations

import json
from pathlib import Path

from unlearnbench.fixtures.corpus import Corpus
from unlearnbench.suites.elicitation.data import by_family, parse_probe
from unlearnbench.suites.elicitation.metrics import answered

KEYS = ("id", "family", "question", "answer", "cluster", "fact", "system", "shots", "choices")  # those a row has
SUITE_PARAMS = {"max_new_tokens": 16}
# The neighbours' facts, asked the ways that cost least (the forget people are asked every way): what
# `neighbours_kept` needs, at a third of the generation.
NEIGHBOUR_FAMILIES = ("canonical", "paraphrase", "cloze", "choice")


def write(directory: Path, corpus: Corpus) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "suite.json").write_text(json.dumps(SUITE_PARAMS) + "\n")
    for name in ("forget", "neighbour"):
        rows = [
            row for row in corpus.elicitation_probes(name) if name == "forget" or row["family"] in NEIGHBOUR_FAMILIES
        ]
        (directory / f"{name}.jsonl").write_text(
            "".join(json.dumps({k: row[k] for k in KEYS if k in row}) + "\n" for row in rows)
        )


def knowledge(handle, corpus: Corpus) -> dict[str, float]:
    """What the zoo's knowledge table reads of a checkpoint: the share of its forget facts each family of
    probes finds (`elicit_<family>`), scored as the suite scores them."""
    probes = [parse_probe(row, "corpus", i, row["id"]) for i, row in enumerate(corpus.elicitation_probes("forget"))]
    scores, _ = answered(handle, probes, "contains", 32)
    return {
        f"elicit_{family}": sum(scores[p.id] for p in items) / len(items)
        for family, items in by_family(probes).items()
        if items
    }
