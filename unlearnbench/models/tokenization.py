"""Tokenization and chat formatting from a Hugging Face tokenizer, shared by
every backend that has the model's tokenizer files (in this process or
beside an endpoint): prompts are built here, with one BOS (docs/conventions.md), so every
backend sees the same token ids. A mixin over `self.tokenizer`, which also
scores continuations through the backend's own `token_logprobs`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from unlearnbench.models.interface import TokenScores


class Tokenization:
    # What the class it is mixed into provides: a Hugging Face tokenizer and the backend's scoring.
    tokenizer: Any
    token_logprobs: Callable[..., list[TokenScores]]

    def encode(self, text: str, *, add_special_tokens: bool) -> list[int]:
        return self.tokenizer(text, add_special_tokens=add_special_tokens)["input_ids"]

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """Token ids of `text` (no special tokens) and each token's character
        span in it (the fast tokenizer's offset mapping)."""
        encoded = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        return list(encoded["input_ids"]), [tuple(span) for span in encoded["offset_mapping"]]

    def decode(self, ids: Sequence[int]) -> str:
        """Text of `ids` without special tokens."""
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def clean_up_spaces(self, text: str) -> str:
        """What decoding with clean_up_tokenization_spaces=True does to
        decoded `text`: the tokenizer's clean-up (" ." -> "."), which
        transformers 5 skips for BPE tokenizers (probed once: "a ." decoded
        with the flag)."""
        if not hasattr(self, "_cleans_up_spaces"):
            probe = self.tokenizer("a .", add_special_tokens=False)["input_ids"]
            self._cleans_up_spaces = self.tokenizer.decode(probe, clean_up_tokenization_spaces=True) == "a."
        return self.tokenizer.clean_up_tokenization(text) if self._cleans_up_spaces else text

    def encode_prompt(self, text: str) -> list[int]:
        """A prompt's ids with exactly one BOS where the tokenizer adds one (docs/conventions.md)."""
        return self.encode_prompts([text])[0]

    def encode_prompts(self, texts: Sequence[str]) -> list[list[int]]:
        """`encode_prompt` of each text, in one tokenizer call per BOS rule (a
        fast tokenizer encodes a batch in Rust; one call per text costs more
        in Python than the encoding itself).

        Text from a chat template may already begin with the BOS the template
        writes (Llama-3.x, Mistral, Gemma); adding the tokenizer's own would
        give two. Such text is encoded without special tokens; every other
        prompt with the tokenizer's default (which adds the BOS, if any).
        """
        bos = self.tokenizer.bos_token
        written = [bool(bos) and text.startswith(bos) for text in texts]
        if any(written) and not self._bos():
            written = [False] * len(texts)
        out: list[list[int]] = [[] for _ in texts]
        for bos_written in (False, True):
            rows = [i for i, w in enumerate(written) if w == bos_written]
            if rows:
                encoded = self.tokenizer([texts[i] for i in rows], add_special_tokens=not bos_written)["input_ids"]
                for i, ids in zip(rows, encoded, strict=True):
                    out[i] = list(ids)
        return out

    def encode_shared_prefix(self, prefix: str, prompts: Sequence[str]) -> tuple[list[int], list[list[int]]]:
        """(shared, rests) with shared + rests[i] == encode_prompt(prefix + prompts[i]).

        Encoding the prefix and each prompt apart would change the ids where
        BPE merges across the boundary ("\n\n" + "Question" is "\n", "\n",
        "Question" joined): the model must see the joined text's own ids, so
        only their longest common *token* prefix is shared (and cached), and
        every row keeps at least one token of its own to predict from.
        """
        joined = self.encode_prompts([prefix + p for p in prompts])
        shared = min(len(j) for j in joined) - 1
        for ids in joined[1:]:
            shared = next((k for k in range(shared) if ids[k] != joined[0][k]), shared)
        rests = [ids[shared:] for ids in joined]
        head = joined[0][:shared]
        if any(head + rest != ids for rest, ids in zip(rests, joined)):
            raise AssertionError("shared prefix + rest differs from the joined encoding")
        return head, rests

    @property
    def has_chat_template(self) -> bool:
        from unlearnbench.models.chat import has_chat_template

        return has_chat_template(self.tokenizer)

    def format_chat(
        self, messages: Sequence[dict], *, add_generation_prompt: bool = True, template_kwargs: dict | None = None
    ) -> str:
        """The chat template's text of `messages`; `template_kwargs` are the
        template's own variables (Llama-3.x's `date_string`)."""
        from unlearnbench.models.chat import format_chat

        return format_chat(
            self.tokenizer, messages, add_generation_prompt=add_generation_prompt, template_kwargs=template_kwargs
        )

    @property
    def bos_token_id(self) -> int | None:
        return self.tokenizer.bos_token_id

    @property
    def eos_token_id(self) -> int | None:
        return self.tokenizer.eos_token_id

    @property
    def pad_token_id(self) -> int | None:
        """The tokenizer's own pad token (None where it defines none)."""
        return self.tokenizer.pad_token_id

    def encode_pair(self, context: str, continuation: str) -> tuple[list[int], int]:
        """(ids, start): the ids the model reads for `context + continuation`
        and where the continuation's tokens begin in them (`encode_pairs`)."""
        return self.encode_pairs([context], [continuation])[0]

    def encode_pairs(self, contexts: Sequence[str], continuations: Sequence[str]) -> list[tuple[list[int], int]]:
        """`encode_pair` of each (context, continuation), batched.

        lm-evaluation-harness's `_encode_pair` rule (docs/conventions.md): the
        context's trailing whitespace moves into the continuation, the joined
        text is encoded once, and the continuation is what follows the
        stripped context's ids. A byte-level BPE reads "Answer: Paris" as
        [..., ':', 'ĠParis']; encoding the two parts apart would score a lone
        'Ġ' and then 'Paris', tokens such a model never saw in that order.
        With an empty context and no BOS, the first token has nothing to
        condition on and is not scored.
        """
        stripped = [context.rstrip() for context in contexts]
        joined = self.encode_prompts([c + x for c, x in zip(contexts, continuations, strict=True)])
        distinct = list(dict.fromkeys(s for s in stripped if s))  # multiple choice repeats a context per option
        context_length = dict(zip(distinct, map(len, self.encode_prompts(distinct))))
        bos_length = len(self._bos()) if not all(stripped) else 0
        pairs = []
        for context, s, ids in zip(contexts, stripped, joined):
            start = context_length[s] if s else bos_length
            if start >= len(ids):
                raise ValueError(f"empty continuation for context {context[:40]!r}")
            pairs.append((ids, max(start, 1)))
        return pairs

    def score_continuations(
        self, contexts: Sequence[str], continuations: Sequence[str], *, vocab_stats: bool = False
    ) -> list[TokenScores]:
        """Scores of each continuation's tokens given its context, each pair
        encoded as `encode_pair` reads it."""
        pairs = self.encode_pairs(contexts, continuations)
        return self.token_logprobs([ids for ids, _ in pairs], [start for _, start in pairs], vocab_stats=vocab_stats)

    def _bos(self) -> list[int]:
        ids = self.tokenizer("", add_special_tokens=True)["input_ids"]
        return list(ids)
