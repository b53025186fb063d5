"""TOFU's figure in the HTML report: OpenUnlearning's axes."""

from __future__ import annotations

import math

from unlearnbench.report import svg

QUALITY_FLOOR = 1e-12  # p-values span many decades: log10 on [1e-12, 1]


def _place(p: float) -> float:
    return 1 + math.log10(max(p, QUALITY_FLOOR)) / 12


def quality_vs_utility(view) -> list[str]:
    names = [n for n in view.names if None not in (view.value(n, "forget_quality"), view.value(n, "model_utility"))]
    if not names:
        return []
    points = [(n, view.value(n, "model_utility"), _place(view.value(n, "forget_quality"))) for n in names]
    fq, mu = view.bound("forget_quality"), view.bound("model_utility")
    return [
        svg.scatter(
            "TOFU: forget quality vs model utility",
            points,
            "model utility (harmonic mean, 0-1)",
            "forget quality: KS-test p-value (log scale)",
            "tofu-quality-utility",
            "Top right is the goal: truth ratios indistinguishable from the retain model's (p near 1) with "
            "utility kept; the shaded region is where both gate bounds hold.",
            goal=(mu, _place(fq) if fq is not None else None),
            anchors=view.anchors,
            y_ticks=[(_place(10.0**-k), f"1e-{k}" if k else "1") for k in (0, 2, 4, 6, 8, 10, 12)],
        )
    ]
