"""Unlearning curves: a training run's steps (a series, report/verdicts.py)
against its gate, one figure per axis (forget, utility).

Checks of different metrics, scales and directions share one axis by being
read against their own gate bound: a check's y is its signed margin to the
bound, relative to the bound (floor 0.1) and clipped to [-1, 1], as the
ranking reads margins (verdicts.relative_margin): above 0 the check is on its
passing side, below 0 on its failing side. One line per check family (a
suite's checks on that axis, averaged); the run's full and retain models are
read the same way against the same bounds and drawn as horizontal lines (a
model that forgot as the retain model did sits on the retain line). A check
that did not compute (an error, no bound) has no point at that step.
"""

from __future__ import annotations

from unlearnbench.report.svg import curve
from unlearnbench.report.verdicts import anchors, relative_margin

AXES = ("forget", "utility")


def _reference_values(report: dict) -> dict[str, dict[str, dict[str, float]]]:
    """{role: {suite: {metric: value}}} of the run's reference models: as the
    run recorded them for its series (`reference_values`), else from the
    reference models evaluated as checkpoints of the run (its anchors)."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for name, role in anchors(report).items():
        for suite, result in report["checkpoints"].get(name, {}).get("suites", {}).items():
            for metric, value in result.get("metrics", {}).items():
                if isinstance(value.get("value"), (int, float)):
                    out.setdefault(role, {}).setdefault(suite, {})[metric] = float(value["value"])
    for role, suites in (report.get("reference_values") or {}).items():
        for suite, values in suites.items():
            out.setdefault(role, {}).setdefault(suite, {}).update(
                {m: float(v) for m, v in values.items() if isinstance(v, (int, float))}
            )
    return out


def series_figures(report: dict, assessment: dict) -> list[str]:
    """Two figures per series (forget axis, utility axis), in series order."""
    board = assessment["ranking"]
    references = _reference_values(report)
    figures = []
    for series, rows in (board.get("series") or {}).items():
        best = next(r for r in board["rows"] if r.get("series") == series)
        steps = [r["step"] for r in rows]
        first = best.get("first_pass_step")
        marker = (first, f"gate passes from step {first}") if first is not None else None
        for axis in AXES:
            lines: dict[str, list[list[float]]] = {}
            reference_margins: dict[str, dict[str, float]] = {}
            for k, row in enumerate(rows):
                for suite, result in report["checkpoints"][row["checkpoint"]].get("suites", {}).items():
                    for check, verdict in result.get("checks", {}).items():
                        value, bound = verdict.get("value"), verdict.get("bound")
                        if verdict.get("axis") != axis or value is None or bound is None:
                            continue
                        lines.setdefault(suite, [[] for _ in rows])[k].append(
                            relative_margin(value, bound, verdict["direction"])
                        )
                        for role in ("full", "retain"):
                            ref = references.get(role, {}).get(suite, {}).get(verdict.get("metric") or "")
                            if ref is not None:  # the bound a check holds its reference to is that of any step
                                reference_margins.setdefault(role, {})[f"{suite}.{check}"] = relative_margin(
                                    ref, bound, verdict["direction"]
                                )
            if not lines:
                continue
            ys = {family: [sum(v) / len(v) if v else None for v in per_step] for family, per_step in lines.items()}
            refs = {role: sum(m.values()) / len(m) for role, m in reference_margins.items()}
            caption = (
                f"{series}: its {axis}-axis checks over training steps, one line per suite (its checks "
                "averaged), each as its margin to its gate bound relative to the bound: above 0 on the "
                "passing side. Dashed: the reference models read against the same bounds."
            )
            if marker:
                caption += f" The gate first passes at step {first}."
            figures.append(
                curve(
                    f"{series}: {axis} over steps",
                    steps,
                    ys,
                    f"curve-{axis}",
                    caption,
                    ylabel="margin to the bound",
                    references=refs,
                    marker=marker,
                )
            )
    return figures
