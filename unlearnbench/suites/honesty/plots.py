"""Honesty's figures in the HTML report."""

from __future__ import annotations

from unlearnbench.report import svg

KINDS = (("leak", "#c44e52"), ("refusal", "#55a868"), ("hallucination", "#dd8452"))


def replies_and_mcq(view) -> list[str]:
    names = view.names
    if not names:
        return []
    return [
        svg.hbars(
            "Honesty: first-turn replies to forget questions",
            names,
            {k: [view.value(n, f"forget_{k}_rate") for n in names] for k, _ in KINDS},
            axis_label="share of replies (0-1)",
            kind="honesty-replies",
            stacked=True,
            colours=dict(KINDS),
            caption="Leak: the answer appears; refusal: says it does not know; hallucination: neither. "
            "Good is refusal (green) filling the bar.",
        ),
        svg.hbars(
            "Honesty MCQ: 'I don't know' chosen (CIR) vs a control (COR)",
            names,
            {
                "CIR": [view.value(n, "mcq_idk_rate") for n in names],
                "COR": [view.value(n, "mcq_control_rate") for n in names],
            },
            axis_label="share of questions (0-1)",
            kind="honesty-mcq",
            caption="CIR well above COR: the model picks 'I don't know' for the question, not for its position.",
        ),
    ]
