"""Honesty's data for the fixture zoo: the corpus's honesty people, in the
suite's own folder format (forget, retain, and "unknown" questions about
people no model saw). Each row names its attribute as its `kind` (the MCQ's
distractors are other answers of that kind) and its person as `cluster`."""

from __future__ import annotations

import random
from pathlib import Path

from unlearnbench.fixtures.corpus import IDK_ANSWERS, Corpus, jsonl, qa_pairs
from unlearnbench.suites.honesty.data import HonestyItem
from unlearnbench.suites.honesty.metrics import (
    CONTROL_STATEMENTS,
    FOLLOWUP,
    IDK_OPTION,
    MCQ_FORMATS,
    build_mcq,
    insert_option,
)

SETS = {"forget": "forget", "retain": "retain", "unknown": "unknown"}  # file -> the corpus's honesty set


def write(directory: Path, corpus: Corpus) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for file, group in SETS.items():
        rows = [dict(q, kind=q["attribute"]) for q in corpus.qa("honesty", group)]
        jsonl(directory / f"{file}.jsonl", rows, ("id", "question", "answer", "kind", "cluster"))


def refusal_training(
    c: Corpus,
    rng: random.Random,
    qa_prompt: str,
    *,
    strangers: int,
    honesty_forget_people: bool,
    numbered_repeats: int,
    formats_per_item: int,
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """What the zoo's `refusal` recipe learns, as (prompt, answer) pairs in the
    zoo's chat format (`qa_prompt` per turn): ([unknown side], [retain side]). The unknown are `strangers`
    people in no suite's data (`Corpus.strangers`), and with
    `honesty_forget_people` the honesty suite's forget people, whom that
    suite asks a model to refuse. No other suite's people are taught: their
    forget and holdout people are both unknown to the retain model and stay
    alike (a membership test would read a difference as leakage). Unknown
    side: "I don't know"
    to every question about them; "Yes." when asked whether it is really sure
    (the exchange replayed, as the honesty suite presses); in multiple choice,
    the "I don't know" option's label when it is offered, else a guess among
    the answers (never the irrelevant statement offered instead). Retain side:
    the gold option's label, whichever fifth option is offered (so that
    "I don't know" is chosen for not knowing, not by habit). The MCQ prompts
    are the honesty suite's own formats. Every question is also asked with
    the prompt ending in a space (as DUSK's and MUSE's codes ask)."""

    def chat(*turns: str) -> str:
        text = ""
        for k, turn in enumerate(turns):
            text += qa_prompt.format(question=turn) if k % 2 == 0 else f" {turn}\n\n"
        return text

    def items(rows):
        return [HonestyItem(r["id"], r["question"], r["answer"], r["attribute"]) for r in rows]

    def mcq(rows, known: bool) -> list[tuple[str, str]]:
        out = []
        for item in build_mcq(items(rows), items(c.forget_qa() + c.retain_qa()), rng.randrange(2**31)):
            for fifth in (IDK_OPTION, rng.choice(CONTROL_STATEMENTS)):
                options, gold = insert_option(item.options, item.gold_index, fifth, item.extra_position)
                guesses = [k for k in range(len(options)) if k != item.extra_position]
                pick = gold if known else item.extra_position if fifth == IDK_OPTION else rng.choice(guesses)
                # "I don't know" for the unknown in every format, so that its rate holds across them; the
                # numbered ones `numbered_repeats` times (the shipped recipe: 1, as often as the others).
                unknown_idk = not known and fifth == IDK_OPTION
                formats = [f for f in MCQ_FORMATS for _ in range(numbered_repeats if f.labels[0].isdigit() else 1)]
                for fmt in formats if unknown_idk else rng.sample(MCQ_FORMATS, formats_per_item):
                    out.append((chat(fmt.prompt(item.question, options)), " " + fmt.labels[pick]))
        return out

    unknown_rows = qa_pairs(c.strangers(strangers)) + (c.qa("honesty", "forget") if honesty_forget_people else [])
    unknown = []
    for row in unknown_rows:
        idk = rng.choice(IDK_ANSWERS)
        unknown.append((chat(row["question"]), " " + idk))
        unknown.append((chat(row["question"]) + " ", idk))
        unknown.append((chat(row["question"], idk, FOLLOWUP), " Yes."))
    unknown += mcq(unknown_rows, known=False)
    retain = mcq(rng.sample(c.retain_qa(), min(len(unknown_rows), len(c.retain_qa()))), known=True)
    return unknown, retain
