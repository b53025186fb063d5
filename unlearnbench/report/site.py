"""`unlearnbench site`: a static leaderboard site from any number of reports
(docs/leaderboard.md). The board itself is report/leaderboard.py; this
module writes it as pages, each self-contained (inline CSS, SVG and a few
lines of JavaScript; no network), that open from disk or any static host:

- index.html: per comparable setting, the leaderboard (sortable, filterable,
  sticky header and first column) and per benchmark the trade-off scatter
  with its Pareto front; then the runs read and the files skipped;
- checkpoints/<id>.html: a checkpoint's checks in every run it appears in,
  and the items the reports hold (generations, replies);
- runs/<id>.html: how a run was made (command, options, versions, device,
  seed, decision rule, data), with the run's own report.html copied beside it;
- leaderboard.csv and leaderboard.json.
"""

from __future__ import annotations

import html
import json
import shutil
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from unlearnbench.atomic import atomic_write_text
from unlearnbench.report import leaderboard
from unlearnbench.report.html import (
    ITEM_SCRIPT,
    bound_label,
    check_anchor,
    checkpoint_anchor,
    decision_text,
    item_list,
    packed_tables,
    per_item_source,
    pill,
)
from unlearnbench.report.svg import tradeoff
from unlearnbench.report.text import significant
from unlearnbench.report.verdicts import VERDICT_ORDER, anchors

CSS = """
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;padding:16px;color:#222;max-width:1400px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ddd}h3{font-size:15px}
a{color:#1f4e99}code{overflow-wrap:anywhere}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ddd;padding:3px 6px;text-align:left;
vertical-align:top}th{background:#f4f4f4}
.meta{color:#555;overflow-wrap:anywhere}.note{color:#333;font-size:13px;max-width:72em}
.lead{font-size:15px;border-left:6px solid #4c72b0;background:#f2f5fb;padding:8px 12px;margin:12px 0;max-width:72em}
.warn{border-left:4px solid #b59a00;background:#fff8d6;padding:6px 10px;margin:8px 0}
.warn li{overflow-wrap:anywhere}
.differs{border-left:4px solid #c44e52;background:#fbeaea;padding:6px 10px;margin:8px 0}
.pill{display:inline-block;padding:0 8px;border-radius:9px;font-weight:600;font-size:12px}
.pass{background:#d9f2d9}.fail{background:#f8d0d0}.inconclusive{background:#fff0b3;color:#6b5900}
.error{background:#f3c6f3}.skip{background:#eee;color:#666}
.badge{display:inline-block;font-size:11px;padding:0 6px;border-radius:8px;background:#e4e8f4;color:#243a73;
margin-left:4px;white-space:nowrap}.badge.clash{background:#fbe3d0;color:#7a3a00}
.scroll{overflow:auto;max-width:100%;border:1px solid #ddd}
.board-box{max-height:80vh}
table.board{margin:0;font-size:13px}
table.board th,table.board td{white-space:nowrap}
table.board thead th{position:sticky;top:0;z-index:2;background:#f4f4f4;cursor:pointer;user-select:none}
table.board thead th[aria-sort=ascending]::after{content:" ▲"}
table.board thead th[aria-sort=descending]::after{content:" ▼"}
table.board .name{position:sticky;left:0;z-index:1;background:#fafafa;max-width:14em;overflow:hidden;
text-overflow:ellipsis}
table.board thead th.name{z-index:3;background:#f4f4f4}
table.board td.num{text-align:right;font-variant-numeric:tabular-nums}
table.board tr.anchor td,table.board tr.anchor th{background:#f7f7fb}
table.board small{color:#666;font-weight:normal}
.front{color:#222;font-weight:700}
.filter{font:inherit;padding:4px 8px;width:min(100%,22em);margin:6px 0}
.plots{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,440px),1fr));gap:16px}
figure.plot{margin:0;border:1px solid #eee;padding:6px;min-width:0}figure.plot svg{width:100%;height:auto;display:block}
figcaption{font-size:12px;color:#555}.tip{font-size:13px;min-height:1.4em;margin:4px 0;color:#222}
svg .pt{cursor:pointer}svg .pt:focus{outline:none;stroke:#000;stroke-width:3}
dl.kv{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:6px 0}dl.kv dt{color:#555}
dl.kv dd{margin:0;overflow-wrap:anywhere}
details.cp>summary{cursor:pointer;font-weight:600;margin:8px 0}details.items{margin:4px 0}
details.items>summary{cursor:pointer}h4{margin:10px 0 2px;font-size:13px}
td.text{min-width:160px;max-width:420px;white-space:pre-wrap;overflow-wrap:anywhere;font-size:12px}
tr.bad td:first-child{border-left:4px solid #c44e52}
@media (max-width:600px){body{padding:8px;font-size:13px}td,th{padding:2px 4px}.lead{font-size:14px}}
"""
SCRIPT = """
function cellValue(row,i){var c=row.children[i];var v=c.getAttribute('data-v');
if(v===null)return c.textContent.trim().toLowerCase();return v===''?null:Number(v);}
function sortBoard(th){var table=th.closest('table');var i=Array.prototype.indexOf.call(th.parentNode.children,th);
var asc=th.getAttribute('aria-sort')!=='ascending';
table.querySelectorAll('thead th').forEach(function(h){h.removeAttribute('aria-sort');});
th.setAttribute('aria-sort',asc?'ascending':'descending');var body=table.tBodies[0];
var rows=Array.prototype.slice.call(body.rows);rows.sort(function(a,b){var x=cellValue(a,i),y=cellValue(b,i);
if(x===y)return 0;if(x===null)return 1;if(y===null)return -1;return (x<y?-1:1)*(asc?1:-1);});
rows.forEach(function(r){body.appendChild(r);});}
function filterBoard(input){var q=input.value.trim().toLowerCase();
document.getElementById(input.dataset.table).querySelectorAll('tbody tr').forEach(function(r){
r.hidden=q!==''&&r.textContent.toLowerCase().indexOf(q)<0;});}
function centre(p){var b=p.getBBox();return [b.x+b.width/2,b.y+b.height/2];}
function showPoint(pt){var c=centre(pt);var near=Array.prototype.filter.call(pt.ownerSVGElement.querySelectorAll('.pt'),
function(q){var d=centre(q);return Math.abs(d[0]-c[0])<6&&Math.abs(d[1]-c[1])<6;});
pt.closest('figure').querySelector('.tip').textContent=near.map(function(q){return q.getAttribute('data-label');})
.join(' · ');}
document.addEventListener('click',function(e){var pt=e.target.closest&&e.target.closest('svg .pt');if(pt)showPoint(pt);
var th=e.target.closest&&e.target.closest('table.board thead th');if(th)sortBoard(th);});
document.addEventListener('focusin',function(e){if(e.target.matches&&e.target.matches('svg .pt'))showPoint(e.target);});
document.addEventListener('mouseover',function(e){
if(e.target.matches&&e.target.matches('svg .pt'))showPoint(e.target);});
"""


def _e(value) -> str:
    return html.escape(str(value), quote=True)


def _page(title: str, body: str, *, depth: int = 0, script: str = SCRIPT) -> str:
    home = "../" * depth + "index.html"
    nav = f'<p class="meta"><a href="{home}">← leaderboard</a></p>' if depth else ""
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><meta name="viewport" '
        f'content="width=device-width, initial-scale=1"><title>{_e(title)}</title><style>{CSS}</style>'
        f"<script>{script}</script></head><body>{nav}{body}</body></html>\n"
    )


# ------------------------------------------------------------------ index
def _arrow(spec: dict) -> str:
    return "↑" if spec["higher_is_better"] else "↓"


def _board_table(group: dict) -> str:
    suites = group["suites"]
    head = ['<th class="num">rank</th>', '<th class="name">checkpoint</th>', "<th>verdict</th>"]
    for suite in suites:
        head.append(f'<th title="{_e(suite)}: checks passed / judged">{_e(suite)}<br><small>passed</small></th>')
        for axis, spec in group["axes"][suite].items():
            better = "higher" if spec["higher_is_better"] else "lower"
            head.append(
                f'<th title="{_e(suite)} {axis} axis: {_e(spec["metric"])} ({better} is better)">{_e(suite)} '
                f"{axis}<br><small>{_e(spec['metric'])} {_arrow(spec)}</small></th>"
            )
    head.append("<th>runs</th>")
    rows = []
    for row in group["rows"]:
        rank = "" if row["rank"] is None else str(row["rank"])
        badges = "".join(
            [
                f'<span class="badge">{_e(row["role"])} model</span>' if row["role"] else "",
                f'<span class="badge">{_e(row["series"])} step {row["step"]}{", best" if row["best_step"] else ""}</span>'
                if row["series"] is not None
                else "",
                '<span class="badge clash" title="another checkpoint has this name: rows are told apart by '
                'fingerprint">same name, other weights</span>'
                if row["name_clash"]
                else "",
            ]
        )
        rank_cell = rank if row["best_step"] is not False else f"({rank})"
        cells = [
            f'<td class="num" data-v="{rank}">{rank_cell or ("ref" if row["role"] else "–")}</td>',
            f'<th class="name" title="{_e(row["checkpoint"])}"><a href="checkpoints/{_e(row["id"])}.html">'
            f"{_e(row['checkpoint'])}</a>{badges}</th>",
            f'<td data-v="{VERDICT_ORDER.get(row["verdict"], 3)}" title="{_e(row["summary"])}">'
            f"{pill(row['verdict'])}</td>",
        ]
        for suite in suites:
            cell = row["suites"].get(suite)
            if cell is None:
                cells.append('<td class="num" data-v="">—</td>' * (1 + len(group["axes"][suite])))
                continue
            share = cell["passed"] / cell["judged"] if cell["judged"] else -1
            cells.append(
                f'<td class="num {cell["verdict"]}" data-v="{share:.6g}">{cell["passed"]}/{cell["judged"]}</td>'
            )
            for axis, spec in group["axes"][suite].items():
                value = cell.get(axis)
                if value is None:
                    cells.append('<td class="num" data-v="">—</td>')
                    continue
                front = not row["role"] and row["id"] in group["pareto"].get(suite, [])
                ci = (
                    f"95% CI {significant(value['ci_low'], 3)} to {significant(value['ci_high'], 3)}, "
                    if value["ci_low"] is not None
                    else ""
                )
                cells.append(
                    f'<td class="num{" front" if front else ""}" data-v="{value["value"]:.9g}" '
                    f'title="{_e(spec["metric"])} = {significant(value["value"], 4)} ({ci}n = {value["n"]}, '
                    f'run {_e(cell["run"])}){"; on the Pareto front" if front else ""}">'
                    f"{'◆ ' if front else ''}{significant(value['value'], 3)}</td>"
                )
        runs = ", ".join(f'<a href="runs/{_e(r)}.html">{_e(r)}</a>' for r in row["runs"])
        cells.append(f"<td>{runs}</td>")
        rows.append(
            f'<tr class="{"anchor" if row["role"] else "candidate"}" data-id="{_e(row["id"])}">{"".join(cells)}</tr>'
        )
    table_id = f"board-{group['id']}"
    return (
        f'<input class="filter" type="search" placeholder="filter rows (name, method, verdict…)" '
        f'aria-label="filter the leaderboard" data-table="{table_id}" oninput="filterBoard(this)">'
        f'<div class="scroll board-box"><table class="board" id="{table_id}"><thead><tr>{"".join(head)}</tr>'
        f"</thead><tbody>{''.join(rows)}</tbody></table></div>"
    )


def _scatters(group: dict) -> str:
    figures = []
    for suite in group["suites"]:
        axes = group["axes"][suite]
        if set(axes) != set(leaderboard.AXES):
            continue
        points = [
            {
                "id": r["id"],
                "label": r["checkpoint"],
                "x": r["suites"][suite]["utility"]["value"],
                "y": r["suites"][suite]["forget"]["value"],
                "method": r["method"],
                "role": r["role"],
            }
            for r in group["rows"]
            if r["suites"].get(suite, {}).get("forget") and r["suites"][suite].get("utility")
        ]
        if not points:
            continue
        paths: dict[str, list[tuple[int, str]]] = {}
        plotted = {p["id"] for p in points}
        for r in group["rows"]:
            if r["series"] is not None and r["id"] in plotted:
                paths.setdefault(r["series"], []).append((r["step"], r["id"]))
        front = group["pareto"].get(suite, [])
        names = {r["id"]: r["checkpoint"] for r in group["rows"]}
        caption = (
            f"{suite}: one point per checkpoint. Pareto front (no other candidate is at least as good on both "
            f"axes and better on one): {', '.join(names[i] for i in front) or 'none'}."
        )
        figure = tradeoff(
            f"{suite}: forget vs utility",
            points,
            xlabel=f"utility: {axes['utility']['metric']}",
            ylabel=f"forget: {axes['forget']['metric']}",
            x_higher=axes["utility"]["higher_is_better"],
            y_higher=axes["forget"]["higher_is_better"],
            front=front,
            paths={s: [i for _, i in sorted(steps)] for s, steps in paths.items()},
            kind=f"tradeoff-{suite}",
            caption=caption,
            x_log=axes["utility"].get("log", False),
            y_log=axes["forget"].get("log", False),
        )
        figures.append(figure.replace("</figure>", '<p class="tip" aria-live="polite"></p></figure>'))
    return f'<div class="plots">{"".join(figures)}</div>' if figures else ""


def _lead(board: dict) -> str:
    """The answer in one paragraph: the top row of the first group, and why it is there."""
    group = board["groups"][0]
    ranked = [r for r in group["rows"] if r["rank"] is not None and r["best_step"] is not False]
    candidates = sum(not r["role"] for r in group["rows"])
    if not ranked:
        return (
            f'<p class="lead" id="lead">No checkpoint could be ranked: of {candidates} candidates, none ran the '
            "checks the others ran.</p>"
        )
    top, shared = ranked[0], len(group["shared_checks"])
    r = top["ranking"]
    passing = sum(x["verdict"] == "pass" for x in ranked)
    name = f"{top['series']} at step {top['step']}" if top["series"] is not None else top["checkpoint"]
    if top["verdict"] == "pass":
        gate = f"It passes the gate ({r['passed']} of {shared} shared checks passed, none failed)"
    else:
        gate = (
            f"{'No' if not passing else 'Only ' + str(passing)} of the {len(ranked)} ranked candidates "
            f"pass{'es' if passing == 1 else ''} the gate; it is {top['verdict'].upper()} "
            f"({r['passed']} of {shared} shared checks passed)"
        )
    kept = {"kept": "keeps utility", "cost": "pays some utility", "collapsed": "has lost its utility"}[r["utility"]]
    why = (
        f"{gate}, {kept} ({r['utility_failed']} of {r['utility_checks']} utility checks failed) and shows "
        f"{'the most ' if len(ranked) > 1 else ''}forgetting ({r['forget_passed']} forget checks passed, "
        f"{r['forget_failed']} failed)."
    )
    others = [suite for group in board["groups"][1:] for suite in group["differs"]]
    apart = f" Results evaluated under another setting ({', '.join(others)}) are ranked apart below." if others else ""
    return (
        f'<p class="lead" id="lead"><b>Top row: <a href="checkpoints/{_e(top["id"])}.html">{_e(name)}</a></b> '
        f"{pill(top['verdict'])}, first of {len(ranked)} ranked. {_e(why)}{apart}</p>"
    )


def _settings_text(group: dict) -> str:
    parts = []
    for suite, s in group["settings"].items():
        version = f"v{s['suite_version']}" if s["suite_version"] is not None else "version not recorded"
        parts.append(
            f"<li><b>{_e(suite)}</b>: data <code>{_e(s['data'])}</code> ({_e(s['data_source'])}), {version}, "
            f"{len(s['gate'])} checks</li>"
        )
    return f"<details><summary>What this group was evaluated on</summary><ul>{''.join(parts)}</ul></details>"


def _index(board: dict, notes: list[leaderboard.Note], built: str) -> str:
    checkpoints = len({r["id"] for g in board["groups"] for r in g["rows"]})
    parts = [
        f'<h1>Unlearning leaderboard</h1><p class="meta">{checkpoints} checkpoints from {len(board["runs"])} '
        f'runs · built {_e(built)} by unlearnbench · <a href="leaderboard.csv">leaderboard.csv</a> · '
        f'<a href="leaderboard.json">leaderboard.json</a></p>',
        _lead(board),
    ]
    problems = [n for n in notes if n.problem]
    if problems:
        parts.append(
            '<div class="warn" id="problems"><b>Not read as given:</b><ul>'
            + "".join(f"<li>{_e(n)}</li>" for n in problems)
            + "</ul></div>"
        )
    for group in board["groups"]:
        parts.append(f'<section id="{group["id"]}"><h2>{_e(group["title"])}</h2>')
        for suite, differs in group["differs"].items():
            parts.append(
                f'<div class="differs">These {_e(suite)} results are ranked apart from the main comparison: '
                f"they were evaluated differently. {_e('; '.join(differs))}.</div>"
            )
        parts.append(_settings_text(group))
        parts.append(_board_table(group))
        parts.append(
            f'<p class="note">{_e(group["rule"])} Per benchmark: checks passed / judged, then its forget and '
            "utility values (↑ higher is better, ↓ lower); ◆ marks the Pareto front. Click a column to "
            "sort; reference models are anchor rows, never ranked.</p>"
        )
        scatters = _scatters(group)
        if scatters:
            parts.append(f"<h3>Trade-off per benchmark</h3>{scatters}")
        parts.append("</section>")
    runs = "".join(
        f'<tr><td><a href="runs/{_e(r["id"])}.html">{_e(r["id"])}</a></td><td>{_e(r["started_at"] or "")}'
        f"</td><td>{len(r['checkpoints'])}</td><td>{_e(r['schema_version'])}</td>"
        f"<td><code>{_e(r['file'])}</code></td></tr>"
        for r in board["runs"]
    )
    parts.append(
        f'<h2 id="runs">Runs</h2><div class="scroll"><table><thead><tr><th>run</th><th>started</th>'
        f"<th>checkpoints</th><th>schema</th><th>report</th></tr></thead><tbody>{runs}</tbody></table></div>"
    )
    parts += [f'<p class="meta">{_e(n)}</p>' for n in notes if not n.problem]
    return _page("Unlearning leaderboard", "".join(parts))


# ------------------------------------------------------------------ checkpoint pages
def _checkpoint_head(key_rows: list[tuple[dict, dict]]) -> str:
    """A checkpoint page's top: who it is, and its place in every group it is in."""
    row = key_rows[0][1]
    facts = [
        ("fingerprint", f"<code>{_e(row['fingerprint'])}</code>"),
        ("names in reports", _e(", ".join(row["names"]))),
        ("source", f"<code>{_e(row['source'])}</code>"),
        ("method", _e(row["method"])),
    ]
    if row["role"]:
        facts.append(("reference", f"{_e(row['role'])} model (an anchor, never ranked)"))
    if row["series"] is not None:
        facts.append(("training run", f"{_e(row['series'])}, step {row['step']}"))
    for group, r in key_rows:
        rank = f"rank {r['rank']}" if r["rank"] is not None else (r["not_ranked"] or "not ranked")
        facts.append(
            (
                f"leaderboard ({group['id']})",
                f'{pill(r["verdict"])} {_e(rank)} · <a href="../index.html#{_e(group["id"])}">'
                f"{_e(group['title'])}</a> · {_e(r['summary'])}",
            )
        )
    return (
        f"<h1>{_e(row['checkpoint'])}</h1>"
        + '<dl class="kv">'
        + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts)
        + "</dl>"
    )


def _run_section(run: leaderboard.Run, name: str, checkpoint: dict, retain: dict, copied: bool) -> str:
    """A checkpoint's checks in one run (value, interval, n, bound, verdict, what decided it), each linked to
    the run's own report, and its items beside the retain model's (`retain`: the retain model's checkpoint
    entry, or {}), packed as the report packs them."""
    original = f"../runs/{run.id}/report.html" if copied else None
    parts = [
        f'<h2 id="run-{_e(run.id)}-{_e(checkpoint_anchor(name))}">Run <a href="../runs/{_e(run.id)}.html">'
        f'{_e(run.id)}</a> <small>as {_e(name)}</small></h2><p class="meta">started {_e(run.started)}'
        + (f' · <a href="{_e(original)}#{_e(checkpoint_anchor(name))}">its report</a>' if original else "")
        + "</p>"
    ]
    if checkpoint.get("lost"):
        parts.append(f'<p class="warn">Lost in this run: {_e(checkpoint["lost"]["reason"])}</p>')
    lines: list[str] = []
    drills: list[str] = []
    tables: list[str] = []
    for suite, result in checkpoint.get("suites", {}).items():
        for check, v in result.get("checks", {}).items():
            metric = (result.get("metrics") or {}).get(v.get("metric") or "", {})
            ci = v.get("ci") or [None, None]
            link = (
                f'<a href="{_e(original)}#{_e(check_anchor(name, suite, check))}">{_e(check)}</a>'
                if original
                else _e(check)
            )
            lines.append(
                f"<tr><td>{_e(suite)}</td><td>{link}</td><td>{_e(v.get('metric', ''))}</td>"
                f"<td>{significant(v.get('value'))}</td><td>{significant(ci[0])} to {significant(ci[1])}</td>"
                f"<td>{_e(metric.get('n', v.get('n', '')) if isinstance(metric, dict) else '')}</td>"
                f"<td>{_e(bound_label(v))}</td><td>{pill(v.get('outcome', 'error'))}</td>"
                f'<td class="text">{_e(decision_text(v) or v.get("reason", ""))}</td></tr>'
            )
            items = (
                item_list(
                    v["metric"],
                    per_item_source(suite, v["metric"]),
                    result,
                    v,
                    retain.get("suites", {}).get(suite),
                    tables,
                )
                if v.get("metric")
                else ""
            )
            if items:
                drills.append(f"<h4>{_e(suite)} · {_e(check)}</h4>{items}")
    parts.append(
        '<div class="scroll"><table><thead><tr><th>suite</th><th>check</th><th>metric</th><th>value</th>'
        "<th>95% CI</th><th>n</th><th>must be</th><th>verdict</th><th>decided on</th></tr></thead>"
        f"<tbody>{''.join(lines)}</tbody></table></div>"
    )
    if drills:  # unpacked when a list is first opened
        parts.append(
            f'<details class="cp" open id="items-{_e(run.id)}-{_e(checkpoint_anchor(name))}"><summary>Items: '
            "what the report holds of each check's items (the checkpoint's generations beside the retain "
            f"model's)</summary>{''.join(drills)}{packed_tables(tables)}</details>"
        )
    return "".join(parts)


def _write_checkpoint_pages(
    board: dict, runs: list[leaderboard.Run], copied: set[str], output: Path, notes: list[leaderboard.Note]
) -> None:
    """checkpoints/<id>.html. The reports' items are read again one run at a time (the board holds none), each
    checkpoint's sections appended to a part file in run order, so that memory holds one report at most."""
    pages: dict[str, list[tuple[dict, dict]]] = {}
    page_of_key = {}
    for group in board["groups"]:
        for row in group["rows"]:
            pages.setdefault(row["id"], []).append((group, row))
            page_of_key[row["key"]] = row["id"]
    with tempfile.TemporaryDirectory(dir=output, prefix=".parts-") as parts:
        for run in runs:
            data = run.file.read_bytes() if run.file.is_file() else b""
            if leaderboard.digest(data) != run.digest:  # read and validated before, unless changed since
                notes.append(
                    leaderboard.Note(
                        run.file,
                        f"{run.file} changed while the site was built: its checkpoints' pages show no checks from it",
                        problem=True,
                    )
                )
                continue
            report = json.loads(data)
            retain_name = next((n for n, role in anchors(report).items() if role == "retain"), None)
            for name, checkpoint in report["checkpoints"].items():
                page = page_of_key.get(leaderboard.checkpoint_key(run.id, name, checkpoint))
                retain = report["checkpoints"].get(retain_name, {}) if retain_name not in (None, name) else {}
                if page is not None:
                    with open(Path(parts) / f"{page}.part", "a", encoding="utf-8") as part_file:
                        part_file.write(_run_section(run, name, checkpoint, retain, run.id in copied))
        for page, key_rows in pages.items():
            part = Path(parts) / f"{page}.part"
            body = _checkpoint_head(key_rows) + (part.read_text(encoding="utf-8") if part.exists() else "")
            atomic_write_text(
                output / "checkpoints" / f"{page}.html",
                _page(f"{key_rows[0][1]['checkpoint']} · unlearnbench leaderboard", body, depth=1, script=ITEM_SCRIPT),
            )


# ------------------------------------------------------------------ run pages
def _run_page(run: leaderboard.Run, copied: bool, rows_of: dict[str, dict]) -> str:
    report = run.report
    info, env = report["run"], report.get("environment") or {}
    command = " ".join(info["command"]) if isinstance(info.get("command"), list) else info.get("command", "")
    decision = info.get("decision") or {}
    facts = [
        (
            "report",
            f"<code>{_e(run.file)}</code>"
            + (
                ' · <a href="' + _e(run.id) + '/report.html">its HTML report</a>'
                if copied
                else " (no report.html beside it)"
            ),
        ),
        (
            "schema version",
            _e(report.get("upgraded_from") or report.get("schema_version"))
            + (f" (read as version {_e(report['schema_version'])})" if report.get("upgraded_from") else ""),
        ),
        ("started / finished", f"{_e(info.get('started_at', ''))} / {_e(info.get('finished_at', ''))}"),
        ("duration", f"{significant(info.get('duration_s'), 3)} s"),
        ("command", f"<code>{_e(command)}</code>"),
        ("working folder", f"<code>{_e(info.get('cwd', ''))}</code>"),
        ("seed", _e(info.get("seed", ""))),
        (
            "decision rule",
            _e(decision.get("text")),
        ),
        ("exit status", _e(info.get("exit_status", ""))),
    ]
    facts += [(f"environment: {k}", _e(v)) for k, v in env.items()]
    loaded = sorted(
        {
            f"{info.get('device_name') or info.get('device')}, {info.get('dtype')}"
            for c in report["checkpoints"].values()
            if (info := c.get("info") or {}).get("dtype")
        }
    )
    if loaded:
        facts.append(("device, dtype (as loaded)", _e("; ".join(loaded))))
    if report.get("merged_from"):
        facts.append(("merged from", _e(", ".join(str(m.get("run_id")) for m in report["merged_from"]))))
    options = info.get("options") or {}
    facts += [(f"option: {k}", f"<code>{_e(v)}</code>") for k, v in options.items() if v not in (None, {}, [])]
    data: dict[str, Any] = {}
    for checkpoint in report["checkpoints"].values():
        for suite, result in checkpoint.get("suites", {}).items():
            data.setdefault(suite, result.get("data") or {})
    data_rows = "".join(
        f"<tr><td>{_e(s)}</td><td><code>{_e(d.get('fingerprint', ''))}</code></td>"
        f"<td>{_e(d.get('suite_version', 'not recorded'))}</td><td><code>{_e(d.get('source', ''))}"
        f"</code></td><td><code>{_e((info.get('thresholds_files') or {}).get(s, ''))}</code></td></tr>"
        for s, d in data.items()
    )
    verdicts = report["assessment"]["verdicts"]
    cps = "".join(
        f"<li>{_row_link(run.id, name, c, rows_of)} {pill(verdicts[name]['verdict'])} "
        f"<small>{_e(verdicts[name]['summary'])}</small></li>"
        for name, c in report["checkpoints"].items()
    )
    body = (
        f'<h1>Run {_e(run.id)}</h1><dl class="kv">' + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts) + "</dl>"
        f'<h2>Data and gates</h2><div class="scroll"><table><thead><tr><th>suite</th><th>data fingerprint</th>'
        f"<th>suite version</th><th>data</th><th>gate</th></tr></thead><tbody>{data_rows}</tbody></table></div>"
        f"<h2>Checkpoints</h2><ul>{cps}</ul>"
    )
    return _page(f"run {run.id} · unlearnbench leaderboard", body, depth=1)


def _row_link(run_id: str, name: str, checkpoint: dict, rows_of: dict[str, dict]) -> str:
    row = rows_of.get(leaderboard.checkpoint_key(run_id, name, checkpoint))
    return f'<a href="../checkpoints/{_e(row["id"])}.html">{_e(name)}</a>' if row else _e(name)


# ------------------------------------------------------------------ the site
def build_site(inputs: list[Path], output: Path) -> tuple[dict, list[leaderboard.Note]]:
    """Reads the reports under `inputs` and writes the site into `output`;
    returns (the leaderboard, the notes on files not read as given)."""
    runs, notes = leaderboard.read_runs(leaderboard.find_reports(inputs))
    if not runs:
        raise ValueError("no readable report among the inputs: " + "; ".join(map(str, notes)))
    board = leaderboard.build(runs)
    output = Path(output)
    (output / "checkpoints").mkdir(parents=True, exist_ok=True)
    (output / "runs").mkdir(parents=True, exist_ok=True)
    built = datetime.now(timezone.utc).isoformat(timespec="seconds")
    copied = set()
    for run in runs:
        original = run.file.with_name("report.html")
        if original.is_file():
            (output / "runs" / run.id).mkdir(exist_ok=True)
            shutil.copyfile(original, output / "runs" / run.id / "report.html")
            copied.add(run.id)
    rows_of = {row["key"]: row for group in board["groups"] for row in group["rows"]}
    _write_checkpoint_pages(board, runs, copied, output, notes)
    for run in runs:
        atomic_write_text(output / "runs" / f"{run.id}.html", _run_page(run, run.id in copied, rows_of))
    atomic_write_text(
        output / "leaderboard.json", leaderboard.to_json(board | {"built_at": built, "notes": [n.text for n in notes]})
    )
    atomic_write_text(output / "leaderboard.csv", leaderboard.to_csv(board))
    atomic_write_text(output / "index.html", _index(board, notes, built))
    return board, notes
