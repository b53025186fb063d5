"""The run report as one self-contained HTML page: inline CSS, inline SVG
plots and a few lines of inline JavaScript; no network, no CDN, opens from disk.

Read top to bottom: the verdict banner and the verdict table (ranked
candidates, then unranked ones, then the reference anchors: the one order of
every table), the check matrix (checks as rows grouped by suite, checkpoints
as columns, in its own scroll box with a sticky header and first column; each
cell links to its check's drill-down), the plots (report/svg.py), and per
checkpoint the drill-down of every check: value, CI, bound with its
direction, rationale, and the items, with the retain model's output beside
the checkpoint's.

The item tables are most of a report's bytes (a 150-checkpoint sweep's
per-item tables alone were 45 MB of HTML, and Chromium took seconds per
interaction on that DOM). Each checkpoint's tables are written once, as a
gzip-compressed JSON list inside an inert <script> block, and a table
becomes HTML when its item list is first opened.
"""

from __future__ import annotations

import base64
import gzip
import html
import json

from unlearnbench.report.curves import series_figures
from unlearnbench.report.text import SYMBOLS, bound_text, evidence_line, forget_text, half_width, utility_text
from unlearnbench.report.verdicts import assess, suite_counts
from unlearnbench.report.view import suite_views

OUTCOME_ORDER = {"fail": 0, "error": 1, "inconclusive": 2, "pass": 3, "skip": 4}
SYMBOL = {"pass": "✓", "fail": "✗", "error": "!", "inconclusive": "?", "skip": "–"}
TEXT_FIELDS = ("generation", "reply", "continuation")
# A metric with no per-item values of its own, and the per-item metric behind it.

CSS = """
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;padding:16px;color:#222;max-width:1400px}
h1{font-size:21px;margin:0 0 4px}h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ddd}h3{font-size:15px}
code{overflow-wrap:anywhere}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ddd;padding:3px 6px;text-align:left;
vertical-align:top}th{background:#f4f4f4}
.meta{color:#555;overflow-wrap:anywhere}.rule{color:#333;font-size:13px;max-width:70em}
.pass{background:#d9f2d9}.fail{background:#f8d0d0}.skip{background:#eee;color:#666}.none{color:#999;text-align:center}
.error{background:#f3c6f3}.inconclusive{background:#fff0b3;color:#6b5900}
.lean-pass{background:repeating-linear-gradient(135deg,#fff0b3 0 5px,#d9f2d9 5px 10px)}
.lean-fail{background:repeating-linear-gradient(135deg,#fff0b3 0 5px,#f8d0d0 5px 10px)}
.pill{display:inline-block;padding:0 8px;border-radius:9px;font-weight:600;font-size:12px}
.badge{display:inline-block;font-size:11px;padding:0 6px;border-radius:8px;background:#e4e8f4;color:#243a73;
margin-left:4px;white-space:nowrap}
.banner{border-left:6px solid #888;background:#f7f7f7;padding:8px 12px;margin:12px 0}
.banner.fail{border-color:#c44e52;background:#fbeaea}.banner.pass{border-color:#3a7d3a;background:#eaf6ea}
.banner.inconclusive{border-color:#b59a00;background:#fff8d6}
.scroll{overflow:auto;max-width:100%;border:1px solid #ddd}
#matrix-box{max-height:75vh}
#summary-matrix{margin:0;font-size:12px}
#summary-matrix thead th{position:sticky;top:0;z-index:2;background:#f4f4f4;min-width:64px;max-width:120px;
overflow-wrap:anywhere}
#summary-matrix th.check{position:sticky;left:0;z-index:1;background:#fafafa;min-width:150px;max-width:240px;
overflow-wrap:anywhere;font-weight:normal}
#summary-matrix thead th.check{z-index:3;background:#f4f4f4;font-weight:bold}
#summary-matrix td{white-space:nowrap;text-align:center}#summary-matrix td a{color:inherit;text-decoration:none;
display:block}
#summary-matrix tr.suite th{background:#e9edf5;text-align:left;position:sticky;left:0}
#summary-matrix tbody.collapsed tr.row{display:none}
button.toggle{font:inherit;font-size:12px;border:1px solid #aab;background:#fff;border-radius:4px;cursor:pointer;
margin-right:6px}
.flag{color:#8a5a00;font-size:11px;display:block}
#verdicts{margin:0;font-size:13px}#verdicts td,#verdicts th{white-space:nowrap}
#verdicts tbody th{position:sticky;left:0;background:#fafafa}
.plots{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,460px),1fr));gap:16px}
figure.plot{margin:0;border:1px solid #eee;padding:6px;min-width:0}figure.plot svg{width:100%;height:auto;
display:block}
figcaption{font-size:12px;color:#555}
details.cp{border:1px solid #ddd;margin:6px 0;padding:4px 8px}details.cp>summary{cursor:pointer;font-weight:600}
.check{border-top:1px solid #eee;padding:6px 0;scroll-margin-top:8px}.check:target{background:#fffbe0}
.check h4{margin:4px 0;font-size:14px}.check dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 10px;
margin:4px 0}.check dt{color:#555}.check dd{margin:0;overflow-wrap:anywhere}
td.text{min-width:160px;max-width:420px;white-space:pre-wrap;overflow-wrap:anywhere;font-size:12px}
tr.bad td:first-child{border-left:4px solid #c44e52}
.interrupted{background:#f3c6f3;border-left:4px solid #8e2c8e;padding:6px 10px}
@media (max-width:600px){body{padding:8px;font-size:13px}td,th{padding:2px 4px}}
"""
# The item lists: a list's table is unpacked from its container's (details.cp) packed tables when first opened.
# Also on the leaderboard site's checkpoint pages (report/site.py).
ITEM_SCRIPT = """
function onlyFailures(box,root){if(!box)return;(root||document).querySelectorAll('tr.item').forEach(function(r){
r.style.display=(box.checked&&!r.classList.contains('bad'))?'none':'';});}
var itemTables={};
function tablesOf(cp){if(!itemTables[cp.id]){var packed=cp.querySelector('script.item-tables').textContent;
var bytes=Uint8Array.from(atob(packed),function(c){return c.charCodeAt(0);});
itemTables[cp.id]=new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'))).text()
.then(JSON.parse);}return itemTables[cp.id];}
function loadItems(d){if(d.dataset.loaded)return;d.dataset.loaded='1';var box=d.querySelector('.scroll');
Promise.resolve(d.closest('details.cp')).then(tablesOf).then(function(t){box.innerHTML=t[Number(d.dataset.table)];
onlyFailures(document.getElementById('only-failures'),box);box.dataset.ready='1';},function(e){
box.textContent='This browser could not unpack the item table ('+e+'); the items are in report.json.';});}
document.addEventListener('toggle',function(e){var d=e.target;
if(d.matches&&d.matches('details.items')&&d.open)loadItems(d);},true);
"""
SCRIPT = (
    ITEM_SCRIPT
    + """
function toggleSuite(button){var body=button.closest('tbody');body.classList.toggle('collapsed');
button.textContent=body.classList.contains('collapsed')?'+':'−';}
function openTarget(){var id=decodeURIComponent(location.hash.slice(1));var el=id&&document.getElementById(id);
if(!el)return;for(var p=el.parentElement;p;p=p.parentElement){if(p.tagName==='DETAILS')p.open=true;}
el.scrollIntoView();}
window.addEventListener('hashchange',openTarget);window.addEventListener('DOMContentLoaded',openTarget);
"""
)


def _e(value) -> str:
    return html.escape(str(value), quote=True)


def _fmt(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _slug(*parts: str) -> str:
    return "-".join("".join(c if c.isalnum() else "_" for c in p) for p in parts)


def check_anchor(name: str, suite: str, check: str) -> str:
    return "c-" + _slug(name, suite, check)


def checkpoint_anchor(name: str) -> str:
    return "cp-" + _slug(name)


def pill(verdict: str) -> str:
    return f'<span class="pill {_e(verdict)}">{_e(verdict.upper())}</span>'


def _badge(role: str | None) -> str:
    return f'<span class="badge">reference: {_e(role)}</span>' if role else ""


# ------------------------------------------------------------------ plots
def suite_plots(report: dict, extra: dict[str, list[str]] | None = None) -> dict[str, list[str]]:
    """Each suite's figures: its spec's `plots` hook (a suite this installation
    does not know has none), then the `extra` ones a conftest.py adds
    (hookspec.py); in the matrix's suite order."""
    from unlearnbench.suites import SUITES

    plots = {}
    for suite, view in suite_views(report).items():
        hook = SUITES[suite].hook("plots") if suite in SUITES else None
        figures = [*(hook(view) if hook else []), *(extra or {}).get(suite, [])]
        if figures:
            plots[suite] = figures
    return plots


# --------------------------------------------------------------- sections
def _banner(report: dict, a: dict) -> str:
    verdicts, board = a["verdicts"], a["ranking"]
    candidates = [n for n in a["order"] if not verdicts[n]["role"]]
    counts = {k: sum(verdicts[n]["verdict"] == k for n in candidates) for k in ("pass", "fail", "inconclusive")}
    overall = "fail" if counts["fail"] else "inconclusive" if counts["inconclusive"] else "pass"
    best = board["rows"][0] if board["rows"] else None
    lines = [
        f"<b>{len(candidates)} candidate checkpoint{'s' if len(candidates) != 1 else ''}: "
        f"{counts['pass']} pass the gate, {counts['fail']} fail, {counts['inconclusive']} inconclusive.</b>"
    ]
    if best:
        name = f"{best['series']} at step {best['step']}" if best.get("series") else best["checkpoint"]
        lines.append(
            f"Best ranked: <b>{_e(name)}</b> ({_e(best['verdict'].upper())}, "
            f"{best['passed']}/{len(board['shared_checks'])} shared checks passed)."
        )
    if a["retain_fails"]:
        lines.append(
            f"The retain model itself fails {len(a['retain_fails'])} check"
            f"{'s' if len(a['retain_fails']) != 1 else ''} ({_e(', '.join(a['retain_fails']))}): no "
            "checkpoint can be expected to pass them on this data; they are flagged on every row."
        )
    return f'<div class="banner {overall}" id="verdict-banner">{" ".join(lines)}</div>'


def _verdict_table(report: dict, a: dict) -> str:
    verdicts, board = a["verdicts"], a["ranking"]
    ranked = {r["checkpoint"]: r for r in board["rows"]}
    series_rank = {r["series"]: r["rank"] for r in board["rows"] if r.get("series")}
    steps = {s["checkpoint"]: (series, s) for series, rows in (board.get("series") or {}).items() for s in rows}
    unranked = {r["checkpoint"]: r["reason"] for r in board["unranked"]}
    suites = list(dict.fromkeys(s for n in a["order"] for s in report["checkpoints"][n]["suites"]))
    head = "".join(f"<th>{_e(s)}</th>" for s in suites)
    rows = []
    for name in a["order"]:
        v = verdicts[name]
        r = ranked.get(name)
        rank = str(r["rank"]) if r else ("ref" if v["role"] else "–")
        step_note = ""
        if name in steps:  # a training run's step: its series is ranked once, at its best step
            series, r = steps[name]
            best = ranked.get(name)
            rank = str(series_rank[series]) if best else f"({series_rank[series]})"
            step_note = f' <span class="badge">{_e(series)} step {r["step"]}{", best" if best else ""}</span>'
        cells = []
        for suite in suites:
            c = v["suites"].get(suite)
            cells.append(
                f'<td class="{c["verdict"]}">{c["passed"]}/{c["judged"]}</td>' if c else '<td class="none">—</td>'
            )
        first = ", ".join(
            f'<a href="#{check_anchor(name, *key.split(".", 1))}">{_e(key)}</a>'
            + (" <small>(retain too)</small>" if key in v["retain_fails_too"] else "")
            for key in v["failing"][:3]
        ) + (", …" if len(v["failing"]) > 3 else "")
        if r:
            note = f"<td>{_e(utility_text(r))}</td><td>{_e(forget_text(r))}</td>"
        else:
            why = f"{v['role']} model: anchor, not ranked" if v["role"] else f"not ranked: {unranked.get(name, '')}"
            note = f'<td colspan="2">{_e(why)}</td>'
        rows.append(
            f'<tr><td>{rank}</td><th><a href="#{checkpoint_anchor(name)}">{_e(name)}</a>{_badge(v["role"])}'
            f"{step_note}</th>"
            f"<td>{pill(v['verdict'])}</td>{''.join(cells)}{note}<td>{first}</td></tr>"
        )
    return (
        f'<div class="scroll"><table id="verdicts"><thead><tr><th>rank</th><th>checkpoint</th><th>verdict</th>'
        f"{head}<th>utility failed</th><th>forget (decided)</th><th>first failing checks</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody>"
        f'</table></div><p class="rule" id="ranking-rule">{_e(board["rule"])} Suite cells: checks passed / '
        "judged.</p>"
    )


def _curves(report: dict, a: dict) -> str:
    figures = series_figures(report, a)
    if not figures:
        return ""
    return (
        f'<h2 id="curves">Unlearning curves</h2><p class="meta">Each training run (its checkpoint-&lt;step&gt; '
        "folders) ranks once, at its best step; its steps below are in step order.</p>"
        f'<div class="plots">{"".join(figures)}</div>'
    )


def bound_label(verdict: dict) -> str:
    op = SYMBOLS.get(verdict.get("direction") or "", "")
    ref = verdict.get("relative_to")
    if ref:
        sign = "−" if verdict.get("direction") == "at_least" else "+"
        return f"{op} {ref} {sign} {_fmt(verdict.get('margin') or 0.0)}"
    return f"{op} {_fmt(verdict.get('bound'))}" if verdict.get("bound") is not None else ""


def _matrix(report: dict, a: dict) -> str:
    cps, order = report["checkpoints"], a["order"]
    checks: dict[str, dict[str, dict]] = {}
    for name in order:
        for suite, result in cps[name]["suites"].items():
            for check, v in result["checks"].items():
                checks.setdefault(suite, {}).setdefault(check, v)
    head = "".join(
        f"<th>{_e(n)}{' <span class=badge>ref</span>' if a['verdicts'][n]['role'] else ''}</th>" for n in order
    )
    bodies = []
    for suite, suite_checks in checks.items():
        rows = [
            f'<tr class="suite"><th colspan="2"><button class="toggle" onclick="toggleSuite(this)" '
            f'aria-label="collapse {_e(suite)}">−</button>{_e(suite)}</th>'
            f'<td colspan="{len(order)}"></td></tr>'
        ]
        for check, example in suite_checks.items():
            key = f"{suite}.{check}"
            flag = '<span class="flag">retain fails this too</span>' if key in a["retain_fails"] else ""
            cells = []
            for name in order:
                v = cps[name]["suites"].get(suite, {}).get("checks", {}).get(check)
                if v is None:
                    cells.append('<td class="none" title="not run">—</td>')
                    continue
                value = f"{v['value']:.3g}" if isinstance(v.get("value"), (int, float)) else v["outcome"]
                tip, css = v.get("reason", ""), v["outcome"]
                if v.get("lean"):  # underpowered: hatched in the colour it leans to, the items needed first
                    css += f" lean-{v['lean']}"
                    needed = f"~{v['n_needed']} items would decide it" if v.get("n_needed") else "undecidable"
                    tip = f"underpowered, leans {v['lean']}: {needed} (n = {v.get('n')}). {tip}"
                cells.append(
                    f'<td class="{_e(css)}" title="{_e(tip)}"><a href="#'
                    f'{check_anchor(name, suite, check)}">{SYMBOL.get(v["outcome"], "")} {_e(value)}</a></td>'
                )
            rows.append(
                f'<tr class="row"><th class="check" title="{_e(example.get("rationale", ""))}">{_e(check)}'
                f"{flag}</th><td>{_e(bound_label(example))}</td>{''.join(cells)}</tr>"
            )
        bodies.append(f"<tbody>{''.join(rows)}</tbody>")
    return (
        f'<div class="scroll" id="matrix-box"><table id="summary-matrix"><thead><tr><th class="check">check</th>'
        f"<th>bound</th>{head}</tr></thead>{''.join(bodies)}</table></div>"
    )


def _interrupted(run: dict) -> str:
    if not run.get("interrupted"):
        return ""
    return (
        '<p class="interrupted"><b>Interrupted (Ctrl-C)</b>: this report holds what finished before the '
        'interrupt; the checks not evaluated by then are errors ("interrupted"), not verdicts.</p>'
    )


def _lost(report: dict) -> str:
    """Checkpoints that never reported (their worker died), and NaN/inf dropped by the writer."""
    lost = [
        f"<li><b>{_e(n)}</b>: {_e(c['lost']['reason'])} ({len(c['lost']['tests'])} tests)</li>"
        for n, c in report["checkpoints"].items()
        if c.get("lost")
    ]
    dropped = [f"<li><code>{_e(d['path'])}</code> was {_e(d['was'])}</li>" for d in report.get("non_finite", [])]
    out = f'<h2>Lost checkpoints</h2><ul class="lost">{"".join(lost)}</ul>' if lost else ""
    if dropped:
        out += f"<h2>Non-finite values written as null</h2><ul>{''.join(dropped)}</ul>"
    return out


# -------------------------------------------------------------- drill-down
def _bad(value, verdict: dict) -> bool:
    failing = verdict["outcome"] == "fail" or verdict.get("lean") == "fail"  # a fail Holm withheld leans fail
    if value is None or verdict.get("bound") is None or not failing:
        return False
    return value > verdict["bound"] if verdict.get("direction") == "at_most" else value < verdict["bound"]


def _text(value) -> str:
    return _e(json.dumps(value) if isinstance(value, (list, dict)) else _fmt(value))


def _item_details(metrics: dict, source: str, ids) -> dict | None:
    """{item id: fields} of metric `source`: its own, else those of the first
    sibling metric whose items share ids with `ids` (e.g. the leak rate's
    replies sit on the refusal rate)."""

    def items_of(metric: dict):
        details = metric.get("details")
        return details.get("items") if isinstance(details, dict) and isinstance(details.get("items"), dict) else None

    own = items_of(metrics.get(source) or {})
    if own is not None:
        return own
    return next((items for m in metrics.values() if (items := items_of(m)) and set(items) & set(ids)), None)


def per_item_source(suite: str, metric: str) -> str:
    """The metric whose items explain `metric` in the drill-down (its suite's
    spec says where another's do: TOFU's forget quality is a test over the
    per-item truth ratios)."""
    from unlearnbench.suites import SUITES

    return dict(SUITES[suite].per_item_source).get(metric, metric) if suite in SUITES else metric


def item_table(
    metric_name: str, source: str, result: dict, verdict: dict, retain: dict | None
) -> tuple[str, str] | None:
    """(summary, table) of the check's items: per-item value, the item's
    fields, and the retain model's output for the same item beside the
    checkpoint's; None when the metric has no items."""
    metrics = result["metrics"]
    metric = metrics.get(source) or {}
    per_item = metric.get("per_item") or {}
    items = _item_details(metrics, source, per_item)
    retain_metrics = (retain or {}).get("metrics") or {}
    retain_metric = retain_metrics.get(source) or {}
    retain_items = (_item_details(retain_metrics, source, items) or {}) if items else {}
    ids = list(items or per_item)
    if not ids:
        return None
    fields = list(dict.fromkeys(k for i in (items or {}).values() for k in i))
    retain_text = [f for f in fields if f in TEXT_FIELDS]
    head = (
        ["item"]
        + ([f"{source} (this)"] + ([f"{source} (retain)"] if retain_metric.get("per_item") else []) if per_item else [])
        + fields
        + [f"{f} (retain)" for f in retain_text if retain_items]
    )
    rows = []
    for item_id in ids:
        value = per_item.get(item_id)
        cells = [f"<td>{_e(item_id)}</td>"]
        if per_item:
            cells.append(f"<td>{_fmt(value)}</td>")
            if retain_metric.get("per_item"):
                cells.append(f"<td>{_fmt(retain_metric['per_item'].get(item_id))}</td>")
        item = (items or {}).get(item_id, {})
        cells += [f'<td class="text">{_text(item.get(f))}</td>' for f in fields]
        if retain_items:
            cells += [f'<td class="text">{_text(retain_items.get(item_id, {}).get(f))}</td>' for f in retain_text]
        bad = source == metric_name and _bad(value, verdict)
        rows.append(f'<tr class="{"item bad" if bad else "item"}">{"".join(cells)}</tr>')
    capped = metric.get("items_capped")
    note = f" (the first {capped['kept']} of {capped['of']})" if capped else ""
    failing = sum('class="item bad"' in r for r in rows)
    what = (
        f"{failing} on the failing side of the bound"
        if source == metric_name
        else f"{source} per item ({metric_name} is computed over all of them)"
    )
    return (
        f"{len(ids)} items{note}, {what}",
        f"<table><tr>{''.join(f'<th>{_e(h)}</th>' for h in head)}</tr>{''.join(rows)}</table>",
    )


def item_list(
    metric_name: str, source: str, result: dict, verdict: dict, retain: dict | None, tables: list[str]
) -> str:
    """The check's item list: its table (`item_table`) is appended to
    `tables` (its checkpoint's, packed by `packed_tables`); the page gets
    the item list, which loads it on opening."""
    found = item_table(metric_name, source, result, verdict, retain)
    if found is None:
        return ""
    summary, table = found
    tables.append(table)
    return (
        f'<details class="items" data-table="{len(tables) - 1}"><summary>{_e(summary)}</summary>'
        f'<div class="scroll"></div></details>'
    )


def packed_tables(tables: list[str]) -> str:
    """A checkpoint's item tables for the page: base64 of the gzipped JSON
    list (no timestamp in the gzip header: the same report renders to the
    same bytes; level 6 is 4% larger than 9 on the zoo's tables and 4x faster)."""
    if not tables:
        return ""
    packed = base64.b64encode(gzip.compress(json.dumps(tables).encode(), compresslevel=6, mtime=0)).decode()
    return f'<script type="application/octet-stream" class="item-tables">{packed}</script>'


def _check_block(
    name: str, suite: str, check: str, v: dict, result: dict, retain: dict | None, retain_fails: bool, tables: list[str]
) -> str:
    metric = result["metrics"].get(v.get("metric") or "", {})
    hw = half_width(v.get("ci"))
    value = (
        ""
        if v.get("value") is None
        else (
            f"{_fmt(v['value'])}"
            + (f" ± {hw:.2g} (95% CI {_fmt(v['ci'][0])} to {_fmt(v['ci'][1])})" if hw else "")
            + (f", n = {metric['n']}" if metric.get("n") is not None else "")
        )
    )
    bound = bound_text(v, SYMBOLS)
    if v.get("relative_to") and v.get("reference_value") is not None:
        bound += f" = {v['relative_to']} {_fmt(v['reference_value'])} {'−' if v['direction'] == 'at_least' else '+'} {_fmt(v.get('margin'))}"
    rows = [
        (
            "verdict",
            pill(v["outcome"])
            + (' <span class="flag">retain fails this too</span>' if retain_fails else "")
            + (f" leans {_e(v['lean'])}" if v.get("lean") else ""),
        ),
        ("metric", _e(v.get("metric", ""))),
        ("value", _e(value)),
        ("must be", _e(bound)),
        ("decided on", _e(decision_text(v))),
        ("why", _e(v.get("rationale", ""))),
        ("result", _e(v.get("reason", ""))),
    ]
    dl = "".join(f"<dt>{k}</dt><dd>{val}</dd>" for k, val in rows if val)
    items = (
        item_list(v["metric"], per_item_source(suite, v["metric"]), result, v, retain, tables)
        if v.get("metric")
        else ""
    )
    return (
        f'<div class="check" id="{check_anchor(name, suite, check)}"><h4>{_e(suite)} · {_e(check)}</h4>'
        f"<dl>{dl}</dl>{items}</div>"
    )


def decision_text(v: dict) -> str:
    """What the rule decided on: 'difference from retain −0.02, 95% interval
    −0.05 to 0.01 (t-clustered-paired-bounded), p = 0.2; 128 items in 16
    clusters (worth 40); can tell 0.03 at 80% power; ~90 items would decide it'."""
    dci, alpha = v.get("decision_ci"), v.get("alpha") or 0.05
    if v.get("decided_by") == "point-estimate" and v.get("rule") == "point-estimate":
        return "its value alone (--point-estimate)"
    if not dci:
        return "no interval: not decided" if v.get("lean") else ""
    quantity = (
        f"difference from {v['relative_to']} {_fmt(v['difference'])}"
        if v.get("difference") is not None
        else "its value"
    )
    parts = [f"{quantity}, {100 * (1 - alpha):.4g}% interval {_fmt(dci[0])} to {_fmt(dci[1])} ({v.get('interval')})"]
    if v.get("p_value") is not None:
        parts[0] += f", p {'<' if v.get('p_below') else '='} {v['p_value']:.2g}" + (
            f" (Holm {v['p_adjusted']:.2g})" if v.get("p_adjusted") is not None else ""
        )
    if v.get("clusters") and v.get("n") and v["clusters"] < v["n"]:
        worth = f" (worth {v['n_effective']:.3g} independent items)" if v.get("n_effective") else ""
        parts.append(f"{v['n']} items in {v['clusters']} clusters{worth}")
    if v.get("mde") is not None:
        power = f" at {100 * v['power']:.0f}% power" if v.get("power") else ""
        parts.append(f"can tell differences of {v['mde']:.2g}{power}")
    if v.get("n_needed"):
        parts.append(f"~{v['n_needed']} items would decide it")
    return "; ".join(parts)


def _drilldown(report: dict, a: dict) -> str:
    retain_name = next((n for n, v in a["verdicts"].items() if v["role"] == "retain"), None)
    out = []
    for name in a["order"]:
        cp, verdict = report["checkpoints"][name], a["verdicts"][name]
        blocks: list[str] = []
        tables: list[str] = []
        for suite, result in cp["suites"].items():
            retain = (
                report["checkpoints"][retain_name]["suites"].get(suite) if retain_name and retain_name != name else None
            )
            for check, v in sorted(result["checks"].items(), key=lambda kv: OUTCOME_ORDER.get(kv[1]["outcome"], 9)):
                blocks.append(
                    _check_block(
                        name, suite, check, v, result, retain, f"{suite}.{check}" in verdict["retain_fails_too"], tables
                    )
                )
        out.append(
            f'<details class="cp" id="{checkpoint_anchor(name)}"><summary>{_e(name)}{_badge(verdict["role"])} '
            f"{pill(verdict['verdict'])} <small>{_e(suite_counts(verdict))}</small></summary>"
            f'<p class="meta">{_e(verdict["summary"])}</p>{"".join(blocks)}{packed_tables(tables)}</details>'
        )
    return "".join(out)


def _reference_code(run: dict) -> str:
    """Which reference code each `convention=reference` suite reproduces."""
    code = run.get("reference_code") or {}
    if not code:
        return ""
    return (
        '<p class="meta">convention=reference reproduces: '
        + ", ".join(f"{_e(suite)} <code>{_e(ref)}</code>" for suite, ref in sorted(code.items()))
        + "</p>"
    )


def render(report: dict, extra_figures: dict[str, list[str]] | None = None) -> str:
    run, summary = report["run"], report["summary"]
    a = report.get("assessment") or assess(report)
    plots = suite_plots(report, extra_figures)
    plot_html = "".join(
        f'<h3>{_e(suite)}</h3><div class="plots">{"".join(figs)}</div>' for suite, figs in plots.items()
    )
    env = report.get("environment", {})
    command = " ".join(run["command"]) if isinstance(run.get("command"), list) else run.get("command", "")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>unlearnbench report {_e(run.get("id", ""))}</title><style>{CSS}</style><script>{SCRIPT}</script></head><body>
<h1>unlearnbench report</h1>
<p class="meta"><code>{_e(run.get("id", ""))}</code> &middot; {_e(run.get("started_at", ""))} &middot;
{_fmt(run.get("duration_s"))} s &middot; <code>{_e(command)}</code> &middot; unlearnbench {_e(env.get("unlearnbench"))},
torch {_e(env.get("torch"))}, transformers {_e(env.get("transformers"))} &middot;
checks: <b>{summary["passed"]}</b> passed, <b>{summary["failed"]}</b> failed, {summary.get("inconclusive", 0)} inconclusive,
{summary["skipped"]} skipped, {summary["errors"]} errors</p><p class="meta" id="evidence">{_e(evidence_line(report))}
(how a verdict is decided: docs/verdicts.md)</p>
{_reference_code(run)}{_interrupted(run)}{_lost(report)}
{_banner(report, a)}
<h2 id="verdicts-heading">Verdicts and ranking</h2>{_verdict_table(report, a)}
{_curves(report, a)}
<h2>Checks</h2><p class="meta">Checks as rows, grouped by suite (− folds a suite); checkpoints as columns in the
order above. ✓ pass, ✗ fail, ? inconclusive (hatched: underpowered, in the colour it leans to; its tooltip
says how many items would decide it), – skipped, — not run. A cell shows the value and links to the check's
details.</p>{_matrix(report, a)}
<h2>Plots</h2>{plot_html or "<p>No plotted suite in this run.</p>"}
<h2>Details</h2><label><input type="checkbox" id="only-failures" onchange="onlyFailures(this)"> show only the
items on the failing side of a bound</label><noscript><p class="meta">The item lists need JavaScript to open; every
item is also in report.json and results.jsonl.</p></noscript>{_drilldown(report, a)}
</body></html>
"""
