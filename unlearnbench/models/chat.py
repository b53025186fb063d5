"""Dialogue formatting: the tokenizer's chat template, else a plain-text fallback.

The fallback (for base models without a template) is, for messages
[system?, user, assistant, user, ...]:

    {system}\\n\\n            (only when a system message is given)
    User: {content}\\n
    Assistant: {content}\\n
    ...
    Assistant:               (the generation prompt, no trailing space)

Turns are separated by one newline, so a reply is cut at "\\nUser:".
"""

from __future__ import annotations

from collections.abc import Sequence

PLAIN_ROLES = {"user": "User", "assistant": "Assistant"}


def has_chat_template(tokenizer) -> bool:
    return bool(getattr(tokenizer, "chat_template", None))


def format_chat(
    tokenizer, messages: Sequence[dict], *, add_generation_prompt: bool = True, template_kwargs: dict | None = None
) -> str:
    if has_chat_template(tokenizer):
        return tokenizer.apply_chat_template(
            list(messages), tokenize=False, add_generation_prompt=add_generation_prompt, **(template_kwargs or {})
        )
    return format_plain_dialogue(messages, add_generation_prompt=add_generation_prompt)


def format_plain_dialogue(messages: Sequence[dict], *, add_generation_prompt: bool = True) -> str:
    parts = []
    for message in messages:
        role, content = message["role"], message["content"].strip()
        if role == "system":
            parts.append(f"{content}\n\n")
        elif role in PLAIN_ROLES:
            parts.append(f"{PLAIN_ROLES[role]}: {content}\n")
        else:
            raise ValueError(f"unknown chat role {role!r} (expected system, user or assistant)")
    if add_generation_prompt:
        parts.append("Assistant:")
    return "".join(parts)
