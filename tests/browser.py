"""Headless Chromium for the tests that look at an HTML page as a reader
does (Debian's chromium driven by playwright; no browser download)."""

from __future__ import annotations

VIEWPORTS = {"desktop": (1440, 900), "phone": (390, 844)}
# As the environment's notes advise: no background traffic of Chromium's own.
CHROMIUM_FLAGS = ("--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync")
# Pairs of SVG <text> boxes that intersect by more than 1 px either way, and
# texts that reach more than 1 px past their SVG's box (in page pixels).
LAYOUT_PROBLEMS = """() => {
  const out = {overlaps: [], clipped: []};
  for (const svg of document.querySelectorAll('figure.plot svg')) {
    const frame = svg.getBoundingClientRect();
    const plot = svg.closest('figure').dataset.plot;
    const boxes = [...svg.querySelectorAll('text')].filter(t => t.textContent.trim())
      .map(t => ({text: t.textContent, r: t.getBoundingClientRect()}));
    for (const b of boxes) {
      if (b.r.left < frame.left - 1 || b.r.right > frame.right + 1 || b.r.top < frame.top - 1 ||
          b.r.bottom > frame.bottom + 1) out.clipped.push(plot + ': ' + b.text);
    }
    for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
      const a = boxes[i].r, b = boxes[j].r;
      const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
      const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
      if (w > 1 && h > 1) out.overlaps.push(plot + ': ' + boxes[i].text + ' / ' + boxes[j].text);
    }
  }
  return out;
}"""


def layout(page) -> dict:
    problems = page.evaluate(LAYOUT_PROBLEMS)
    return problems | {"page_width": page.evaluate("document.documentElement.scrollWidth"),
                       "viewport_width": page.evaluate("document.documentElement.clientWidth")}
