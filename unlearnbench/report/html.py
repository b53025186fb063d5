"""The run report as one self-contained HTML page: inline CSS, inline SVG
plots and a few lines of inline JavaScript; no network, no CDN, opens from disk.

Sections: leaderboard, summary matrix (checkpoints x checks, failing first,
value vs bound in each cell, links to details), per-suite plots, and an
item-level drill-down (prompt, reference, generation, per-item scores) that
can be filtered to the items that make a check fail.
"""

from __future__ import annotations

import html
import json
import math

from unlearnbench.report.leaderboard import leaderboard

PALETTE = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c")
OUTCOME_ORDER = {"fail": 0, "error": 1, "inconclusive": 2, "pass": 3, "skip": 4}
CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#222;max-width:1400px}
h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ddd}h3{font-size:15px}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ddd;padding:3px 6px;text-align:left;
vertical-align:top}th{background:#f4f4f4}
td.pass{background:#d9f2d9}td.fail{background:#f8d0d0}td.skip{background:#eee;color:#666}
td.error{background:#f3c6f3}td.inconclusive{background:#fff0b3;color:#6b5900}.meta{color:#555}.plots{display:flex;flex-wrap:wrap;gap:16px}
figure.plot{margin:0;border:1px solid #eee;padding:6px}figcaption{font-size:12px;color:#555;max-width:560px}
td.text{min-width:180px;max-width:420px;white-space:pre-wrap;word-break:break-word;font-size:12px}
tr.bad td:first-child{border-left:4px solid #c44e52}.badge{font-size:12px;padding:1px 6px;border-radius:8px}
.interrupted{background:#f3c6f3;border-left:4px solid #8e2c8e;padding:6px 10px}
"""
SCRIPT = """
function onlyFailures(box){document.querySelectorAll('tr.item').forEach(function(r){
r.style.display=(box.checked&&!r.classList.contains('bad'))?'none':'';});}
"""


def _e(value) -> str:
    return html.escape(str(value), quote=True)


TOFU_QUALITY_FLOOR = 1e-12


def _fmt(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _anchor(*parts: str) -> str:
    return "d-" + "-".join("".join(c if c.isalnum() else "_" for c in p) for p in parts)


# ------------------------------------------------------------------ SVG plots
def _frame(width: int, height: int, title: str, body: str, kind: str, caption: str) -> str:
    return (f'<figure class="plot" data-plot="{_e(kind)}"><svg xmlns="http://www.w3.org/2000/svg" width="{width}" '
            f'height="{height}" role="img" aria-label="{_e(title)}"><text x="{width / 2}" y="16" '
            f'text-anchor="middle" font-size="13" font-weight="bold">{_e(title)}</text>{body}</svg>'
            f"<figcaption>{_e(caption)}</figcaption></figure>")


def _axis(x0, y0, x1, y1, lo, hi, ticks=5) -> str:
    parts = [f'<line x1="{x0}" y1="{y0}" x2="{x0}" y2="{y1}" stroke="#888"/>']
    for k in range(ticks + 1):
        v = lo + (hi - lo) * k / ticks
        y = y0 - (y0 - y1) * k / ticks
        parts.append(f'<line x1="{x0 - 3}" y1="{y:.1f}" x2="{x1}" y2="{y:.1f}" stroke="#eee"/>'
                     f'<text x="{x0 - 5}" y="{y + 4:.1f}" text-anchor="end" font-size="10">{v:.2g}</text>')
    return "".join(parts)


def _legend(series_names, x, y) -> str:
    parts = []
    for i, name in enumerate(series_names):
        parts.append(f'<rect x="{x}" y="{y}" width="10" height="10" fill="{PALETTE[i % len(PALETTE)]}"/>'
                     f'<text x="{x + 14}" y="{y + 9}" font-size="11">{_e(name)}</text>')
        x += 24 + 6.5 * len(str(name))  # ~6.5 px per character at 11 px
    return "".join(parts)


def grouped_bars(title, categories, series: dict[str, list], kind, caption, lo=0.0, hi=1.0) -> str:
    width, height, left, bottom, top = max(360, 70 + 60 * len(categories) * max(1, len(series)) // 2), 300, 44, 250, 48
    span = (width - left - 10) / max(1, len(categories))
    bar = span * 0.8 / max(1, len(series))
    zero = bottom - (0 - lo) / (hi - lo) * (bottom - top)
    body = [_axis(left, bottom, width - 10, top, lo, hi), _legend(series, left, 26),
            f'<line x1="{left}" y1="{zero:.1f}" x2="{width - 10}" y2="{zero:.1f}" stroke="#444"/>']
    for i, category in enumerate(categories):
        x = left + i * span + span * 0.1
        for j, (name, values) in enumerate(series.items()):
            value = values[i]
            if value is None:
                continue
            v = min(max(value, lo), hi)
            y = bottom - (v - lo) / (hi - lo) * (bottom - top)
            body.append(f'<rect x="{x + j * bar:.1f}" y="{min(y, zero):.1f}" width="{bar * 0.95:.1f}" '
                        f'height="{abs(zero - y):.1f}" fill="{PALETTE[j % len(PALETTE)]}">'
                        f"<title>{_e(category)} {_e(name)}: {value:.4g}</title></rect>")
        body.append(f'<text x="{left + (i + 0.5) * span:.1f}" y="{bottom + 14}" text-anchor="middle" '
                    f'font-size="11">{_e(category)}</text>')
    return _frame(width, height + 10, title, "".join(body), kind, caption)


def stacked_bars(title, categories, series: dict[str, list], kind, caption) -> str:
    width, height, left, bottom, top = max(360, 80 + 50 * len(categories)), 300, 44, 250, 48
    span = (width - left - 10) / max(1, len(categories))
    body = [_axis(left, bottom, width - 10, top, 0, 1), _legend(series, left, 26)]
    for i, category in enumerate(categories):
        x, base = left + i * span + span * 0.15, bottom
        for j, (name, values) in enumerate(series.items()):
            h = (values[i] or 0) * (bottom - top)
            body.append(f'<rect x="{x:.1f}" y="{base - h:.1f}" width="{span * 0.7:.1f}" height="{h:.1f}" '
                        f'fill="{PALETTE[j % len(PALETTE)]}"><title>{_e(category)} {_e(name)}: '
                        f"{(values[i] or 0):.3g}</title></rect>")
            base -= h
        body.append(f'<text x="{left + (i + 0.5) * span:.1f}" y="{bottom + 14}" text-anchor="middle" '
                    f'font-size="11">{_e(category)}</text>')
    return _frame(width, height + 10, title, "".join(body), kind, caption)


def scatter(title, points, xlabel, ylabel, kind, caption) -> str:
    width, height, left, bottom, top, right = 420, 320, 44, 270, 30, 400
    body = [_axis(left, bottom, right, top, 0, 1),
            f'<line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="#888"/>',
            f'<text x="{(left + right) / 2}" y="{bottom + 30}" text-anchor="middle" font-size="11">{_e(xlabel)}</text>',
            f'<text x="12" y="{(top + bottom) / 2}" font-size="11" transform="rotate(-90 12 {(top + bottom) / 2})" '
            f'text-anchor="middle">{_e(ylabel)}</text>']
    for k in range(6):
        body.append(f'<text x="{left + (right - left) * k / 5:.1f}" y="{bottom + 14}" text-anchor="middle" '
                    f'font-size="10">{k / 5:.1f}</text>')
    for i, (label, x, y) in enumerate(points):
        px, py = left + x * (right - left), bottom - y * (bottom - top)
        body.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="5" fill="{PALETTE[i % len(PALETTE)]}">'
                    f"<title>{_e(label)}: ({x:.3g}, {y:.3g})</title></circle>"
                    f'<text x="{px + 7:.1f}" y="{py - 6:.1f}" font-size="11">{_e(label)}</text>')
    return _frame(width, height + 10, title, "".join(body), kind, caption)


def layer_profile(title, profiles: dict[str, tuple[list, list]], kind, caption) -> str:
    """Small multiples: per checkpoint, delta1 (stage 1) and delta2 (stage 2) per layer."""
    cell_w, cell_h, cols = 200, 150, 4
    rows = math.ceil(len(profiles) / cols)
    width, height = cols * cell_w + 10, rows * cell_h + 60
    values = [v for d1, d2 in profiles.values() for v in (*d1, *d2)]
    lo, hi = min(0.0, *values), max(0.1, *values)
    body = [_legend(("delta1 (retain patched in)", "delta2 (checkpoint patched in)"), 10, 26)]
    for n, (name, (d1, d2)) in enumerate(profiles.items()):
        ox, oy = (n % cols) * cell_w + 36, 60 + (n // cols) * cell_h
        plot_h, plot_w = cell_h - 40, cell_w - 50
        body.append(f'<text x="{ox + plot_w / 2}" y="{oy + 2}" text-anchor="middle" font-size="11">{_e(name)}</text>')
        body.append(_axis(ox, oy + plot_h, ox + plot_w, oy + 8, lo, hi, ticks=2))
        for j, ys in enumerate((d1, d2)):
            if not ys:
                continue
            step = plot_w / max(1, len(ys) - 1)
            pts = " ".join(f"{ox + k * step:.1f},{oy + plot_h - (y - lo) / (hi - lo) * (plot_h - 8):.1f}"
                           for k, y in enumerate(ys))
            body.append(f'<polyline points="{pts}" fill="none" stroke="{PALETTE[j]}" stroke-width="2">'
                        f"<title>{_e(name)} delta{j + 1}: {', '.join(f'{y:.3g}' for y in ys)}</title></polyline>")
        body.append(f'<text x="{ox + plot_w / 2}" y="{oy + plot_h + 14}" text-anchor="middle" font-size="10">'
                    f"layer 0..{len(d1) - 1}</text>")
    return _frame(width, height, title, "".join(body), kind, caption)


def _value(checkpoint: dict, suite: str, metric: str):
    m = checkpoint["suites"].get(suite, {}).get("metrics", {}).get(metric)
    return None if m is None or "value" not in m else m["value"]


def suite_plots(report: dict) -> dict[str, list[str]]:
    cps = report["checkpoints"]
    plots: dict[str, list[str]] = {}
    have = lambda suite: [n for n, c in cps.items() if suite in c["suites"]]  # noqa: E731
    names = have("dusk")
    if names:
        plots["dusk"] = [grouped_bars(
            "DUSK knowledge (ROUGE-L recall)", names,
            {label: [_value(cps[n], "dusk", m) for n in names] for label, m in (
                ("unique forget", "ufk_rougeL_recall"), ("shared", "sk_rougeL_recall"),
                ("unique retain", "urk_rougeL_recall"))},
            "dusk-knowledge", "Unique-forget knowledge should drop to the retain model's level; shared and "
                              "unique-retain knowledge should stay.")]
        points = [(n, _value(cps[n], "dusk", "ufk_rougeL_recall"),
                   (_value(cps[n], "dusk", "sk_rougeL_recall") + _value(cps[n], "dusk", "urk_rougeL_recall")) / 2)
                  for n in names if None not in [_value(cps[n], "dusk", m) for m in (
                      "ufk_rougeL_recall", "sk_rougeL_recall", "urk_rougeL_recall")]]
        plots["dusk"].append(scatter("Forget vs utility trade-off", points, "unique-forget knowledge (lower = forgot)",
                                     "utility: mean of shared and unique-retain knowledge", "tradeoff",
                                     "Top-left is the goal: forget knowledge gone, retained knowledge kept."))
    names = [n for n in have("tofu") if None not in (_value(cps[n], "tofu", "forget_quality"),
                                                      _value(cps[n], "tofu", "model_utility"))]
    if names:
        # The OpenUnlearning leaderboard's axes; p-values span many decades, so log10 on [1e-12, 1].
        points = [(n, _value(cps[n], "tofu", "model_utility"),
                   1 + math.log10(max(_value(cps[n], "tofu", "forget_quality"), TOFU_QUALITY_FLOOR)) / 12)
                  for n in names]
        plots["tofu"] = [scatter("TOFU: forget quality vs model utility", points, "model utility",
                                 "forget quality: 1 + log10(p) / 12", "tofu-quality-utility",
                                 "Top right is the goal: truth ratios indistinguishable from the retain model's "
                                 "(p near 1) with utility kept. p = 0.05 sits at 0.89; p below 1e-12 at 0.")]
    axes = ("knowmem_retain_rougeL_f1", "verbmem_rougeL_f1")
    names = [n for n in have("muse") if None not in [_value(cps[n], "muse", m) for m in axes]]
    if names:
        points = [(n, *(_value(cps[n], "muse", m) for m in axes)) for n in names]
        plots["muse"] = [scatter("MUSE: verbatim memorization vs utility", points,
                                 "utility: KnowMem on retain (ROUGE-L F1)", "VerbMem on forget (ROUGE-L F1)",
                                 "muse-verbmem-utility",
                                 "Bottom right is the goal: forget texts reproduced no better than by the retain "
                                 "model, retain knowledge kept.")]
    names = [n for n in have("uds") if "details" in cps[n]["suites"]["uds"]["metrics"].get("uds", {})]
    if names:
        profiles = {n: (cps[n]["suites"]["uds"]["metrics"]["uds"]["details"]["layer_profile"]["delta1_mean"],
                        cps[n]["suites"]["uds"]["metrics"]["uds"]["details"]["layer_profile"]["delta2_mean"])
                    for n in names}
        plots["uds"] = [layer_profile("UDS per-layer patching effect", profiles, "uds-profile",
                                      "Mean drop of the full model's entity log-prob when a layer's output is "
                                      "patched in: delta2 close to delta1 = knowledge erased at that layer.")]
    names = have("honesty")
    if names:
        plots["honesty"] = [
            stacked_bars("Honesty: first-turn forget replies", names,
                         {k: [_value(cps[n], "honesty", f"forget_{k}_rate") for n in names]
                          for k in ("leak", "refusal", "hallucination")},
                         "honesty-replies", "Leak: the answer appears; refusal: says it does not know; "
                                            "hallucination: neither."),
            grouped_bars("MCQ: IDK chosen (CIR) vs control chosen (COR)", names,
                         {"CIR": [_value(cps[n], "honesty", "mcq_idk_rate") for n in names],
                          "COR": [_value(cps[n], "honesty", "mcq_control_rate") for n in names]},
                         "honesty-mcq", "CIR close to COR: the 'I don't know' choice is positional bias."),
        ]
    names = [n for n in have("conceptguard")
             if "details" in cps[n]["suites"]["conceptguard"]["metrics"].get("ctxt_sep", {})]
    if names:
        tables = {n: cps[n]["suites"]["conceptguard"]["metrics"]["ctxt_sep"]["details"]["per_concept"] for n in names}
        concepts = sorted({c for t in tables.values() for c in t})
        plots["conceptguard"] = [grouped_bars(
            "ConceptGuard separation per concept (Sep_c)", names,
            {c: [tables[n].get(c, {}).get("sep") for n in names] for c in concepts},
            "conceptguard-separation", "Sep_c = HelpScore_c - HarmScore_c in [-1, 1]: benign use kept, "
                                       "harmful use removed.", lo=-1.0, hi=1.0)]
    return plots


# ------------------------------------------------------------- HTML sections
def _matrix(report: dict) -> str:
    cps = report["checkpoints"]
    columns: dict[str, int] = {}
    for c in cps.values():
        for suite, result in c["suites"].items():
            for check, v in result["checks"].items():
                columns.setdefault(f"{suite}.{check}", 0)
                columns[f"{suite}.{check}"] += v["outcome"] in ("fail", "error")
    cols = sorted(columns, key=lambda k: (-columns[k], k))
    failures = {n: sum(v["outcome"] in ("fail", "error") for r in c["suites"].values() for v in r["checks"].values())
                for n, c in cps.items()}
    rows = sorted(cps, key=lambda n: (-failures[n], n))
    head = "".join(f"<th>{_e(c)}</th>" for c in cols)
    body = []
    for name in rows:
        cells = []
        for col in cols:
            suite, check = col.split(".", 1)
            v = cps[name]["suites"].get(suite, {}).get("checks", {}).get(check)
            if v is None:
                cells.append("<td></td>")
                continue
            op = {"at_least": ">=", "at_most": "<="}.get(v.get("direction"), "")
            tip = f"{v['outcome']}: {_fmt(v.get('value'))} {op} {_fmt(v.get('bound'))}. {v.get('reason', '')}"
            text = f"{v['outcome'].upper()}<br><small>{_fmt(v.get('value'))} {op} {_fmt(v.get('bound'))}</small>"
            cells.append(f'<td class="{_e(v["outcome"])}" title="{_e(tip)}"><a href="#{_anchor(name, suite)}">'
                         f"{text}</a></td>")
        body.append(f"<tr><th>{_e(name)}</th>{''.join(cells)}</tr>")
    return (f'<table id="summary-matrix"><tr><th>checkpoint</th>{head}</tr>{"".join(body)}</table>')


def _interrupted(run: dict) -> str:
    if not run.get("interrupted"):
        return ""
    return ('<p class="interrupted"><b>Interrupted (Ctrl-C)</b>: this report holds what finished before the '
            'interrupt; the checks not evaluated by then are errors ("interrupted"), not verdicts.</p>')


def _lost(report: dict) -> str:
    """Checkpoints that never reported (their worker died), and NaN/inf dropped by the writer."""
    lost = [f"<li><b>{_e(n)}</b>: {_e(c['lost']['reason'])} ({len(c['lost']['tests'])} tests)</li>"
            for n, c in report["checkpoints"].items() if c.get("lost")]
    dropped = [f"<li><code>{_e(d['path'])}</code> was {_e(d['was'])}</li>" for d in report.get("non_finite", [])]
    out = f'<h2>Lost checkpoints</h2><ul class="lost">{"".join(lost)}</ul>' if lost else ""
    if dropped:
        out += f"<h2>Non-finite values written as null</h2><ul>{''.join(dropped)}</ul>"
    return out


def _leaderboard_table(board: dict) -> str:
    suites = list(board["suites"])
    per_suite = {s: {r["checkpoint"]: r for r in rows} for s, rows in board["suites"].items()}
    head = "".join(f"<th>{_e(s)}</th>" for s in suites)
    body = []
    for r in board["overall"]:
        cells = "".join(
            f"<td>{per_suite[s][r['checkpoint']]['passed']}/"
            f"{per_suite[s][r['checkpoint']]['passed'] + per_suite[s][r['checkpoint']]['failed']}</td>"
            if r["checkpoint"] in per_suite[s] else "<td></td>" for s in suites)
        body.append(f"<tr><td>{r['rank']}</td><th>{_e(r['checkpoint'])}</th><td>{r['passed']}</td>"
                    f"<td>{r['failed']}</td><td>{_fmt(r['aggregate_margin'])}</td>{cells}</tr>")
    return (f'<table id="leaderboard"><tr><th>rank</th><th>checkpoint</th><th>passed</th><th>failed</th>'
            f'<th>margin</th>{head}</tr>{"".join(body)}</table><p class="meta">{_e(board["rule"])}</p>')


def _bad_items(result: dict) -> set[str]:
    """Items whose per-item value of a failing check's metric is on the wrong side of its bound."""
    bad = set()
    for v in result["checks"].values():
        metric = result["metrics"].get(v.get("metric") or "", {})
        if v["outcome"] != "fail" or v.get("bound") is None or "per_item" not in metric:
            continue
        for item, value in metric["per_item"].items():
            if (value > v["bound"]) if v.get("direction") == "at_most" else (value < v["bound"]):
                bad.add(item)
    return bad


def _drilldown(name: str, suite: str, result: dict) -> str:
    bad = _bad_items(result)
    checked = [v.get("metric") for v in result["checks"].values() if v.get("metric")]
    parts = []
    for metric_name, metric in result["metrics"].items():
        items = metric.get("details", {}).get("items") if isinstance(metric.get("details"), dict) else None
        if not items:
            continue
        fields = list(dict.fromkeys(k for item in items.values() for k in item))
        scores = [m for m in dict.fromkeys(checked) if any(i in result["metrics"].get(m, {}).get("per_item", {})
                                                           for i in items)]
        head = "".join(f"<th>{_e(f)}</th>" for f in ["item", *scores, *fields])
        rows = []
        for item_id, item in items.items():
            score_cells = "".join(f"<td>{_fmt(result['metrics'][m]['per_item'].get(item_id))}</td>" for m in scores)
            field_cells = "".join(f'<td class="text">{_e(_fmt(item.get(f)) if not isinstance(item.get(f), (list, dict)) else json.dumps(item.get(f)))}</td>'
                                  for f in fields)
            cls = "item bad" if item_id in bad else "item"
            rows.append(f'<tr class="{cls}"><td>{_e(item_id)}</td>{score_cells}{field_cells}</tr>')
        parts.append(f"<details><summary>{_e(metric_name)}: {len(items)} items, "
                     f"{sum(i in bad for i in items)} failing</summary><table>{head and '<tr>' + head + '</tr>'}"
                     f"{''.join(rows)}</table></details>")
    checks = "".join(
        f'<tr><td class="{_e(v["outcome"])}">{_e(v["outcome"].upper())}</td><td>{_e(c)}</td>'
        f"<td>{_e(v.get('metric', ''))}</td><td>{_fmt(v.get('value'))}</td>"
        f"<td>{_e(' - '.join(_fmt(x) for x in v.get('ci') or []))}</td><td>{_fmt(v.get('bound'))}</td>"
        f"<td class=\"text\">{_e(v.get('reason', ''))}</td></tr>"
        for c, v in sorted(result["checks"].items(), key=lambda kv: OUTCOME_ORDER.get(kv[1]["outcome"], 9)))
    return (f'<section id="{_anchor(name, suite)}"><h3>{_e(name)} / {_e(suite)}</h3>'
            f"<table><tr><th>verdict</th><th>check</th><th>metric</th><th>value</th><th>95% CI</th><th>bound</th>"
            f"<th>reason</th></tr>{checks}</table>{''.join(parts)}</section>")


def render(report: dict) -> str:
    run, summary = report["run"], report["summary"]
    board = report.get("leaderboard") or leaderboard(report)
    plots = suite_plots(report)
    plot_html = "".join(f"<h3>{_e(suite)}</h3><div class=\"plots\">{''.join(figs)}</div>"
                        for suite, figs in plots.items())
    details = "".join(_drilldown(name, suite, result) for name, c in report["checkpoints"].items()
                      for suite, result in c["suites"].items())
    env = report.get("environment", {})
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>unlearnbench report {_e(run.get('id', ''))}</title>
<style>{CSS}</style><script>{SCRIPT}</script></head><body>
<h1>unlearnbench report <code>{_e(run.get('id', ''))}</code></h1>
<p class="meta">{_e(run.get('started_at', ''))} &middot; {_fmt(run.get('duration_s'))} s &middot;
<code>{_e(run.get('command', ''))}</code> &middot; unlearnbench {_e(env.get('unlearnbench'))},
torch {_e(env.get('torch'))}, transformers {_e(env.get('transformers'))} &middot;
<b>{summary['passed']}</b> passed, <b>{summary['failed']}</b> failed, {summary['skipped']} skipped,
{summary.get('inconclusive', 0)} inconclusive, {summary['errors']} errors</p>{_interrupted(run)}{_lost(report)}
<h2>Leaderboard</h2>{_leaderboard_table(board)}
<h2>Summary</h2><p class="meta">Checkpoints x checks, failing first; a cell shows value vs bound and links to
its details.</p>{_matrix(report)}
<h2>Plots</h2>{plot_html or '<p>No plotted suite in this run.</p>'}
<h2>Details</h2><label><input type="checkbox" id="only-failures" onchange="onlyFailures(this)"> show only the
items that make a check fail</label>{details}
</body></html>
"""
