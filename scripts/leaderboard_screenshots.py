"""The screenshots of docs/leaderboard.md, made from real runs, never by hand.

    .venv/bin/python scripts/leaderboard_screenshots.py [--reports DIR] [--out docs/images]

Without --reports, runs the fixture zoo three times with different suites
(as a lab's runs accumulate: tofu and muse, dusk, honesty and uds, wmdp and
conceptguard; cached results make it about a minute), builds the site with
`unlearnbench site`, and writes leaderboard-desktop.png (1440 px wide) and
leaderboard-phone.png (390 px) of its index page. Needs Debian's chromium and
playwright (the dev extra).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = (("tofu", "muse"), ("dusk", "honesty", "uds"), ("wmdp", "conceptguard"))
VIEWPORTS = {"desktop": (1440, 900), "phone": (390, 844)}


def zoo_runs(reports: Path) -> None:
    for n, suites in enumerate(RUNS):
        status = subprocess.run([sys.executable, "-m", "pytest", *(f"suites/{s}" for s in suites), "-q",
                                 "-p", "no:cacheprovider", "--no-progress", "--report-dir", str(reports / f"run{n}")],
                                cwd=ROOT, stdout=subprocess.DEVNULL).returncode
        if status not in (0, 1):  # 1: the zoo's bad checkpoints fail their gates, as they should
            sys.exit(f"pytest {' '.join(suites)} exited with {status}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=Path, default=None, help="reports to build the site from (default: zoo runs)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("chromium is not installed (apt-get install chromium)")
    with tempfile.TemporaryDirectory() as work:
        reports = args.reports or Path(work) / "reports"
        if args.reports is None:
            zoo_runs(reports)
        site = Path(work) / "site"
        subprocess.run([sys.executable, "-m", "unlearnbench.cli", "site", str(reports), "-o", str(site)], check=True)
        args.out.mkdir(parents=True, exist_ok=True)
        with sync_playwright() as driver:
            browser = driver.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
            for name, (width, height) in VIEWPORTS.items():
                page = browser.new_page(viewport={"width": width, "height": height})
                page.goto((site / "index.html").as_uri())
                path = args.out / f"leaderboard-{name}.png"
                page.screenshot(path=str(path))
                print(path)
            browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
