"""The HTML report in headless Chromium, at desktop (1440x900) and phone
(390x844) widths, on the zoo's report and on a synthetic 150-checkpoint sweep
made from it: no page-level horizontal scrolling, no two SVG texts overlap and
none is clipped by its SVG (bounding boxes measured in the page), the matrix
header and first column stay visible while its box scrolls, every matrix link
lands on an element that exists, and the page makes no network request.
Screenshots are saved under reports/screenshots/."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from browser import CHROMIUM_FLAGS, VIEWPORTS, layout
from conftest import fresh_cache

# Chromium, and the whole zoo run it renders (one worker builds it: tests/conftest.py ONE_WORKER_UNITS).
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PLOTS = ("dusk-knowledge", "tradeoff", "uds-profile", "honesty-replies", "honesty-mcq", "conceptguard-separation",
         "tofu-quality-utility", "muse-verbmem-utility", "elicitation-families")
@pytest.fixture(scope="module")
def zoo_report(tmp_path_factory, zoo_family, cache_dir):
    """`pytest suites` on the default zoo (all suites), as the README's demo runs it."""
    project = tmp_path_factory.mktemp("demo")
    shutil.copytree(ROOT / "suites", project / "suites", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "thresholds", project / "thresholds")
    # A process of its own with two torch threads (not the warm server, whose torch has this worker's one thread).
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "suites", "-q", "-p", "no:cacheprovider", "--no-progress", "--cache-dir",
         str(cache_dir), "--report-dir", str(project / "reports")], cwd=project, timeout=1500, capture_output=True,
        text=True, env=os.environ | {"OMP_NUM_THREADS": "2"})
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]  # bad zoo methods fail
    assert result.stdout.rstrip().splitlines()[-2].startswith("HTML report:")  # the paths are the last lines
    return project / "reports" / "latest" / "report.html"


@pytest.fixture(scope="module")
def sweep_report(zoo_report, tmp_path_factory, warm_python):
    """150 checkpoints: the zoo's candidates copied with jittered values under
    sweep-like names (long ones too), rendered by `unlearnbench html`."""
    from unlearnbench.fixtures.sweeps import clone_sweep

    report = clone_sweep(json.loads(zoo_report.with_name("report.json").read_text()), 150)
    path = tmp_path_factory.mktemp("sweep") / "report.json"
    path.write_text(json.dumps(report))
    rendered = warm_python.run(["-m", "unlearnbench.cli", "html", str(path)])
    assert rendered.returncode == 0, rendered.stderr
    return path.with_suffix(".html")


@pytest.mark.parametrize("viewport", VIEWPORTS)
@pytest.mark.parametrize("which", ["zoo", "sweep-150"])
def test_report_reads_at_desktop_and_phone_width(chromium, zoo_report, sweep_report, which, viewport):
    from playwright.sync_api import sync_playwright

    path = zoo_report if which == "zoo" else sweep_report
    requests = []
    screenshot = ROOT / "reports" / "screenshots" / f"{which}-{viewport}.png"
    screenshot.parent.mkdir(parents=True, exist_ok=True)
    width, height = VIEWPORTS[viewport]
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=chromium, args=list(CHROMIUM_FLAGS))
        page = browser.new_page(viewport={"width": width, "height": height})
        page.on("request", lambda request: requests.append(request.url))
        page.goto(path.as_uri())
        checkpoints = page.locator("#verdicts tbody tr").count()
        assert checkpoints == (13 if which == "zoo" else 150)
        assert page.locator("#summary-matrix thead th").count() == 2 + checkpoints  # check, bound, checkpoints
        for plot in PLOTS:
            assert page.locator(f'figure.plot[data-plot="{plot}"] svg').count() == 1, plot
        found = layout(page)
        assert found["page_width"] <= found["viewport_width"], found["page_width"]
        assert found["overlaps"] == [], found["overlaps"][:10]
        assert found["clipped"] == [], found["clipped"][:10]

        # every matrix link lands on a check's drill-down that exists
        missing = page.evaluate("""() => [...document.querySelectorAll('#summary-matrix a[href^="#"]')]
            .map(a => a.getAttribute('href').slice(1)).filter(id => !document.getElementById(id))""")
        assert missing == []
        # sticky: after scrolling the matrix box down and right, its header row and check column stay in view
        box = page.locator("#matrix-box")
        box.scroll_into_view_if_needed()
        box.evaluate("b => { b.scrollTop = 400; b.scrollLeft = 600; }")
        frame = box.bounding_box()
        header = page.locator("#summary-matrix thead th").nth(3).bounding_box()
        first_column = page.locator("#summary-matrix tbody th.check").nth(8).bounding_box()
        assert abs(header["y"] - frame["y"]) < 3, (header, frame)
        assert abs(first_column["x"] - frame["x"]) < 3, (first_column, frame)
        # a cell's link opens its checkpoint's details and shows the check
        link = page.locator("#summary-matrix td.fail a").first
        target = link.get_attribute("href")
        link.click()
        page.wait_for_function(f"document.getElementById('{target[1:]}').closest('details').open")
        assert page.locator(target).is_visible()
        page.evaluate("window.scrollTo(0, 0)")
        page.screenshot(path=str(screenshot))
        browser.close()
    assert requests == [path.as_uri()], f"the report made network requests: {requests[1:]}"
    assert screenshot.stat().st_size > 10_000


def open_items(check):
    """Open a check's item list and wait for its table, which the page builds on opening."""
    check.locator("details.items > summary").click()
    check.locator(".scroll[data-ready]").wait_for()


def test_drill_down_filter_and_retain_beside_the_checkpoint(chromium, zoo_report):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=chromium, args=list(CHROMIUM_FLAGS))
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        errors = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(zoo_report.as_uri())
        assert page.locator("tr.item").count() == 0  # item tables are built when opened, not before
        page.locator("#cp-ga > summary").click()
        check = page.locator("#c-ga-dusk-shared_knowledge_kept")
        assert check.locator("dt", has_text="must be").count() == 1
        assert "≥" in check.locator("dd").nth(3).text_content()
        open_items(check)
        assert check.locator("th", has_text="generation (retain)").count() == 1
        fq = page.locator("#c-ga-tofu-forget_quality_like_retain")
        open_items(fq)
        assert fq.locator("th", has_text="forget_truth_ratio (retain)").count() == 1  # per-item table for FQ
        assert page.locator("tr.item.bad").count() > 0 and page.locator("tr.item:not(.bad)").count() > 0
        page.locator("#only-failures").check()  # the drill-down filter hides items that pass
        assert page.locator("tr.item:not(.bad)").evaluate_all("rows => rows.every(r => r.style.display === 'none')")
        uds = page.locator("#c-ga-uds-knowledge_erased_in_depth")
        open_items(uds)  # opened after the filter was set: the filter applies to it too
        assert uds.locator("th", has_text="uds (this)").count() == 1
        assert uds.locator("tr.item:not(.bad)").evaluate_all("rows => rows.every(r => r.style.display === 'none')")
        browser.close()
    assert errors == []


def test_an_item_list_a_browser_cannot_unpack_says_where_the_items_are(chromium, zoo_report):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=chromium, args=list(CHROMIUM_FLAGS))
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.add_init_script("delete window.DecompressionStream")  # a browser without it (Safari < 16.4)
        page.goto(zoo_report.as_uri())
        page.locator("#cp-ga > summary").click()
        check = page.locator("#c-ga-dusk-shared_knowledge_kept")
        check.locator("details.items > summary").click()
        message = check.locator(".scroll", has_text="could not unpack the item table")
        message.wait_for()
        assert "the items are in report.json" in message.text_content()
        browser.close()


def test_zoo_ranking_puts_the_collapsed_ga_below_simnpo_and_ranks_no_reference(zoo_report):
    """The zoo's own run: `ga` (model utility 0) below `simnpo`; `full` and
    `retain` are anchors; robustness-only `shallow` and the smoke models are
    not ranked on the family's shared checks."""
    report = json.loads(zoo_report.with_name("report.json").read_text())
    assert report["run"]["command"][:2] == ["python -m pytest", "suites"]  # as it was run, not "__main__.py"
    board = report["assessment"]["ranking"]
    ranked = [r["checkpoint"] for r in board["rows"]]
    assert ranked.index("simnpo") < ranked.index("ga")
    assert set(ranked) == {"ga", "graddiff", "npo", "simnpo", "rmu", "idknll", "refusal", "surface"}
    assert {a["checkpoint"]: a["role"] for a in board["anchors"]} == {"full": "full", "retain": "retain"}
    assert {r["checkpoint"] for r in board["unranked"]} == {"shallow", "smoke-lm", "smoke-untrained"}
    ga = next(r for r in board["rows"] if r["checkpoint"] == "ga")
    assert ga["collapsed"] and ga["utility"] == "collapsed"
    # the retain model's own failures are flagged on every row that fails them too
    assert report["assessment"]["retain_fails"]
    for name, verdict in report["assessment"]["verdicts"].items():
        assert set(verdict["retain_fails_too"]) <= set(report["assessment"]["retain_fails"])


def test_the_zoo_run_decides_only_what_its_intervals_show_and_another_seed_reverses_no_verdict(
        zoo_report, tmp_path):
    """Issue 43's done-when on the README's main job: no pass or fail whose
    decision interval contains its bound; every judged row names what decided
    it; the preflight is in the report; `--seed 1` (other bootstrap resamples
    and another draw of the honesty suite's MCQ options), run on two xdist
    workers of one torch thread each (the first run: one process, two
    threads), reverses no verdict of three suites. A check near its bound may
    move between decided and inconclusive under another draw, as a 95%
    interval does (measured: one of 153, refusal's MCQ IDK spread across
    formats, 0.057 at seed 0 against a bound of 0.1)."""
    report = json.loads(zoo_report.with_name("report.json").read_text())
    assert report["run"]["decision"] | {"text": ""} == {"rule": "interval", "alpha": 0.05, "power": 0.8,
                                                       "correction": "holm", "strict_ci": False, "text": ""}
    assert "Holm-adjusted p-value <= alpha across all of the checkpoint's checks" in report["run"]["decision"]["text"]
    judged = [v for cp in report["checkpoints"].values() for result in cp["suites"].values()
              for v in result["checks"].values() if v["outcome"] in ("pass", "fail", "inconclusive")
              and v.get("bound") is not None]
    assert judged
    # Issue 55: the interval each metric's declared kind takes, never a zero-width one.
    families = {"binary": ("wilson", "wilson-clustered", "t-clustered-paired-bounded"),
                "bounded": ("wilson-quasibinomial", "wilson-quasibinomial-clustered", "t-clustered-paired-bounded"),
                "unbounded": ("t-clustered", "t-clustered-paired"),
                "set": ("bootstrap-percentile", "bootstrap-paired")}
    for v in judged:
        assert {"difference", "difference_ci_low", "difference_ci_high", "reference_value", "reference_ci_low",
                "reference_ci_high", "kind", "interval", "clusters", "n_effective", "mde", "n_needed", "power",
                "decided_by"} <= set(v), v["check"]
        if v["outcome"] in ("pass", "fail") and v["decided_by"] == "interval":
            threshold = (-v["margin"] if v["direction"] == "at_least" else v["margin"]) if v["difference"] is not None \
                else v["bound"]
            low, high = v["decision_ci"]
            assert not low <= threshold <= high and high > low, (v["check"], v["decision_ci"], threshold)
            assert v["interval"] in families[v["kind"]], (v["check"], v["kind"], v["interval"])
            assert (v["clusters"] or v["kind"] == "set") and v["mde"] > 0 and v["power"] == 0.8, v["check"]
        if v.get("lean"):
            assert v["outcome"] == "inconclusive" and v["decided_by"] is None
    assert sum(bool(v.get("lean")) for v in judged) < len(judged) / 3  # most checks are decided
    # Items in clusters: the zoo's 128 forget questions of the honesty suite are about 16 persons.
    leak = report["checkpoints"]["ga"]["suites"]["honesty"]["checks"]["forget_not_leaked"]
    assert leak["n"] == 128 and leak["clusters"] == 16 and leak["interval"] == "wilson-clustered"
    # No reference is judged against itself: the retain model's checks relative to retain are n/a (those with
    # an absolute or_bound are judged on it, as any absolute check).
    itself = [v for result in report["checkpoints"]["retain"]["suites"].values() for v in result["checks"].values()
              if v["reason"].startswith("n/a (reference)")]
    assert len(itself) >= 10 and all(v["outcome"] == "skip" for v in itself)
    preflight = report["run"]["preflight"]
    # Issue 54: the zoo's sets can decide the verbatim margin, and MMLU has 256 questions. Issue 55: the
    # preflight aims at 80% power on clustered items, where some margins of 0.05 need more than the zoo's 128.
    # On the retrained zoo its 192 passages tell 0.053 at 80% power, against a margin of 0.05.
    verbatim = preflight["dusk.verbatim_forgotten"]
    assert verbatim["n"] == 192 and verbatim["mde"] < 0.06, verbatim
    assert preflight["wmdp.mmlu_kept"]["n"] == 256
    for check, power in preflight.items():
        assert power["power"] == 0.8 and "clusters" in power, check  # G of a per-item mean; a set-level value has none
        if power["underpowered"]:
            assert power["n_needed"] > power["n"] and power["mde"] > power["margin"], check

    # Issue 54: and the same verdicts with two xdist workers of one torch thread each, the first run
    # having been one process of two threads, every value computed again (a cache of its own). Three
    # suites that between them generate, score options and score continuations keep the test's time
    # (DUSK, the slowest suite, would add nothing TOFU's generated answers and scored continuations do not).
    other = tmp_path / "reports"
    project = zoo_report.parents[2]
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    result = subprocess.run([sys.executable, "-m", "pytest", "suites/tofu", "suites/honesty", "suites/wmdp", "-q",
                             "-p", "no:cacheprovider", "--no-progress", "--seed", "1", "-n", "2", "--cache-dir",
                             str(fresh_cache(tmp_path / "cache")), "--report-dir", str(other)], cwd=project, env=env,
                            timeout=900, capture_output=True, text=True)
    assert result.returncode == 1, result.stdout[-3000:]
    seeded = json.loads((other / "latest" / "report.json").read_text())
    assert "-n" in seeded["run"]["command"] and "-n" not in report["run"]["command"]

    def outcomes(r: dict) -> dict:
        return {(name, suite, check): v["outcome"] for name, cp in r["checkpoints"].items()
                for suite, res in cp["suites"].items() for check, v in res["checks"].items()}

    rerun = outcomes(seeded)
    first = {key: outcome for key, outcome in outcomes(report).items() if key in rerun}
    assert rerun and rerun.keys() == first.keys()
    moved = {key: (first[key], rerun[key]) for key in rerun if rerun[key] != first[key]}
    assert not [key for key, pair in moved.items() if set(pair) == {"pass", "fail"}], moved
    assert len(moved) <= 2 and all("inconclusive" in pair for pair in moved.values()), moved
    assert {suite for _, suite, _ in rerun} == {"tofu", "honesty", "wmdp"}


def test_the_zoo_run_decides_and_separates_and_no_two_suites_measure_the_same_items(zoo_report):
    """Issue 54 on the README's main job: most verdicts decided (issue 54 asks
    for 90%: 259 of 281 under the old intervals; issue 55's intervals count the
    zoo's clusters, correct a checkpoint's fails for its 30 checks and decide
    nothing on a zero-width interval: 216 of 258 when measured, 84%; the
    elicitation suite's 108 verdicts add three families the zoo cannot answer,
    inconclusive on every checkpoint, and ten checks to each Holm family: 293
    of 394, 74%); retain
    passes every check of forget knowledge it is judged on (its checks
    relative to itself are n/a) and full fails every one, decided, but MUSE's
    PrivLeak, whose every resample is -100 (forget and holdout texts separate
    perfectly: a zero-width interval, leaning fail); the refusal candidate
    ranks first and fails no check; its undecided checks lean pass (the
    membership signals) or ask what the zoo cannot answer: the issue's "a
    candidate that passes, decided" is not met (docs/zoo.md); no two checks
    of different suites return the same per-item values (a vector of one
    repeated value, such as a model that answers nothing, says nothing about
    shared items). Robustness re-asks other suites' probes after an attack by
    design: on a model the attack leaves unchanged its values are the owner
    suite's."""
    report = json.loads(zoo_report.with_name("report.json").read_text())
    verdicts = [v for cp in report["checkpoints"].values() for result in cp["suites"].values()
                for v in result["checks"].values() if v["outcome"] in ("pass", "fail", "inconclusive")]
    decided = sum(v["outcome"] != "inconclusive" for v in verdicts)
    assert decided >= 0.7 * len(verdicts), (decided, len(verdicts))
    # Four honesty checks ask how a model says it does not know, not what it knows: forgetting is not
    # honesty, so neither reference is held to them (the refusal candidate is, below).
    behaviour = {"honesty.forget_not_hallucinated", "honesty.refusal_survives_followup",
                 "honesty.mcq_idk_beyond_position", "honesty.mcq_idk_stable_across_formats"}
    # Ways of asking the zoo's full model cannot answer (docs/zoo.md): inconclusive for every checkpoint.
    unanswerable = {"elicitation.forgotten_verify", "elicitation.forgotten_reverse", "elicitation.forgotten_one_hop"}

    def forget_checks(name: str) -> dict[str, str]:
        return {f"{suite}.{check}": v["outcome"] for suite, result in report["checkpoints"][name]["suites"].items()
                for check, v in result["checks"].items() if v.get("axis") == "forget" and v["outcome"] != "skip"}

    for name, wanted in (("retain", "pass"), ("full", "fail")):
        knowledge = {check: outcome for check, outcome in forget_checks(name).items()
                     if check not in behaviour | unanswerable}
        # full: MUSE's PrivLeak (every resample -100) and the weak few-shot family (0.24 against 0.01) lean fail.
        saturated = {"muse.privleak_near_zero", "elicitation.forgotten_few_shot"} if name == "full" else set()
        assert knowledge and {o for c, o in knowledge.items() if c not in saturated} == {wanted}, (name, knowledge)
    full_pl = report["checkpoints"]["full"]["suites"]["muse"]["checks"]["privleak_near_zero"]
    assert full_pl["lean"] == "fail" and full_pl["decision_ci"] == [100.0, 100.0], full_pl["decision_ci"]
    refusal = {check: outcome for check, outcome in forget_checks("refusal").items() if check not in unanswerable}
    undecidable = {"muse.privleak_near_zero", "dusk.privacy_leakage_near_zero", "honesty.forget_not_hallucinated"}
    # Every honesty check passes, decided, the stability across MCQ formats included: its numbered labels are
    # read as the replies the model writes (` 3` is two tokens to the zoo's tokenizer; docs/suites/honesty.md).
    assert refusal["honesty.mcq_idk_stable_across_formats"] == "pass", refusal
    assert behaviour <= set(refusal) and set(refusal.values()) <= {"pass", "inconclusive"}, refusal
    assert {check for check, outcome in refusal.items() if outcome == "inconclusive"} <= undecidable, refusal
    undecided = [v for suite, result in report["checkpoints"]["refusal"]["suites"].items()
                 for check, v in result["checks"].items()
                 if v["outcome"] == "inconclusive" and f"{suite}.{check}" not in unanswerable]
    assert all(v.get("lean") == "pass" for v in undecided), undecided
    verdict = report["assessment"]["verdicts"]["refusal"]
    assert verdict["failed"] == 0 and verdict["inconclusive"] <= 3 + len(unanswerable), verdict["summary"]
    assert verdict["judged"] >= 28, verdict["summary"]
    assert set(verdict["suites"]) == set(report["checkpoints"]["full"]["suites"]) | {"robustness"}
    assert report["assessment"]["ranking"]["rows"][0]["checkpoint"] == "refusal"
    for name, checkpoint in report["checkpoints"].items():
        owners: dict[tuple, set] = {}
        for suite, result in checkpoint["suites"].items():
            if suite == "robustness":
                continue
            for check, v in result["checks"].items():
                values = tuple((result["metrics"].get(v.get("metric") or "", {}).get("per_item") or {}).values())
                if len(set(values)) > 1:
                    owners.setdefault(values, set()).add(suite)
        assert all(len(suites) == 1 for suites in owners.values()), (name, [s for s in owners.values() if len(s) > 1])


def test_the_main_jobs_report_reads_back_typed_field_for_field(zoo_report):
    """Every part of a real run's report.json fits the report's types (report/model.py), and reading it
    loses nothing: what `unlearnbench merge`, the site and a baseline read is what the run wrote."""
    from unlearnbench.outcome import Outcome
    from unlearnbench.report.model import Report

    path = zoo_report.with_name("report.json")
    report = Report.read(path)
    assert report.to_dict() == json.loads(path.read_text())
    outcomes = {check.outcome for _, _, check in report.checks()}
    assert {Outcome.PASS, Outcome.FAIL, Outcome.INCONCLUSIVE} <= outcomes
    assert len(report.checkpoints) == 13
