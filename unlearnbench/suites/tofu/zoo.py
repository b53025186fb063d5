"""TOFU's data for the fixture zoo."""

from __future__ import annotations

import json
import random
from pathlib import Path

from unlearnbench.fixtures.corpus import (N_PERTURBED, PARAPHRASES, POOLS, REAL_AUTHOR_ATTRIBUTES, SEED, STYLES,
                                          Corpus, qa_pairs)

SUITE_PARAMS = {"max_new_tokens": 32}  # the zoo's answers are a few tokens


def tofu_items(rows: list[dict], seed: int, paraphrase: bool = True) -> list[dict]:
    """TOFU's perturbed layout for QA rows: the paraphrased answer and
    N_PERTURBED answers with other values of the attribute, in the same words."""
    rng = random.Random(seed)
    out = []
    for row in rows:
        template = PARAPHRASES[row["attribute"]]
        others = rng.sample([v for v in POOLS[row["attribute"]] if v != row["answer"]], N_PERTURBED)
        item = {"question": row["question"], "answer": row["answer"],
                "perturbed_answer": [template.format(v=v) if paraphrase else v for v in others]}
        if paraphrase:
            item["paraphrased_answer"] = template.format(v=row["answer"])
        out.append(item)
    return out


def write(directory: Path, corpus: Corpus) -> None:
    """The TOFU layout (JSON lines, as locuslab/TOFU's files): forget10 is the
    forget document's own professors, retain the other documents' own ones,
    holdout10 professors no model was trained on."""
    directory.mkdir(parents=True, exist_ok=True)
    retain = [q for style in STYLES[1:] for q in qa_pairs(corpus.unique[style], f"ur-{style}")]
    shared = corpus.shared_qa
    real = [q for q in shared if q["attribute"] in REAL_AUTHOR_ATTRIBUTES]
    world = [q for q in shared if q["attribute"] not in REAL_AUTHOR_ATTRIBUTES]
    files = {
        "forget10": [{"question": q["question"], "answer": q["answer"]} for q in corpus.unique_forget_qa],
        "forget10_perturbed": tofu_items(corpus.unique_forget_qa, SEED + 10),
        "retain_perturbed": tofu_items(retain, SEED + 11),
        "real_authors_perturbed": tofu_items(real, SEED + 12, paraphrase=False),
        "world_facts_perturbed": tofu_items(world, SEED + 13, paraphrase=False),
        "holdout10": [{"question": q["question"], "answer": q["answer"]} for q in corpus.holdout_qa],
    }
    for name, rows in files.items():
        (directory / f"{name}.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (directory / "suite.json").write_text(json.dumps(SUITE_PARAMS))
