"""A question asked as the first user turn of a chat, as every dialogue
suite asks it (honesty, ConceptGuard queries, TOFU answers, robustness's
leak probe): the model's chat template up to where the reply begins, and
the strings at which a reply has ended (the next turn starting)."""

from __future__ import annotations

STOP_STRINGS = ("\nUser:", "\nQuestion:")


def split_trailing_space(prompt: str) -> tuple[str, str]:
    """(the prompt without its trailing spaces and tabs, those spaces): they
    belong to the reply (docs/conventions.md), as a byte-level BPE merges a space into
    the next word ("Answer: A" is [..., ':', 'ĠA']). A newline stays: it is
    its own token in the templates that end with one."""
    stripped = prompt.rstrip(" \t")
    return stripped, prompt[len(stripped) :]


def first_turn_prompt(model, question: str) -> str:
    """The question as the first user turn, up to where the reply begins
    (trailing spaces belong to the reply: `split_trailing_space`)."""
    return dialogue_prompt(model, question)


def dialogue_prompt(model, question: str, *, system: str | None = None, shots=()) -> str:
    """`question` as the user's turn after an optional system prompt and
    earlier (question, answer) turns, up to where the reply begins (trailing
    spaces belong to the reply: `split_trailing_space`)."""
    messages = [{"role": "system", "content": system}] if system else []
    for asked, answered in shots:
        messages += [{"role": "user", "content": asked}, {"role": "assistant", "content": answered}]
    messages.append({"role": "user", "content": question})
    return split_trailing_space(model.format_chat(messages))[0]
