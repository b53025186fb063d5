"""Inline SVG plots for the HTML report: horizontal bars (one row per
checkpoint, so 8 or 150 checkpoints fit the width of a phone), scatters with
labels placed so that they never overlap or leave the plot, and small-multiple
line profiles.

Every plot scales with its container (viewBox, width 100%), draws its gate
bounds as dashed lines, and keeps one convention: **good is to the right**
(bars) and **top right** (scatters); a scatter's axes are oriented so
(forget efficacy up, utility right), and the region where the gate passes is
shaded. Text widths are estimated generously (0.62 em per character, the
widest common sans-serif glyphs aside), so the placement holds in a browser.
"""

from __future__ import annotations

import html
import math

PALETTE = ("#4c72b0", "#dd8452", "#55a868", "#8172b3", "#937860", "#da8bc3", "#8c8c8c", "#ccb974")
CHAR_EM = 0.62
GOAL_FILL = "#e3f4e3"
LOG_FLOOR = 1e-12  # a log axis's lowest value when it has no positive one


def _e(value) -> str:
    return html.escape(str(value), quote=True)


def text_width(text: str, size: float) -> float:
    return len(str(text)) * size * CHAR_EM + 2


def _short(name: str, limit: int) -> str:
    return name if len(name) <= limit else name[: limit - 1] + "…"


def tick_text(value: float, span: float) -> str:
    """A tick label: zero for values within rounding of zero (no '-8.2e-09')."""
    if abs(value) < span * 1e-6:
        return "0"
    return f"{value:.3g}"


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    span = hi - lo
    step = 10 ** math.floor(math.log10(span / count)) if span > 0 else 1
    for factor in (1, 2, 2.5, 5, 10):
        if span / (step * factor) <= count:
            step *= factor
            break
    first = math.ceil(lo / step - 1e-9) * step
    return [first + k * step for k in range(int((hi - first) / step + 1e-9) + 1)]


def frame(width: float, height: float, title: str, body: str, kind: str, caption: str) -> str:
    return (
        f'<figure class="plot" data-plot="{_e(kind)}"><svg xmlns="http://www.w3.org/2000/svg" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" width="{width:.0f}" height="{height:.0f}" role="img" '
        f'aria-label="{_e(title)}"><text x="{width / 2:.1f}" y="16" text-anchor="middle" font-size="13" '
        f'font-weight="bold">{_e(title)}</text>{body}</svg><figcaption>{_e(caption)}</figcaption></figure>'
    )


def legend(entries: list[tuple[str, str, str]], x: float, y: float, width: float) -> tuple[str, float]:
    """(label, colour, kind: 'box' | 'dash') entries, wrapped within `width`;
    returns the SVG and the y below it."""
    parts, cx, cy = [], x, y
    for label, colour, kind in entries:
        w = 16 + text_width(label, 11) + 10
        if cx + w > x + width and cx > x:
            cx, cy = x, cy + 16
        if kind == "dash":
            parts.append(
                f'<line x1="{cx:.1f}" y1="{cy + 5:.1f}" x2="{cx + 12:.1f}" y2="{cy + 5:.1f}" '
                f'stroke="{colour}" stroke-width="2" stroke-dasharray="3 2"/>'
            )
        else:
            parts.append(f'<rect x="{cx:.1f}" y="{cy:.1f}" width="10" height="10" fill="{colour}"/>')
        parts.append(f'<text x="{cx + 16:.1f}" y="{cy + 9:.1f}" font-size="11">{_e(label)}</text>')
        cx += w
    return "".join(parts), cy + 18


def _x_axis(x0: float, x1: float, y: float, lo: float, hi: float, label: str, height: float) -> str:
    parts = [f'<line x1="{x0}" y1="{y}" x2="{x1}" y2="{y}" stroke="#888"/>']
    for t in nice_ticks(lo, hi):
        px = x0 + (t - lo) / (hi - lo) * (x1 - x0)
        parts.append(
            f'<line x1="{px:.1f}" y1="{y}" x2="{px:.1f}" y2="{y - height:.1f}" stroke="#eee"/>'
            f'<text x="{px:.1f}" y="{y + 13:.1f}" text-anchor="middle" font-size="10">'
            f"{tick_text(t, hi - lo)}</text>"
        )
    parts.append(
        f'<text x="{(x0 + x1) / 2:.1f}" y="{y + 28:.1f}" text-anchor="middle" font-size="11">{_e(label)}</text>'
    )
    return "".join(parts)


def hbars(
    title: str,
    categories: list[str],
    series: dict[str, list],
    *,
    axis_label: str,
    kind: str,
    caption: str,
    lo: float = 0.0,
    hi: float = 1.0,
    bounds: dict[str, float] | None = None,
    colours: dict[str, str] | None = None,
    stacked: bool = False,
) -> str:
    """One row per category (checkpoint), one bar per series (or one stacked
    bar); `bounds` draws each series' gate bound as a dashed line. A zero is a
    visible tick with its value, never an empty row."""
    width, right = 560, 16
    label_chars = min(24, max((len(c) for c in categories), default=4))
    left = 12 + text_width("x" * label_chars, 11)
    colour = {name: (colours or {}).get(name, PALETTE[i % len(PALETTE)]) for i, name in enumerate(series)}
    entries = [(name, colour[name], "box") for name in series]
    entries += [(f"gate bound: {name}", colour[name], "dash") for name in (bounds or {})]
    legend_svg, top = legend(entries, 10, 26, width - 20)
    bar = 12 if stacked or len(series) == 1 else 11
    row = (bar if stacked else bar * len(series)) + 8
    plot_w = width - left - right - 34  # room for a value label after the longest bar
    height = top + row * len(categories) + 40
    bottom = top + row * len(categories)
    scale = lambda v: left + (min(max(v, lo), hi) - lo) / (hi - lo) * plot_w  # noqa: E731
    body = [legend_svg, _x_axis(left, left + plot_w, bottom, lo, hi, axis_label, bottom - top)]
    zero = scale(0.0) if lo < 0 < hi else scale(lo)
    for i, category in enumerate(categories):
        y = top + i * row + 4
        body.append(
            f'<text x="{left - 6:.1f}" y="{y + (row - 8) / 2 + 4:.1f}" text-anchor="end" font-size="11">'
            f"<title>{_e(category)}</title>{_e(_short(category, label_chars))}</text>"
        )
        offset = zero
        for j, (name, values) in enumerate(series.items()):
            value = values[i]
            by = y if stacked else y + j * bar
            if value is None:
                body.append(
                    f'<text x="{zero + 3:.1f}" y="{by + bar - 2:.1f}" font-size="9" fill="#777">'
                    f"n/a<title>{_e(category)} {_e(name)}: not computed</title></text>"
                )
                continue
            if stacked:
                x0, x1 = offset, offset + value / (hi - lo) * plot_w
                offset = x1
            else:
                x0, x1 = sorted((zero, scale(value)))
            body.append(
                f'<rect x="{x0:.1f}" y="{by:.1f}" width="{max(x1 - x0, 1.5):.1f}" height="{bar - 1}" '
                f'fill="{colour[name]}"><title>{_e(category)} {_e(name)}: {value:.4g}</title></rect>'
            )
            if not stacked:  # right of the bar's right end (the zero line for a negative value)
                body.append(
                    f'<text x="{max(x0, x1) + 3:.1f}" y="{by + bar - 3:.1f}" font-size="9" '
                    f'fill="#444">{value:.2g}</text>'
                )
    for name, bound in (bounds or {}).items():
        bx = scale(bound)
        body.append(
            f'<line x1="{bx:.1f}" y1="{top - 2:.1f}" x2="{bx:.1f}" y2="{bottom:.1f}" stroke="{colour[name]}" '
            f'stroke-width="1.5" stroke-dasharray="4 3"><title>gate bound for {_e(name)}: '
            f"{bound:.4g}</title></line>"
        )
    return frame(width, height, title, "".join(body), kind, caption)


def _place_labels(
    points: list[tuple[str, float, float]], box: tuple[float, float, float, float], size: float = 11
) -> dict[int, tuple[float, float]]:
    """Label positions {point index: (x, y)} (text-anchor start) that overlap
    neither each other nor the points, and stay inside `box`; a point with no
    free spot gets no label (its name is in the tooltip and the caption)."""
    x_min, y_min, x_max, y_max = box
    boxes = [(px - 5, py - 5, px + 5, py + 5) for _, px, py in points]
    placed = {}
    for i, (label, px, py) in enumerate(points):
        w, h = text_width(label, size), size + 2
        for dx, dy in ((8, 4), (-8, 4), (0, -9), (0, 16), (8, -8), (-8, -8), (8, 14), (-8, 14), (14, 4), (-14, 4)):
            if dx > 0:
                x0 = px + dx
            elif dx < 0:
                x0 = px + dx - w
            else:
                x0 = px - w / 2
            y0 = py + dy - size
            candidate = (x0, y0, x0 + w, y0 + h)
            inside = x0 >= x_min and y0 >= y_min and x0 + w <= x_max and y0 + h <= y_max
            if inside and not any(_overlap(candidate, b) for b in boxes):
                boxes.append(candidate)
                placed[i] = (x0, py + dy)
                break
    return placed


def _overlap(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def scatter(
    title: str,
    points: list[tuple[str, float, float]],
    xlabel: str,
    ylabel: str,
    kind: str,
    caption: str,
    *,
    goal: tuple[float | None, float | None] | None = None,
    y_ticks: list[tuple[float, str]] | None = None,
    anchors: dict[str, str] | None = None,
) -> str:
    """Points (label, x, y) on [0, 1]^2, good at the top right. `goal`: the
    (x, y) gate bounds; the region beyond both is shaded. `anchors` marks
    reference models (drawn as squares)."""
    width, height, left, right, top, bottom = 460, 360, 52, 440, 34, 300
    sx = lambda v: left + min(max(v, 0.0), 1.0) * (right - left)  # noqa: E731
    sy = lambda v: bottom - min(max(v, 0.0), 1.0) * (bottom - top)  # noqa: E731
    body = []
    if goal is not None:
        gx, gy = goal
        x0, y1 = sx(gx if gx is not None else 0.0), sy(gy if gy is not None else 0.0)
        body.append(
            f'<rect x="{x0:.1f}" y="{top}" width="{right - x0:.1f}" height="{y1 - top:.1f}" fill="{GOAL_FILL}">'
            "<title>where the gate passes</title></rect>"
        )
        if gx is not None:
            body.append(
                f'<line x1="{x0:.1f}" y1="{top}" x2="{x0:.1f}" y2="{bottom}" stroke="#3a7d3a" '
                f'stroke-dasharray="4 3"><title>gate bound: {gx:.3g}</title></line>'
            )
        if gy is not None:
            body.append(
                f'<line x1="{left}" y1="{y1:.1f}" x2="{right}" y2="{y1:.1f}" stroke="#3a7d3a" '
                f'stroke-dasharray="4 3"><title>gate bound: {gy:.3g}</title></line>'
            )
    body.append(
        f'<line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="#888"/>'
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{bottom}" stroke="#888"/>'
    )
    for k in range(6):
        v = k / 5
        body.append(f'<text x="{sx(v):.1f}" y="{bottom + 17}" text-anchor="middle" font-size="10">{v:.1f}</text>')
    for v, text in y_ticks or [(k / 5, f"{k / 5:.1f}") for k in range(6)]:
        body.append(
            f'<line x1="{left - 3}" y1="{sy(v):.1f}" x2="{right}" y2="{sy(v):.1f}" stroke="#eee"/>'
            f'<text x="{left - 5}" y="{sy(v) + 3.5:.1f}" text-anchor="end" font-size="10">{_e(text)}</text>'
        )
    body.append(
        f'<text x="{(left + right) / 2}" y="{bottom + 33}" text-anchor="middle" font-size="11">{_e(xlabel)}</text>'
        f'<text x="13" y="{(top + bottom) / 2}" font-size="11" transform="rotate(-90 13 {(top + bottom) / 2})" '
        f'text-anchor="middle">{_e(ylabel)}</text>'
    )
    pixel = [(label, sx(x), sy(y)) for label, x, y in points]
    placed = _place_labels(pixel, (left + 1, top + 1, right - 1, bottom - 1))
    unlabelled = []
    for i, (label, x, y) in enumerate(points):
        px, py = pixel[i][1], pixel[i][2]
        tip = f"<title>{_e(label)}: ({x:.3g}, {y:.3g})</title>"
        if anchors and label in anchors:
            body.append(
                f'<rect x="{px - 5:.1f}" y="{py - 5:.1f}" width="10" height="10" fill="#fff" stroke="#222" '
                f'stroke-width="2">{tip}</rect>'
            )
        else:
            body.append(
                f'<circle cx="{px:.1f}" cy="{py:.1f}" r="5" fill="{PALETTE[i % len(PALETTE)]}" '
                f'fill-opacity="0.85">{tip}</circle>'
            )
        if i in placed:
            tx, ty = placed[i]
            body.append(f'<text x="{tx:.1f}" y="{ty:.1f}" font-size="11">{_e(label)}</text>')
        else:
            unlabelled.append(label)
    if len(unlabelled) > 8:
        caption += f" {len(unlabelled)} points have no room for a label: hover a point for its name."
    elif unlabelled:
        caption += f" Unlabelled (no free space; hover for the name): {', '.join(unlabelled)}."
    if anchors:
        caption += " Squares: reference models."
    return frame(width, height + 10, title, "".join(body), kind, caption)


def profiles(
    title: str, series: dict[str, tuple[list, list]], kind: str, caption: str, *, names: tuple[str, str], unit: str
) -> str:
    """Small multiples, one per checkpoint: two lines over layers."""
    cell_w, cell_h, cols = 180, 150, 3
    rows = math.ceil(len(series) / cols)
    legend_svg, top = legend([(names[0], PALETTE[0], "box"), (names[1], PALETTE[1], "box")], 10, 26, cols * cell_w - 20)
    width, height = cols * cell_w + 10, top + rows * cell_h + 10
    values = [v for d1, d2 in series.values() for v in (*d1, *d2) if v is not None]
    ticks = nice_ticks(min(0.0, *values) if values else 0.0, max(0.1, *values) if values else 1.0, 3)
    lo, hi = ticks[0], ticks[-1] if ticks[-1] > ticks[0] else ticks[0] + 1
    body = [legend_svg]
    for n, (name, lines) in enumerate(series.items()):
        ox, oy = (n % cols) * cell_w + 46, top + (n // cols) * cell_h + 16
        plot_w, plot_h = cell_w - 60, cell_h - 56

        def sy(v, oy=oy, plot_h=plot_h):  # this panel's y scale
            return oy + plot_h - (v - lo) / (hi - lo) * plot_h

        body.append(
            f'<text x="{ox + plot_w / 2:.1f}" y="{oy - 8:.1f}" text-anchor="middle" font-size="11">'
            f"<title>{_e(name)}</title>{_e(_short(name, 18))}</text>"
        )
        for t in ticks:
            body.append(
                f'<line x1="{ox}" y1="{sy(t):.1f}" x2="{ox + plot_w}" y2="{sy(t):.1f}" stroke="#eee"/>'
                f'<text x="{ox - 4}" y="{sy(t) + 3.5:.1f}" text-anchor="end" font-size="9">'
                f"{tick_text(t, hi - lo)}</text>"
            )
        body.append(f'<line x1="{ox}" y1="{oy}" x2="{ox}" y2="{oy + plot_h}" stroke="#888"/>')
        for j, ys in enumerate(lines):
            ys = [y for y in ys if y is not None]
            if not ys:
                continue
            step = plot_w / max(1, len(ys) - 1)
            pts = " ".join(f"{ox + k * step:.1f},{sy(y):.1f}" for k, y in enumerate(ys))
            body.append(
                f'<polyline points="{pts}" fill="none" stroke="{PALETTE[j]}" stroke-width="2">'
                f"<title>{_e(name)} {_e(names[j])}: {', '.join(f'{y:.3g}' for y in ys)}</title></polyline>"
            )
        body.append(
            f'<text x="{ox + plot_w / 2:.1f}" y="{oy + plot_h + 14:.1f}" text-anchor="middle" font-size="9">'
            f"layer 0..{max(len(lines[0]) - 1, 0)}</text>"
            f'<text x="{ox + plot_w / 2:.1f}" y="{oy + plot_h + 26:.1f}" text-anchor="middle" font-size="9">'
            f"{_e(unit)}</text>"
        )
    return frame(width, height, title, "".join(body), kind, caption)


def curve(
    title: str,
    steps: list[int],
    lines: dict[str, list[float | None]],
    kind: str,
    caption: str,
    *,
    ylabel: str,
    references: dict[str, float] | None = None,
    marker: tuple[int, str] | None = None,
) -> str:
    """Lines over training steps (one per entry of `lines`, a value or None
    per step), `references` as dashed horizontal lines with their names, and
    `marker` (step, label) as a vertical line: an unlearning curve."""
    width, left, right = 560, 52, 540
    colour = {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(lines)}
    entries = [(name, colour[name], "box") for name in lines]
    entries += [(f"{name} model", "#222" if name == "retain" else "#999", "dash") for name in (references or {})]
    legend_svg, top = legend(entries, 10, 26, width - 20)
    bottom = top + 200
    values = [v for ys in lines.values() for v in ys if v is not None] + list((references or {}).values())
    ticks = nice_ticks(min(0.0, *values) if values else 0.0, max(1.0, *values) if values else 1.0, 5)
    lo, hi = ticks[0], ticks[-1] if ticks[-1] > ticks[0] else ticks[0] + 1
    first, last = min(steps), max(steps)
    span = (last - first) or 1
    sx = lambda s: left + (s - first) / span * (right - left) if last > first else (left + right) / 2  # noqa: E731
    sy = lambda v: bottom - (v - lo) / (hi - lo) * (bottom - top)  # noqa: E731
    body = [legend_svg]
    for t in ticks:
        body.append(
            f'<line x1="{left}" y1="{sy(t):.1f}" x2="{right}" y2="{sy(t):.1f}" stroke="#eee"/>'
            f'<text x="{left - 5}" y="{sy(t) + 3.5:.1f}" text-anchor="end" font-size="10">'
            f"{tick_text(t, hi - lo)}</text>"
        )
    body.append(
        f'<line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="#888"/>'
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{bottom}" stroke="#888"/>'
    )
    shown = steps if len(steps) <= 8 else [s for s in nice_ticks(first, last, 6) if first <= s <= last]
    for s in shown:
        body.append(f'<text x="{sx(s):.1f}" y="{bottom + 14}" text-anchor="middle" font-size="10">{s:g}</text>')
    body.append(
        f'<text x="{(left + right) / 2}" y="{bottom + 30}" text-anchor="middle" font-size="11">step</text>'
        f'<text x="13" y="{(top + bottom) / 2}" font-size="11" transform="rotate(-90 13 {(top + bottom) / 2})" '
        f'text-anchor="middle">{_e(ylabel)}</text>'
    )
    for name, y in (references or {}).items():
        body.append(
            f'<line x1="{left}" y1="{sy(y):.1f}" x2="{right}" y2="{sy(y):.1f}" '
            f'stroke="{"#222" if name == "retain" else "#999"}" stroke-width="1.5" stroke-dasharray="5 3">'
            f"<title>{_e(name)} model: {y:.3g}</title></line>"
        )
    if marker is not None:
        mx = sx(marker[0])
        body.append(
            f'<line x1="{mx:.1f}" y1="{top}" x2="{mx:.1f}" y2="{bottom}" stroke="#3a7d3a" stroke-width="2">'
            f"<title>{_e(marker[1])}</title></line>"
            f'<text x="{min(mx + 4, right - text_width(marker[1], 10)):.1f}" y="{top + 11}" font-size="10" '
            f'fill="#3a7d3a">{_e(marker[1])}</text>'
        )
    for name, ys in lines.items():
        points = [(s, y) for s, y in zip(steps, ys) if y is not None]
        if len(points) > 1:
            body.append(
                f'<polyline points="{" ".join(f"{sx(s):.1f},{sy(y):.1f}" for s, y in points)}" fill="none" '
                f'stroke="{colour[name]}" stroke-width="2"/>'
            )
        for s, y in points:
            body.append(
                f'<circle cx="{sx(s):.1f}" cy="{sy(y):.1f}" r="3.5" fill="{colour[name]}">'
                f"<title>{_e(name)} at step {s}: {y:.3g}</title></circle>"
            )
    return frame(width, bottom + 40, title, "".join(body), kind, caption)


def tradeoff(
    title: str,
    points: list[dict],
    *,
    xlabel: str,
    ylabel: str,
    x_higher: bool,
    y_higher: bool,
    front: list[str],
    paths: dict[str, list[str]],
    kind: str,
    caption: str,
    x_log: bool = False,
    y_log: bool = False,
) -> str:
    """A benchmark's trade-off: one point per checkpoint ({id, label, x, y,
    method, role}), utility right and forget up, each axis reversed where less
    is better so that good is always the top right; colours by method (legend),
    reference models as labelled squares, `front` (ids, the Pareto front)
    joined by a dark line and ringed, `paths` (series -> ids in step order) as
    thin lines; `x_log`/`y_log`: a log10 axis (a p-value). Every point carries its label (data-label, and a
    tooltip)."""
    width, height, left, right = 460, 400, 56, 444
    methods = list(dict.fromkeys(p["method"] for p in points if not p.get("role")))
    colour = {m: PALETTE[i % len(PALETTE)] for i, m in enumerate(methods)}
    entries = [(m, colour[m], "box") for m in methods[: len(PALETTE)]]
    entries += [("Pareto front", "#222", "dash")] if front else []
    legend_svg, top = legend(entries, 10, 26, width - 20)
    bottom = height - 50

    def scale(values: list[float], higher: bool, lo_px: float, hi_px: float, log: bool):
        """(value -> pixel, [(tick value, tick text)]); on a log axis a value at or below 0 sits at its floor."""
        lo, hi = min(values, default=0.0), max(values, default=1.0)
        if log:
            floor = min((v for v in values if v > 0), default=LOG_FLOOR)
            lo, hi = floor, max(hi, floor)
            first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
            step = max(1, math.ceil((last - first) / 5))
            ticks = [(10.0**k, "1" if k == 0 else f"1e{k}") for k in range(first, last + 1, step)]
            lo_t, hi_t = float(first), float(max(last, first + 1))
            transform = lambda v: math.log10(max(v, floor))  # noqa: E731
        else:
            if 0.0 <= lo and hi <= 1.0:
                lo, hi = 0.0, 1.0
            pad = (hi - lo) * 0.05 or 0.5
            values_t = nice_ticks(lo - pad, hi + pad, 5)
            lo_t, hi_t = values_t[0], values_t[-1] if values_t[-1] > values_t[0] else values_t[0] + 1
            ticks = [(t, tick_text(t, hi_t - lo_t)) for t in values_t]
            transform = float

        def to_px(v):
            share = (transform(v) - lo_t) / (hi_t - lo_t)
            return lo_px + (share if higher else 1 - share) * (hi_px - lo_px)

        return to_px, ticks

    sx, x_ticks = scale([p["x"] for p in points], x_higher, left, right, x_log)
    sy, y_ticks = scale([p["y"] for p in points], y_higher, bottom, top, y_log)
    body = [
        legend_svg,
        f'<line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="#888"/>'
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{bottom}" stroke="#888"/>',
    ]
    for t, text in x_ticks:
        body.append(
            f'<line x1="{sx(t):.1f}" y1="{top}" x2="{sx(t):.1f}" y2="{bottom}" stroke="#f0f0f0"/>'
            f'<text x="{sx(t):.1f}" y="{bottom + 14}" text-anchor="middle" font-size="10">{text}</text>'
        )
    for t, text in y_ticks:
        body.append(
            f'<line x1="{left}" y1="{sy(t):.1f}" x2="{right}" y2="{sy(t):.1f}" stroke="#f0f0f0"/>'
            f'<text x="{left - 5}" y="{sy(t) + 3.5:.1f}" text-anchor="end" font-size="10">{text}</text>'
        )
    xl = f"{xlabel}{', log' if x_log else ''} ({'higher' if x_higher else 'lower'} is better →)"
    yl = f"{ylabel}{', log' if y_log else ''} ({'higher' if y_higher else 'lower'} is better →)"
    body.append(
        f'<text x="{(left + right) / 2}" y="{bottom + 32}" text-anchor="middle" font-size="11">{_e(xl)}</text>'
        f'<text x="13" y="{(top + bottom) / 2}" font-size="11" transform="rotate(-90 13 {(top + bottom) / 2})" '
        f'text-anchor="middle">{_e(yl)}</text>'
    )
    at = {p["id"]: (sx(p["x"]), sy(p["y"])) for p in points}
    for series, ids in paths.items():
        line = [at[i] for i in ids if i in at]
        if len(line) > 1:
            stroke = colour.get(series, "#999")
            body.append(
                f'<polyline class="series-path" points="{" ".join(f"{x:.1f},{y:.1f}" for x, y in line)}" '
                f'fill="none" stroke="{stroke}" stroke-width="1.2" stroke-opacity="0.7">'
                f"<title>{_e(series)}: steps in order</title></polyline>"
            )
    on_front = sorted(at[i] for i in front if i in at)
    if len(on_front) > 1:
        body.append(
            f'<polyline class="pareto" points="{" ".join(f"{x:.1f},{y:.1f}" for x, y in on_front)}" '
            'fill="none" stroke="#222" stroke-width="1.5" stroke-dasharray="5 3"/>'
        )
    labelled = _place_labels([(p["label"], *at[p["id"]]) for p in points], (left + 1, top + 1, right - 1, bottom - 1))
    for i, p in enumerate(points):
        px, py = at[p["id"]]
        tip = f"{p['label']}: {ylabel} {p['y']:.3g}, {xlabel} {p['x']:.3g}" + (
            " (Pareto front)" if p["id"] in front else ""
        )
        attrs = f'class="pt" data-id="{_e(p["id"])}" data-label="{_e(tip)}" tabindex="0"'
        if p.get("role"):
            body.append(
                f'<rect {attrs} x="{px - 5:.1f}" y="{py - 5:.1f}" width="10" height="10" fill="#fff" '
                f'stroke="#222" stroke-width="2"><title>{_e(tip)}</title></rect>'
            )
        else:
            ring = ' stroke="#222" stroke-width="2"' if p["id"] in front else ""
            body.append(
                f'<circle {attrs} cx="{px:.1f}" cy="{py:.1f}" r="5" fill="{colour[p["method"]]}"{ring}>'
                f"<title>{_e(tip)}</title></circle>"
            )
        if i in labelled:
            tx, ty = labelled[i]
            body.append(f'<text x="{tx:.1f}" y="{ty:.1f}" font-size="11">{_e(p["label"])}</text>')
    unlabelled = [p["label"] for i, p in enumerate(points) if i not in labelled]
    if len(unlabelled) > 8:
        caption += f" {len(unlabelled)} points have no room for a label."
    elif unlabelled:
        caption += f" No room for the labels of {', '.join(unlabelled)}."
    if len(methods) > len(PALETTE):
        caption += f" {len(methods)} methods: colours repeat after {len(PALETTE)}."
    caption += " Squares: reference models. Tap or hover a point for its name and values."
    return frame(width, height, title, "".join(body), kind, caption)
