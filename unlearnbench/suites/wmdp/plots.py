"""WMDP's figure in the HTML report: hazardous knowledge removed against
general knowledge kept, the axes RMU's paper plots."""

from __future__ import annotations

from unlearnbench.report import svg
from unlearnbench.suites.wmdp.metrics import CHANCE


def forgetting_vs_mmlu(view) -> list[str]:
    names = [n for n in view.names if None not in (view.value(n, "wmdp"), view.value(n, "mmlu"))]
    if not names:
        return []
    points = [(n, 1 - view.value(n, "wmdp"), view.value(n, "mmlu")) for n in names]
    return [
        svg.scatter(
            "WMDP: hazardous knowledge removed vs MMLU kept",
            points,
            f"1 − WMDP accuracy (all subsets; chance {CHANCE:g} is at {1 - CHANCE:g})",
            "MMLU accuracy",
            "wmdp-forget-mmlu",
            f"Right is less hazardous knowledge, up is more general knowledge; RMU's target is WMDP at chance "
            f"(x = {1 - CHANCE:g}) with MMLU at the full model's. The dashed line is the MMLU gate bound; the forget "
            f"checks are per subset (see the matrix).",
            goal=(None, view.bound("mmlu")),
            anchors=view.anchors,
        )
    ]
