"""A WMDP-format set for the fixture zoo, on the corpus's wmdp people: the
forget people's facts as the "hazardous" subsets wmdp-bio, wmdp-cyber and
wmdp-chem (the names are WMDP's so that every metric runs; each subset asks
about its own people, with its own distractors and answer positions), and
the retain people's facts as the MMLU side (two subjects, half of the people
each). Distractors are other values of the same attribute; every row carries
its person as `cluster`.

The zoo's models were trained on plain sentences, never on lettered options,
so they answer in the cloze form (`suite.json`: format=cloze), as small real
models do; the letter form is the default for real checkpoints. Their
pretraining also asks these people's questions under the task's description
(`exam_qa`), as a real model has read exam pages: without it, the unseen
description line alone costs the zoo a third of what it knows."""

from __future__ import annotations

import json
import random
from pathlib import Path

from unlearnbench.fixtures.corpus import SEED, Corpus, Person, qa_pairs
from unlearnbench.suites.wmdp.data import WMDP_SUBSETS, ChoiceItem
from unlearnbench.suites.wmdp.metrics import context

SUITE_PARAMS = {"format": "cloze"}


def choice_rows(rows: list[dict], seed: int, familiar: dict[str, list[str]]) -> list[dict]:
    """Four-option rows: the gold answer and three values of the same attribute
    that belong to people every zoo model learned (`familiar`), as WMDP's
    distractors are real, plausible answers: a model that does not know the
    answer prefers a value it has seen, not the one it never did."""
    rng = random.Random(seed)
    out = []
    for row in rows:
        choices = rng.sample([v for v in familiar[row["attribute"]] if v != row["answer"]], 3)
        answer = rng.randrange(4)
        choices.insert(answer, row["answer"])
        out.append({"question": row["question"], "choices": choices, "answer": answer, "cluster": row["cluster"]})
    return out


def _write(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _split(people: list, parts: int) -> list[list]:
    """`people` in `parts` consecutive runs of (nearly) equal length."""
    bounds = [round(k * len(people) / parts) for k in range(parts + 1)]
    return [people[bounds[k] : bounds[k + 1]] for k in range(parts)]


def subsets(corpus: Corpus) -> dict[str, list[Person]]:
    """Each WMDP subset's and MMLU subject's people."""
    hazardous = _split(corpus.group("wmdp", "forget"), len(WMDP_SUBSETS))
    mmlu = _split(corpus.group("wmdp", "retain"), 2)
    return dict(zip(WMDP_SUBSETS, hazardous)) | {f"biographies_{k + 1}": people for k, people in enumerate(mmlu)}


def exam_qa(corpus: Corpus) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(prompt, " " + answer) pairs of every person's questions as the cloze
    form asks them, description line included: ([hazardous], [MMLU])."""
    hazardous: list[tuple[str, str]] = []
    mmlu: list[tuple[str, str]] = []
    for subset, people in subsets(corpus).items():
        for row in qa_pairs(people):
            item = ChoiceItem(row["id"], subset, row["question"], (row["answer"],), 0)
            (hazardous if subset in WMDP_SUBSETS else mmlu).append((context(item, "cloze"), " " + row["answer"]))
    return hazardous, mmlu


def write(directory: Path, corpus: Corpus) -> None:
    (directory / "mmlu").mkdir(parents=True, exist_ok=True)
    familiar: dict[str, list[str]] = {}
    for row in corpus.retain_qa():
        if not row["cluster"].startswith("wmdp-"):
            familiar.setdefault(row["attribute"], []).append(row["answer"])
    familiar = {attribute: sorted(set(values)) for attribute, values in familiar.items()}
    for k, (subset, people) in enumerate(subsets(corpus).items()):
        path = directory / f"{subset}.jsonl" if subset in WMDP_SUBSETS else directory / "mmlu" / f"{subset}.jsonl"
        _write(path, choice_rows(qa_pairs(people), SEED + 20 + k, familiar))
    (directory / "suite.json").write_text(json.dumps(SUITE_PARAMS))
