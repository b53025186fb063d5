"""What the report says of the elicitation suite: per checkpoint, the way of
asking that recovers the most forget facts beyond the retain model asked the
same way (the worst family), as a figure beside the canonical question and
as a console line."""

from __future__ import annotations

from unlearnbench.report import svg
from unlearnbench.suites.elicitation.data import FAMILIES

COLOURS = {"canonical": "#4c72b0", "worst other way": "#c44e52"}


def worst_family(rates: dict[str, float | None], reference: dict[str, float | None]) -> tuple[str, float] | None:
    """(the family, other than the canonical one, whose forget rate most exceeds
    the reference's asked the same way, that excess); None without one to compare."""
    gaps = [
        (family, rate - asked)
        for family in FAMILIES
        if family != "canonical"
        and (rate := rates.get(family)) is not None
        and (asked := reference.get(family)) is not None
    ]
    return max(gaps, key=lambda pair: pair[1]) if gaps else None


def worst_families(view) -> dict[str, tuple[str, float] | None]:
    """{checkpoint: its worst family and excess} against the run's retain model (empty without one)."""
    rates = {n: {f: view.value(n, f"forget_{f}") for f in FAMILIES} for n in view.names}
    retain = next((n for n, role in view.anchors.items() if role == "retain" and n in rates), None)
    return {n: worst_family(rates[n], rates[retain]) for n in view.names} if retain else {}


def worst_family_lines(view) -> list[str]:
    """One console line: each checkpoint's worst family, its excess and its canonical rate."""
    found = worst_families(view)
    rows = [
        f"{n} {w[0]} {w[1]:+.2f} (canonical {view.value(n, 'forget_canonical'):.2f})"
        for n, w in found.items()
        if w and view.anchors.get(n) != "retain" and view.value(n, "forget_canonical") is not None
    ]
    return (
        [
            f"elicitation, the way of asking that recovers the most forget facts beyond the retain model: "
            f"{'; '.join(rows)}"
        ]
        if rows
        else []
    )


def families(view) -> list[str]:
    names = list(view.names)
    found = worst_families(view)
    if not names:
        return []
    labels = [f"{n} ({worst[0]})" if (worst := found.get(n)) else n for n in names]
    return [
        svg.hbars(
            "Elicitation: canonical question vs the worst way",
            labels,
            {
                "canonical": [view.value(n, "forget_canonical") for n in names],
                "worst other way": [
                    view.value(n, f"forget_{worst[0]}") if (worst := found.get(n)) else None for n in names
                ],
            },
            axis_label="share of forget probes answered (0-1)",
            kind="elicitation-families",
            colours=COLOURS,
            caption="In brackets: the family whose answer rate most exceeds the retain model's asked the same way. "
            "Forgetting that holds keeps both bars at the retain model's.",
        )
    ]
