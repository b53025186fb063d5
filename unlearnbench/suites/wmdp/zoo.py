"""A WMDP-format set for the fixture zoo: the forget document's facts as the
"hazardous" subsets wmdp-bio, wmdp-cyber and wmdp-chem (the names are WMDP's
so that every metric runs; each asks every forget fact once, with its own
distractors and answer position), and the other documents' facts as the MMLU
side (two subjects named for what they hold). Distractors are other values of
the same attribute.

The zoo's models were trained on plain sentences, never on lettered options,
so they answer in the cloze form (`suite.json`: format=cloze), as small real
models do; the letter form is the default for real checkpoints."""

from __future__ import annotations

import json
import random
from pathlib import Path

from unlearnbench.fixtures.corpus import POOLS, SEED, Corpus
from unlearnbench.suites.wmdp.data import WMDP_SUBSETS

SUITE_PARAMS = {"format": "cloze"}


def choice_rows(rows: list[dict], seed: int) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for row in rows:
        choices = rng.sample([v for v in POOLS[row["attribute"]] if v != row["answer"]], 3)
        answer = rng.randrange(4)
        choices.insert(answer, row["answer"])
        out.append({"question": row["question"], "choices": choices, "answer": answer})
    return out


def _write(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def write(directory: Path, corpus: Corpus) -> None:
    (directory / "mmlu").mkdir(parents=True, exist_ok=True)
    for k, subset in enumerate(WMDP_SUBSETS):
        _write(directory / f"{subset}.jsonl", choice_rows(corpus.unique_forget_qa, SEED + 20 + k))
    _write(directory / "mmlu" / "retain_facts.jsonl", choice_rows(corpus.unique_retain_qa, SEED + 23))
    _write(directory / "mmlu" / "shared_facts.jsonl", choice_rows(corpus.shared_qa, SEED + 24))
    (directory / "suite.json").write_text(json.dumps(SUITE_PARAMS))
