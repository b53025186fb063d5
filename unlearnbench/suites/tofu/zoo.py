"""TOFU's data for the fixture zoo: the corpus's tofu people."""

from __future__ import annotations

import json
import random
from pathlib import Path

from unlearnbench.fixtures.corpus import N_PERTURBED, PARAPHRASES, POOLS, REAL_AUTHOR_ATTRIBUTES, SEED, Corpus

SUITE_PARAMS = {"max_new_tokens": 32}  # the zoo's answers are a few tokens


def tofu_items(rows: list[dict], seed: int, paraphrase: bool = True) -> list[dict]:
    """TOFU's perturbed layout for QA rows: the paraphrased answer and
    N_PERTURBED answers with other values of the attribute, in the same words."""
    rng = random.Random(seed)
    out = []
    for row in rows:
        template = PARAPHRASES[row["attribute"]]
        others = rng.sample([v for v in POOLS[row["attribute"]] if v != row["answer"]], N_PERTURBED)
        item = {
            "question": row["question"],
            "answer": row["answer"],
            "perturbed_answer": [template.format(v=v) if paraphrase else v for v in others],
            "cluster": row["cluster"],
        }
        if paraphrase:
            item["paraphrased_answer"] = template.format(v=row["answer"])
        out.append(item)
    return out


def write(directory: Path, corpus: Corpus) -> None:
    """The TOFU layout (JSON lines, as locuslab/TOFU's files), on TOFU's own
    people: forget10 and retain are the forget and retain people, the "real
    authors" and "world facts" two halves of the attributes of people every
    model learned, holdout10 people no model was trained on. Every row
    carries its person as `cluster`."""
    directory.mkdir(parents=True, exist_ok=True)
    forget, world = corpus.qa("tofu", "forget"), corpus.qa("tofu", "world")
    real = [q for q in world if q["attribute"] in REAL_AUTHOR_ATTRIBUTES]
    facts = [q for q in world if q["attribute"] not in REAL_AUTHOR_ATTRIBUTES]
    qa = ("question", "answer", "cluster")
    files = {
        "forget10": [{k: q[k] for k in qa} for q in forget],
        "forget10_perturbed": tofu_items(forget, SEED + 10),
        "retain_perturbed": tofu_items(corpus.qa("tofu", "retain"), SEED + 11),
        "real_authors_perturbed": tofu_items(real, SEED + 12, paraphrase=False),
        "world_facts_perturbed": tofu_items(facts, SEED + 13, paraphrase=False),
        "holdout10": [{k: q[k] for k in qa} for q in corpus.qa("tofu", "holdout")],
    }
    for name, rows in files.items():
        (directory / f"{name}.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (directory / "suite.json").write_text(json.dumps(SUITE_PARAMS))
