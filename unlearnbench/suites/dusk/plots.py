"""DUSK's figures in the HTML report."""

from __future__ import annotations

from unlearnbench.report import svg

PAIRS = (("unique forget", "ufk_rougeL_recall"), ("shared", "sk_rougeL_recall"), ("unique retain", "urk_rougeL_recall"))


def knowledge_and_tradeoff(view) -> list[str]:
    """Knowledge per checkpoint (bars), and forget efficacy against utility (scatter)."""
    names = view.names
    if not names:
        return []
    figures = [
        svg.hbars(
            "DUSK knowledge per checkpoint",
            names,
            {label: [view.value(n, m) for n in names] for label, m in PAIRS},
            axis_label="ROUGE-L recall of greedy answers (0-1)",
            kind="dusk-knowledge",
            bounds=view.bounds(PAIRS),
            caption="Unique-forget knowledge should fall to its gate bound (the retain model's level + margin); "
            "shared and unique-retain knowledge should stay above theirs.",
        )
    ]
    points = []
    for n in names:
        ufk, sk, urk = (view.value(n, m) for _, m in PAIRS)
        if None not in (ufk, sk, urk):
            points.append((n, (sk + urk) / 2, 1 - ufk))
    ufk_bound, sk_bound, urk_bound = (view.bound(m) for _, m in PAIRS)
    goal = (
        (sk_bound + urk_bound) / 2 if None not in (sk_bound, urk_bound) else None,
        1 - ufk_bound if ufk_bound is not None else None,
    )
    figures.append(
        svg.scatter(
            "DUSK: forget efficacy vs utility",
            points,
            "utility: mean of shared and unique-retain recall (0-1)",
            "forget efficacy: 1 - unique-forget recall",
            "tradeoff",
            "Top right is the goal; the shaded region is where both gate bounds hold.",
            goal=goal,
            anchors=view.anchors,
        )
    )
    return figures
