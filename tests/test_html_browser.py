"""The HTML report of a real zoo run, rendered in headless Chromium: the
summary table and every plot are there, and the page made no network request.
A screenshot is saved under reports/screenshots/."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PLOTS = ("dusk-knowledge", "tradeoff", "uds-profile", "honesty-replies", "honesty-mcq", "conceptguard-separation",
         "tofu-quality-utility", "muse-verbmem-utility")
# As the environment's notes advise: no background traffic of Chromium's own.
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync")


@pytest.fixture(scope="module")
def chromium():
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("CI must install Debian's chromium (.ci/run does)")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    pytest.importorskip("playwright", reason="pip install playwright (the dev extra has it)")
    return path


@pytest.fixture(scope="module")
def zoo_report(tmp_path_factory, zoo_family, cache_dir):
    """`pytest suites` on the default zoo (all suites), as the README's demo runs it."""
    project = tmp_path_factory.mktemp("demo")
    shutil.copytree(ROOT / "suites", project / "suites", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "thresholds", project / "thresholds")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "suites", "-q", "-p", "no:cacheprovider", "--no-progress", "--cache-dir", str(cache_dir),
         "--report-dir", str(project / "reports")], cwd=project, capture_output=True, text=True, timeout=900)
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]  # bad zoo methods fail
    assert "HTML report:" in result.stdout
    return project / "reports" / "latest" / "report.html"


def test_report_renders_with_every_plot_and_no_network(chromium, zoo_report):
    from playwright.sync_api import sync_playwright

    requests = []
    screenshot = ROOT / "reports" / "screenshots" / "zoo-report.png"
    screenshot.parent.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=chromium, args=list(CHROMIUM_FLAGS[1:]))
        page = browser.new_page(viewport={"width": 1400, "height": 2400})
        page.on("request", lambda request: requests.append(request.url))
        page.goto(zoo_report.as_uri())
        # header + the 8 unlearning-family checkpoints + robustness's shallow + the smoke suite's 2
        assert page.locator("#summary-matrix tr").count() == 1 + 11
        assert page.locator("#leaderboard tr").count() == 1 + 11
        for plot in PLOTS:
            assert page.locator(f'figure.plot[data-plot="{plot}"] svg').count() == 1, plot
        assert page.locator("tr.item.bad").count() > 0 and page.locator("tr.item:not(.bad)").count() > 0
        page.locator("#only-failures").check()  # the drill-down filter hides items that pass
        assert page.locator("tr.item:not(.bad)").evaluate_all("rows => rows.every(r => r.style.display === 'none')")
        page.screenshot(path=str(screenshot))
        browser.close()
    assert requests == [zoo_report.as_uri()], f"the report made network requests: {requests[1:]}"
    assert screenshot.stat().st_size > 10_000
