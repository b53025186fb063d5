"""MUSE's figure in the HTML report."""

from __future__ import annotations

from unlearnbench.report import svg

AXES = ("knowmem_retain_rougeL_f1", "verbmem_rougeL_f1")


def verbmem_vs_utility(view) -> list[str]:
    names = [n for n in view.names if None not in [view.value(n, m) for m in AXES]]
    if not names:
        return []
    points = [(n, view.value(n, AXES[0]), 1 - view.value(n, AXES[1])) for n in names]
    utility, verbmem = (view.bound(m) for m in AXES)
    return [
        svg.scatter(
            "MUSE: verbatim forgetting vs utility",
            points,
            "utility: KnowMem on retain (ROUGE-L F1, 0-1)",
            "forget efficacy: 1 - VerbMem on forget",
            "muse-verbmem-utility",
            "Top right is the goal: forget texts reproduced no better than by the retain model, retain knowledge "
            "kept; the shaded region is where both gate bounds hold.",
            goal=(utility, 1 - verbmem if verbmem is not None else None),
            anchors=view.anchors,
        )
    ]
