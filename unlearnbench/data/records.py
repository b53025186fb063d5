"""The item types DUSK-format and MUSE-format data share: a question with its
gold answer, and a verbatim prompt with the text that should (not) follow."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class QAItem:
    id: str
    question: str
    answer: str


@dataclass(frozen=True)
class VerbatimItem:
    id: str
    prompt: str
    gt: str
