"""A backend written from scratch against the model protocol alone: a
word-bigram language model in plain Python and numpy (no torch, no
transformers, nothing of unlearnbench.models but the protocol's types).

It exists to prove the protocol closed: a stranger who implements exactly
`unlearnbench.models.interface.LanguageModel` can run every suite that does
not need weights. `bigram:RECIPE` trains, in well under a second, on a zoo
recipe's training texts (`full`: forget + retain, `retain`: retain only,
`smoke`: the smoke corpus), so `bigram:full` knows the forget facts' word
pairs and `bigram:retain` does not. Registered by the tests through an
entry point (`unlearnbench.backends`), as a third-party package would.
"""

from __future__ import annotations

import hashlib
import json
import re
from functools import lru_cache
from typing import Collection, Sequence

import numpy as np

from unlearnbench.backends import Backend
from unlearnbench.errors import CheckpointError
from unlearnbench.models.interface import Generation, NextToken, TokenScores, cut_at_stop

PREFIX = "bigram:"
RECIPES = ("full", "retain", "smoke")
# A word with the whitespace before it (as a byte-level BPE reads " Paris"), or one other character.
PIECE = re.compile(r"\s*\w+|\s+|.", re.DOTALL)
SPECIALS = ("<bos>", "<eos>", "<unk>")
BOS, EOS, UNK = 0, 1, 2
SMOOTHING = 0.01  # add-k counts: every pair has some probability


def _training_texts(recipe: str) -> list[str]:
    from unlearnbench.fixtures import zoo

    parts = zoo._training_texts("smoke" if recipe == "smoke" else "overlap")
    kinds = ("retain",) if recipe in ("retain", "smoke") else ("forget", "retain")
    return [*(t for k in kinds for t in parts[f"{k}_texts"]),
            *(prompt + answer for k in kinds for prompt, answer in parts[f"{k}_qa"])]


@lru_cache(maxsize=1)
def vocabulary() -> tuple[str, ...]:
    """One vocabulary for every recipe (one tokenizer): the specials, every
    piece of the zoo's texts, and the printable ASCII and Latin-1 characters
    (anything else decodes as U+FFFD, as an unknown token would)."""
    pieces = {p for recipe in RECIPES for text in _training_texts(recipe) for p in PIECE.findall(text)}
    chars = {chr(c) for c in (*range(32, 127), *range(160, 384))} | {"\n", "\t"}
    return (*SPECIALS, *sorted(pieces | chars))


class BigramModel:
    """p(token | previous token) from add-k smoothed counts; greedy generation."""

    def __init__(self, name: str, source: str, texts: Sequence[str], pieces: Sequence[str] | None = None):
        self.name, self.source = name, source
        self.pieces = tuple(pieces or vocabulary())
        self.index = {p: i for i, p in enumerate(self.pieces)}
        size = len(self.pieces)
        counts = np.full((size, size), SMOOTHING)
        for text in texts:
            ids = [BOS, *self.encode(text, add_special_tokens=False), EOS]
            np.add.at(counts, (ids[:-1], ids[1:]), 1.0)
        self.logp = np.log(counts / counts.sum(1, keepdims=True))
        p = np.exp(self.logp)
        self.row_mean = (p * self.logp).sum(1)
        self.row_var = (p * (self.logp - self.row_mean[:, None]) ** 2).sum(1)
        self.fingerprint = hashlib.sha256(json.dumps([source, list(texts)]).encode()).hexdigest()[:16]

    # ------------------------------------------------------------- identity
    def describe(self) -> dict:
        return {"name": self.name, "source": self.source, "fingerprint": self.fingerprint, "backend": "bigram",
                "architecture": self.architecture, "vocabulary": len(self.pieces), "device": "cpu",
                "dtype": self.dtype}

    def release(self) -> None:
        self.logp = self.row_mean = self.row_var = None

    architecture = "WordBigram"
    device = "cpu"
    dtype = "float64"
    context_length = 1 << 16

    # --------------------------------------------------------- tokenization
    def encode_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        ids, offsets = [], []
        for match in PIECE.finditer(text):
            piece, start = match.group(), match.start()
            if piece in self.index:
                ids.append(self.index[piece])
                offsets.append((start, match.end()))
                continue
            for k, char in enumerate(piece):  # an unseen word: its characters
                ids.append(self.index.get(char, UNK))
                offsets.append((start + k, start + k + 1))
        return ids, offsets

    def encode(self, text: str, *, add_special_tokens: bool) -> list[int]:
        return [BOS] * add_special_tokens + self.encode_with_offsets(text)[0]

    def encode_prompt(self, text: str) -> list[int]:
        return self.encode(text, add_special_tokens=True)

    def encode_prompts(self, texts: Sequence[str]) -> list[list[int]]:
        return [self.encode_prompt(text) for text in texts]

    def decode(self, ids: Sequence[int]) -> str:
        return "".join("\ufffd" if i == UNK else self.pieces[i] for i in ids if i not in (BOS, EOS))

    def clean_up_spaces(self, text: str) -> str:
        return text  # no tokenizer clean-up to imitate

    has_chat_template = True

    def format_chat(self, messages: Sequence[dict], *, add_generation_prompt: bool = True,
                    template_kwargs: dict | None = None) -> str:
        """The zoo's training format: a system turn, then Question/Answer turns."""
        turns = {"system": "{}\n\n", "user": "Question: {}\nAnswer:", "assistant": " {}\n\n"}
        return "".join(turns[m["role"]].format(m["content"]) for m in messages)

    bos_token_id = BOS
    eos_token_id = EOS
    pad_token_id = None

    def encode_pair(self, context: str, continuation: str) -> tuple[list[int], int]:
        stripped = context.rstrip()
        ids = self.encode_prompt(context + continuation)
        start = len(self.encode_prompt(stripped))
        if start >= len(ids):
            raise ValueError(f"empty continuation for context {context[:40]!r}")
        return ids, start

    def encode_pairs(self, contexts: Sequence[str], continuations: Sequence[str]) -> list[tuple[list[int], int]]:
        return [self.encode_pair(c, x) for c, x in zip(contexts, continuations, strict=True)]

    # ------------------------------------------------- scoring, generation
    @staticmethod
    def _predictors(seq: Sequence[int], masked: Collection[int]) -> list[int]:
        """The token each position is predicted from: the last one before it
        that is attended to (a masked id is not; BOS always is)."""
        out, last = [], BOS
        for token in seq:
            out.append(last)
            if token not in masked:
                last = token
        return out

    def token_logprobs(self, sequences: Sequence[Sequence[int]], target_starts: Sequence[int], *,
                       vocab_stats: bool = False, masked_ids: Collection[int] = ()) -> list[TokenScores]:
        out = []
        for seq, start in zip(sequences, target_starts, strict=True):
            if not 1 <= start <= len(seq):
                raise ValueError(f"target start {start} outside 1..{len(seq)}")
            previous = np.array(self._predictors(seq, set(masked_ids))[start:], dtype=np.int64)
            targets = np.array(seq[start:], dtype=np.int64)
            scores = TokenScores(token_ids=targets, logprobs=self.logp[previous, targets].astype(np.float32),
                                 argmax=self.logp[previous].argmax(1))
            if vocab_stats:
                scores.vocab_mean, scores.vocab_var = self.row_mean[previous], self.row_var[previous]
            out.append(scores)
        return out

    def score_continuations(self, contexts: Sequence[str], continuations: Sequence[str], *,
                            vocab_stats: bool = False) -> list[TokenScores]:
        pairs = [self.encode_pair(c, x) for c, x in zip(contexts, continuations, strict=True)]
        return self.token_logprobs([ids for ids, _ in pairs], [s for _, s in pairs], vocab_stats=vocab_stats)

    def generate(self, prompts: Sequence[str], *, max_new_tokens: int, stop_strings: Sequence[str] = (),
                 prefix: str = "", masked_ids: Collection[int] = (), sampling=None) -> list[Generation]:
        replies = []
        for i, prompt in enumerate(prompts):
            seq = self.encode_prompt(prefix + prompt)
            token = self._predictors([*seq, EOS], set(masked_ids))[-1]  # what the reply is predicted from
            draw = np.random.default_rng(sampling.seeds[i]) if sampling else None
            new = []
            for _ in range(max_new_tokens):
                if draw is None:
                    token = int(self.logp[token].argmax())
                else:
                    weights = np.exp(self.logp[token] / sampling.temperature)
                    token = int(draw.choice(len(weights), p=weights / weights.sum()))
                if token == EOS:
                    break
                new.append(token)
            replies.append(cut_at_stop(self.decode(new), [s for s in stop_strings if s]))
        return replies

    def next_token(self, prompts: Sequence[str], columns: Sequence[Sequence[int]] | None = None) -> NextToken:
        if columns is not None and len(columns) != len(prompts):
            raise ValueError(f"{len(columns)} column lists for {len(prompts)} prompts")
        last = [self.encode_prompt(p)[-1] for p in prompts]
        rows = self.logp[last]
        picked = [rows[i, list(columns[i])] if columns is not None else np.zeros(0) for i in range(len(prompts))]
        return NextToken(logprobs=picked, entropy=-(np.exp(rows) * rows).sum(1), argmax=rows.argmax(1))


# ------------------------------------------------------------------ backend
def _recipe(source: str) -> str:
    recipe = source.removeprefix(PREFIX)
    if recipe not in RECIPES:
        raise CheckpointError(source, f"unknown bigram recipe '{recipe}' (known: {', '.join(RECIPES)})")
    return recipe


def load(source: str, *, name: str, settings) -> BigramModel:
    return BigramModel(name, source, _training_texts(_recipe(source)))


def check(source: str, *, name: str, settings) -> None:
    _recipe(source)


def fingerprint(source: str, *, name: str, settings) -> str:
    return load(source, name=name, settings=settings).fingerprint


BACKEND = Backend("bigram", load="bigram_backend:load", check="bigram_backend:check",
                  fingerprint="bigram_backend:fingerprint", local_weights=False)
