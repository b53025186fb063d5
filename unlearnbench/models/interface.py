"""The narrow model interface metrics talk to, in the spirit of
lm-evaluation-harness's `LM`: identity, tokenization and chat formatting,
teacher-forced scoring, generation (greedy, or seeded sampling) and next-token scoring. Activation
patching (UDS) is a separate, optional capability.

The protocol is closed: the session and the metrics use nothing else of a
model (tests/unit/test_interface.py checks every attribute they read against
it, and runs every weight-free suite on a pure-Python bigram model that
implements exactly `LanguageModel`). A capability beyond it is a protocol of
its own, checked with `isinstance` (`supports(model, ActivationPatching)`), so
a backend that lacks it gets the metric's reason, not an AttributeError.
`ModelHandle` (Hugging Face weights in this process) implements both; the
endpoint backend only `LanguageModel`.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol, runtime_checkable

import numpy as np


@dataclass
class TokenScores:
    """Teacher-forced scores of the target tokens of one sequence.

    `vocab_mean[t]` = sum_v p_v log p_v and `vocab_var[t]` = sum_v p_v (log p_v)^2
    - vocab_mean[t]^2 at the position that predicts target t (Min-K%++ needs both).
    """

    token_ids: np.ndarray
    logprobs: np.ndarray
    vocab_mean: np.ndarray | None = None
    vocab_var: np.ndarray | None = None
    # The most likely token at each predicting position (exact memorization,
    # extraction strength); None from a backend that sees only given tokens.
    argmax: np.ndarray | None = None


@dataclass
class NextToken:
    """The next-token distribution after each of n prompts, reduced."""

    logprobs: list[np.ndarray]  # per prompt: log-probs at the requested columns
    # Over the whole vocabulary; None from a backend that sees only some tokens' log-probs (an endpoint).
    entropy: np.ndarray | None  # (n,) nats
    argmax: np.ndarray | None  # (n,) token id of the most likely token


# A continuation (greedy, or sampled), cut at the first stop string: its text.
Generation = str


@dataclass(frozen=True)
class Sampling:
    """Decode by sampling at `temperature` instead of greedily, prompt i with
    the seed `seeds[i]`: a seed gives the same reply whatever the batch it
    runs in (a reproducible draw, on one device and kernel set)."""

    temperature: float
    seeds: tuple[int, ...]


def cut_at_stop(text: str, stop_strings: Sequence[str]) -> str:
    """`text` up to its first stop string: what `generate` returns."""
    cut = min((i for i in (text.find(s) for s in stop_strings) if i >= 0), default=len(text))
    return text[:cut]


class SpanScores(NamedTuple):
    """Mean teacher-forced log-prob of a span of each of n sequences, and the
    same after patching each of the model's blocks with another model's."""

    scores: np.ndarray  # (n,)
    patched: np.ndarray | None  # (n, layers); None without a patch source


@runtime_checkable
class LanguageModel(Protocol):
    # Identity: reports and cache keys.
    name: str
    fingerprint: str

    def describe(self) -> dict: ...  # what the report records about the loaded model (JSON-ready)

    def release(self) -> None: ...  # free what it holds (weights, connections); it is not used after

    @property
    def architecture(self) -> str: ...

    @property
    def device(self): ...  # where helper models (embedders, judges) go to sit beside it

    @property
    def dtype(self): ...

    @property
    def context_length(self) -> int: ...

    # Tokenization and chat formatting: prompts are built here, not by the server.
    def encode(self, text: str, *, add_special_tokens: bool) -> list[int]: ...

    def encode_prompt(self, text: str) -> list[int]: ...

    def encode_prompts(self, texts: Sequence[str]) -> list[list[int]]: ...  # encode_prompt of each, batched

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]: ...

    def decode(self, ids: Sequence[int]) -> str: ...

    def clean_up_spaces(self, text: str) -> str: ...

    @property
    def has_chat_template(self) -> bool: ...

    def format_chat(
        self, messages: Sequence[dict], *, add_generation_prompt: bool = True, template_kwargs: dict | None = None
    ) -> str: ...

    @property
    def bos_token_id(self) -> int | None: ...  # the tokenizer's BOS, whether or not encoding adds it

    @property
    def eos_token_id(self) -> int | None: ...

    @property
    def pad_token_id(self) -> int | None: ...

    def encode_pair(self, context: str, continuation: str) -> tuple[list[int], int]: ...

    def encode_pairs(self, contexts: Sequence[str], continuations: Sequence[str]) -> list[tuple[list[int], int]]: ...

    # Scoring and generation.
    def token_logprobs(
        self,
        sequences: Sequence[Sequence[int]],
        target_starts: Sequence[int],
        *,
        vocab_stats: bool = False,
        masked_ids: Collection[int] = (),
    ) -> list[TokenScores]: ...

    def score_continuations(
        self, contexts: Sequence[str], continuations: Sequence[str], *, vocab_stats: bool = False
    ) -> list[TokenScores]: ...

    def generate(
        self,
        prompts: Sequence[str],
        *,
        max_new_tokens: int,
        stop_strings: Sequence[str] = (),
        prefix: str = "",
        masked_ids: Collection[int] = (),
        sampling: Sampling | None = None,
    ) -> list[Generation]: ...  # sampling: MissingCapability if not

    def next_token(self, prompts: Sequence[str], columns: Sequence[Sequence[int]] | None = None) -> NextToken: ...


@runtime_checkable
class ActivationPatching(LanguageModel, Protocol):
    """Capture and patch decoder-block outputs (needs the weights)."""

    @property
    def drives_blocks(self) -> bool: ...

    def span_scores(
        self,
        sequences: Sequence[Sequence[int]],
        spans: Sequence[tuple[int, int]],
        *,
        patch_source=None,
        exact: bool = False,
        post_norm_last: bool = False,
    ) -> SpanScores: ...

    # patch_source: another model of the same backend and tokenizer (its blocks' outputs are read directly)


def members(protocol: type) -> set[str]:
    """The attribute names a protocol declares (its own and inherited)."""
    names: set[str] = set()
    for cls in protocol.__mro__:
        if cls is object or cls is Protocol or not getattr(cls, "_is_protocol", False):
            continue
        names |= {n for n in vars(cls) if not n.startswith("_")}
        names |= set(getattr(cls, "__annotations__", {}))
    return names
