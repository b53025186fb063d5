"""Meta-evaluation: which metric deserves trust? (docs/meta-eval.md; OpenUnlearning,
NeurIPS 2025, §4.2)

From one report (a `pytest suites` run) and labels (checkpoints that *know*
the forget set, and ones that *never saw* it):
- faithfulness of each metric: the AUC-ROC separating `knows` from
  `never_saw`, the metric oriented "higher = more forget knowledge" (a metric
  whose `higher_is_better` is true is negated; UDS thus enters as 1 - UDS),
  with a bootstrap CI over the checkpoints;
- robustness of each metric the robustness suite measures after its attacks
  (ufk, leak, uds), over the unlearned checkpoints u (every checkpoint of the
  robustness run but the retain model and those labelled never_saw):
  relearning R_u = min(Δ_retain / Δ_u, 1) with Δ = m_before - m_after_relearn,
  quantization Q_u = min(m_after_quant4 / m_before, 1), each the mean over u
  where defined (Δ_u ≠ 0, m_before > 0), and HM(R, Q). These are the
  definitions as the UDS repository's meta-evaluation script states
  OpenUnlearning's, oriented as above; the report says so.

The AUC is the one of metrics/mia.py and the CI the one bootstrap of
metrics/core.py.
"""

from __future__ import annotations

import html
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from unlearnbench.errors import UnlearnbenchError
from unlearnbench.metrics import mia
from unlearnbench.metrics.core import bootstrap_indices, percentile_ci
from unlearnbench.suites import SUITES, registered_probes

# The zoo's labels: full (two seeds) and the recipes that keep the forget
# knowledge (npo under-forgets, idknll only hides it, shallow hides it above
# the 4-bit grid) against retain in three seeds, which never saw it. The
# seeds beside the family are evaluated with --zoo-extra.
ZOO_EXTRA = ("full-seed1", "retain-seed1", "retain-seed2")
ZOO_LABELS = {
    "knows": ["full", "full-seed1", "npo", "idknll", "shallow"],
    "never_saw": ["retain", "retain-seed1", "retain-seed2"],
    "retain": "retain",
}
MIN_PER_LABEL = 2  # checkpoints per label for a bootstrap CI that is not degenerate
CONVENTION = (
    "every metric oriented higher = more forget knowledge (negated where higher is better; UDS as "
    "1 - UDS in R and Q); R = min(Δ_retain / Δ_unlearned, 1), Δ = m_before - m_after_relearn; "
    "Q = min(m_after_quant4 / m_before, 1); robustness = HM(R, Q); R and Q are means over the "
    "unlearned checkpoints where defined"
)


@dataclass(frozen=True)
class Labels:
    knows: tuple[str, ...]
    never_saw: tuple[str, ...]
    retain: str  # the checkpoint that serves as the retain model in R

    @classmethod
    def load(cls, path: Path | None) -> Labels:
        """The labels YAML ({knows: [...], never_saw: [...], retain: NAME}); the zoo's without one."""
        if path is None:
            raw = ZOO_LABELS
        else:
            try:
                raw = yaml.safe_load(Path(path).read_text())
            except (OSError, yaml.YAMLError) as exc:
                raise UnlearnbenchError(f"labels {path}: cannot read it ({exc})") from None
        where = f"labels {path or '(zoo default)'}"
        if not isinstance(raw, dict) or not raw.get("knows") or not raw.get("never_saw"):
            raise UnlearnbenchError(f"{where}: expected a mapping with non-empty lists 'knows' and 'never_saw'")
        knows, never = tuple(map(str, raw["knows"])), tuple(map(str, raw["never_saw"]))
        if set(knows) & set(never):
            raise UnlearnbenchError(f"{where}: {', '.join(sorted(set(knows) & set(never)))} is labelled both ways")
        return cls(knows, never, str(raw.get("retain", never[0])))


def oriented(metric: dict) -> float | None:
    value = metric.get("value")
    if value is None or not math.isfinite(value):
        return None
    return -value if metric.get("higher_is_better") else value


def faithfulness(values: dict[str, float], labels: Labels) -> dict[str, Any] | None:
    """AUC(knows above never_saw) with a bootstrap CI over the checkpoints;
    None without both groups. With fewer than two checkpoints in a group the
    bootstrap has nothing to resample: no CI, and `ci_note` says why."""
    positives = [values[c] for c in labels.knows if c in values]
    negatives = [values[c] for c in labels.never_saw if c in values]
    if not positives or not negatives:
        return None
    matrix = mia.comparison_matrix(positives, negatives)
    out: dict[str, Any] = {
        "auc": float(matrix.mean()),
        "ci": None,
        "knows": len(positives),
        "never_saw": len(negatives),
    }
    if min(len(positives), len(negatives)) < MIN_PER_LABEL:
        out["ci_note"] = (
            f"no CI: {len(positives)} knows / {len(negatives)} never-saw checkpoint(s); a CI needs at "
            f"least {MIN_PER_LABEL} per label"
        )
        return out
    rows, columns = bootstrap_indices([len(positives), len(negatives)])
    out["ci"] = list(percentile_ci(mia.resampled_means(matrix, rows, columns)))
    return out


def robustness(metrics: dict[str, dict], probe: str, labels: Labels) -> dict[str, Any] | None:
    """R, Q and HM(R, Q) of a probe from {checkpoint: robustness metrics}."""

    def m(checkpoint: str, name: str) -> float | None:
        value = metrics.get(checkpoint, {}).get(f"{probe}_{name}", {}).get("value")
        if value is None:
            return None
        return value if registered_probes()[probe][1].more_is_knowledge else 1 - value

    retain_before, retain_relearned = m(labels.retain, "before"), m(labels.retain, "after_relearn")
    if retain_before is None:
        return None
    # Without relearning results (the attack was not run) there is no R, only Q.
    delta_retain = retain_before - retain_relearned if retain_relearned is not None else None
    r_values: dict[str, float] = {}
    q_values: dict[str, float] = {}
    for c in metrics:
        before = m(c, "before")
        if c in {*labels.never_saw, labels.retain} or before is None:
            continue
        relearned, quantized = m(c, "after_relearn"), m(c, "after_quant4")
        if delta_retain is not None and relearned is not None and before - relearned != 0:
            r_values[c] = min(delta_retain / (before - relearned), 1.0)
        if before > 0 and quantized is not None:
            q_values[c] = min(quantized / before, 1.0)
    r = float(np.mean(list(r_values.values()))) if r_values else None
    q = float(np.mean(list(q_values.values()))) if q_values else None
    out: dict[str, Any] = {"R": r, "Q": q, "HM": None, "R_per_checkpoint": r_values, "Q_per_checkpoint": q_values}
    if r is None or q is None:
        out["hm_note"] = "no HM: R or Q is undefined (no checkpoint where it is)"
    elif r <= 0 or q <= 0:
        # A harmonic mean is a mean of rates in (0, 1]; with a negative rate it can
        # land anywhere (even above 1) and rank a metric that relearning moved
        # the wrong way as robust.
        which = "R" if r <= 0 else "Q"
        why = (
            "relearning left the retain model's value unchanged (R = 0) or moved it the other way from the "
            "unlearned checkpoints' (R < 0)"
            if which == "R"
            else "quantization took the value to 0 or below"
        )
        out["hm_note"] = f"no HM: {which} = {min(r, q):.3g} <= 0 ({why}); a harmonic mean of such rates means nothing"
    else:
        out["HM"] = 2 * r * q / (r + q)
    return out


def meta_evaluate(report: dict, labels: Labels) -> dict:
    names = set(report["checkpoints"])
    missing = [c for c in (*labels.knows, *labels.never_saw) if c not in names]
    if len(missing) == len(labels.knows) + len(labels.never_saw):
        raise UnlearnbenchError(f"no labelled checkpoint is in the report (it has: {', '.join(sorted(names))})")
    utility = {(suite, m) for suite, spec in SUITES.items() for m in spec.utility_metrics}
    by_metric: dict[tuple[str, str], dict[str, float]] = {}
    robustness_metrics: dict[str, dict] = {}
    for checkpoint, entry in report["checkpoints"].items():
        for suite, result in entry.get("suites", {}).items():
            for name, metric in result.get("metrics", {}).items():
                value = oriented(metric)
                if value is not None and suite != "robustness":
                    by_metric.setdefault((suite, name), {})[checkpoint] = value
            if suite == "robustness":
                robustness_metrics[checkpoint] = result.get("metrics", {})
    rows: list[dict[str, Any]] = []
    for (suite, name), values in sorted(by_metric.items()):
        if (suite, name) in utility:
            continue
        faith = faithfulness(values, labels)
        if faith is not None:
            rows.append({"suite": suite, "metric": name, "faithfulness": faith, "robustness": None})
    for probe in registered_probes():
        rob = robustness(robustness_metrics, probe, labels)
        before = {
            c: v for c, m in robustness_metrics.items() if (v := oriented(m.get(f"{probe}_before", {}))) is not None
        }
        faith = faithfulness(before, labels)
        if rob is not None or faith is not None:
            rows.append({"suite": "robustness", "metric": f"{probe}_before", "faithfulness": faith, "robustness": rob})
    rows.sort(
        key=lambda r: (
            -(r["faithfulness"] or {}).get("auc", -1.0),
            -((r["robustness"] or {}).get("HM") or -1.0),
            r["suite"],
            r["metric"],
        )
    )
    return {
        "labels": {
            "knows": list(labels.knows),
            "never_saw": list(labels.never_saw),
            "retain": labels.retain,
            "missing_from_report": missing,
        },
        "convention": CONVENTION,
        "source_run": report.get("run", {}).get("id"),
        "metrics": rows,
        "not_scored": sorted(f"{s}.{m}" for s, m in by_metric if (s, m) in utility),
        "not_scored_reason": "utility metrics (what must be kept) are not forgetting metrics: a faithful one "
        "does not separate the checkpoints that know the forget set from those that never "
        "saw it",
    }


def _cells(row: dict) -> list[str]:
    faith, rob = row["faithfulness"], row["robustness"] or {}
    if faith is None:
        f_text = "n/a"
    elif faith["ci"] is None:
        f_text = f"{faith['auc']:.3f} (no CI: {faith['knows']}/{faith['never_saw']})"
    else:
        f_text = f"{faith['auc']:.3f} [{faith['ci'][0]:.2f}, {faith['ci'][1]:.2f}]"
    rq = [f"{rob[k]:.3f}" if rob.get(k) is not None else "n/a" for k in ("R", "Q")]
    hm = f"{rob['HM']:.3f}" if rob.get("HM") is not None else ("n/a*" if rob.get("hm_note") else "n/a")
    return [f_text, *rq, hm]


def table(result: dict) -> str:
    """Rows sorted by faithfulness (best first); notes under the table."""
    lines = [f"{'metric':44s} {'faithfulness AUC [95% CI]':30s} {'R':>7s} {'Q':>7s} {'HM':>7s}"]
    notes = []
    for row in result["metrics"]:
        f_text, r, q, hm = _cells(row)
        lines.append(f"{row['suite'] + '.' + row['metric']:44s} {f_text:30s} {r:>7s} {q:>7s} {hm:>7s}")
        if (row["robustness"] or {}).get("hm_note"):
            notes.append(f"* {row['suite']}.{row['metric']}: {row['robustness']['hm_note']}")
    labels = result["labels"]
    if min(len(labels["knows"]), len(labels["never_saw"])) < MIN_PER_LABEL:
        notes.append(f"fewer than {MIN_PER_LABEL} checkpoints per label: AUCs have no CI; label more checkpoints")
    if result.get("not_scored"):
        notes.append(f"not scored ({result['not_scored_reason']}): {', '.join(result['not_scored'])}")
    return "\n".join(lines + ([""] + notes if notes else []))


def render_html(result: dict) -> str:
    """A self-contained page: the table (sorted, best first), the notes, and
    the faithfulness-vs-robustness scatter (the report's own SVG scatter; a
    metric with no HM is not drawn)."""
    from unlearnbench.report.svg import scatter

    points = [
        (r["metric"], r["faithfulness"]["auc"], r["robustness"]["HM"])
        for r in result["metrics"]
        if r["faithfulness"] and r["robustness"] and r["robustness"].get("HM") is not None
    ]
    figure = scatter(
        "Faithfulness vs robustness",
        points,
        "faithfulness (AUC, 0-1)",
        "robustness HM(R, Q), 0-1",
        "faithfulness-robustness",
        "Top right: a metric that separates knowing from never-seeing "
        "checkpoints and holds under relearning and quantization. Metrics "
        "whose HM is undefined (see the notes) are not drawn.",
    )
    rows = []
    for r in result["metrics"]:
        rows.append(
            f"<tr><td>{html.escape(r['suite'])}.{html.escape(r['metric'])}</td>"
            + "".join(f"<td>{html.escape(c)}</td>" for c in _cells(r))
            + "</tr>"
        )
    notes = [
        html.escape(f"{r['suite']}.{r['metric']}: {r['robustness']['hm_note']}")
        for r in result["metrics"]
        if (r["robustness"] or {}).get("hm_note")
    ]
    if result.get("not_scored"):
        notes.append(html.escape(f"Not scored ({result['not_scored_reason']}): {', '.join(result['not_scored'])}."))
    labels = result["labels"]
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><meta name='viewport' "
        "content='width=device-width, initial-scale=1'><title>unlearnbench meta-evaluation</title>"
        "<style>body{font-family:system-ui,sans-serif;margin:1em;max-width:1100px}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:4px 8px}.scroll{overflow-x:auto}figure svg{width:100%;"
        "height:auto;max-width:460px}</style>"
        "</head><body><h1>Meta-evaluation</h1>"
        f"<p>knows: {html.escape(', '.join(labels['knows']))}; never saw: "
        f"{html.escape(', '.join(labels['never_saw']))}; retain: {html.escape(labels['retain'])}</p>"
        f"<p id='convention'>{html.escape(result['convention'])}</p>{figure}"
        "<div class='scroll'><table id='meta-eval'><tr><th>metric</th><th>faithfulness AUC [95% CI]</th><th>R</th>"
        f"<th>Q</th><th>HM</th></tr>{''.join(rows)}</table></div>"
        f"<ul id='notes'>{''.join(f'<li>{n}</li>' for n in notes)}</ul></body></html>"
    )


def write(result: dict, directory: Path) -> tuple[Path, Path]:
    from unlearnbench.atomic import atomic_write_text

    directory.mkdir(parents=True, exist_ok=True)
    json_path, html_path = directory / "meta_eval.json", directory / "meta_eval.html"
    atomic_write_text(json_path, json.dumps(result, indent=2, allow_nan=False))
    atomic_write_text(html_path, render_html(result))
    return json_path, html_path
