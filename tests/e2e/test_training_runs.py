"""Training runs are series (issue 45): `--model-dir RUN` on a folder of
Trainer checkpoints (`checkpoint-<step>/`) evaluates them as one series. Each
row carries its series and step, the ranking holds one row for the series (its
best step, named), the console prints the series' table, and the HTML report
draws its unlearning curve; a step saved without its weights fails its own
checks and the series goes on."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from browser import CHROMIUM_FLAGS, VIEWPORTS, layout

from unlearnbench.fixtures.perturb import nudged_copy
from unlearnbench.models.checkpoint import discover

ROOT = Path(__file__).resolve().parents[2]
DUSK_CHECKS = 6


@pytest.fixture(scope="module")
def training_run(tmp_path_factory, zoo_family) -> Path:
    """A Trainer output folder of four steps: step 2 the full model (nothing forgotten yet), step 4 NPO's
    result, step 6 the retain model (forgotten as if never learnt), step 8 saved without its weights."""
    run = tmp_path_factory.mktemp("runs") / "npo-run"
    run.mkdir()
    nudged_copy(zoo_family["full"], run / "checkpoint-2")
    nudged_copy(zoo_family["npo"], run / "checkpoint-4")
    nudged_copy(zoo_family["retain"], run / "checkpoint-6")
    (run / "checkpoint-8").mkdir()
    shutil.copy(zoo_family["full"] / "config.json", run / "checkpoint-8")
    (run / "trainer_state.json").write_text("{}")  # a Trainer's own file beside its steps is not a checkpoint
    return run


def test_a_folder_of_trainer_checkpoints_is_one_series_in_step_order(tmp_path, training_run):
    specs = discover(training_run)
    assert [(s.name, s.series, s.step) for s in specs] == [
        (f"npo-run-checkpoint-{step}", "npo-run", step) for step in (2, 4, 6, 8)]
    # Steps sort by number (checkpoint-10 after checkpoint-9), several runs below one folder are several series,
    # and a plain checkpoint beside them is no step of any.
    for step in (9, 10):
        shutil.copytree(training_run / "checkpoint-2", tmp_path / "sweep" / "lr-1e-4" / f"checkpoint-{step}")
    shutil.copytree(training_run / "checkpoint-4", tmp_path / "sweep" / "lr-3e-4" / "checkpoint-100")
    shutil.copytree(training_run / "checkpoint-6", tmp_path / "sweep" / "merged")
    assert [(s.name, s.series, s.step) for s in discover(tmp_path / "sweep")] == [
        ("lr-1e-4-checkpoint-9", "lr-1e-4", 9), ("lr-1e-4-checkpoint-10", "lr-1e-4", 10),
        ("lr-3e-4-checkpoint-100", "lr-3e-4", 100), ("merged", None, None)]


@pytest.fixture(scope="module")
def series_run(training_run, zoo_family, cache_dir, warm_python, tmp_path_factory):
    from unlearnbench.fixtures import zoo

    reports = tmp_path_factory.mktemp("series-reports") / "reports"
    reports.mkdir()
    # The zoo's shared-knowledge items cannot decide that check's 0.05 margin at 80% power (the preflight says
    # so), and a copy of the retain model (step 6) has a privacy leakage and retain deviation of 0 in every
    # resample against it, a zero-width interval that decides nothing: no step could pass a gate holding
    # them, so this run's gate leaves them out.
    gate = reports.parent / "gate.yaml"
    gate.write_text("dusk:\n  shared_knowledge_kept: {enabled: false}\n  privacy_leakage_near_zero: {enabled: false}\n"
                    "  retain_deviation_bounded: {enabled: false}\n")
    result = warm_python.run(
        ["-m", "pytest", "suites/dusk", f"--model-dir={training_run}", f"--thresholds={gate}",
         f"--full-model={zoo_family['full']}",
         f"--retain-model={zoo_family['retain']}", f"--data-dir=dusk={zoo.data_dir(cache_dir)}",
         f"--cache-dir={cache_dir}", f"--report-dir={reports}", "-p", "no:cacheprovider", "--no-progress", "-q"],
        cwd=ROOT, timeout=900)
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]  # steps 2, 4 and 8 fail
    return result, reports / "latest"


def test_a_series_ranks_once_at_its_best_step_and_its_broken_step_fails_alone(series_run):
    result, latest = series_run
    report = json.loads((latest / "report.json").read_text())
    checkpoints = report["checkpoints"]
    for step in (2, 4, 6, 8):
        info = checkpoints[f"npo-run-checkpoint-{step}"]["info"]
        assert (info["series"], info["step"]) == ("npo-run", step)
    # The step without weights: each of its checks fails with the reason, the other steps are judged.
    broken = checkpoints["npo-run-checkpoint-8"]["suites"]["dusk"]["checks"]
    assert len(broken) == DUSK_CHECKS and all(v["outcome"] == "error" and "no weight files" in v["reason"]
                                              for v in broken.values())
    verdicts = report["assessment"]["verdicts"]
    assert verdicts["npo-run-checkpoint-2"]["verdict"] == "fail"  # the full model's copy has forgotten nothing
    assert verdicts["npo-run-checkpoint-6"]["verdict"] == "pass"  # the retain model's copy passes the DUSK gate
    board = report["assessment"]["ranking"]
    assert [(r["series"], r["step"], r["steps"], r["first_pass_step"]) for r in board["rows"]] == [
        ("npo-run", 6, 4, 6)]
    assert [r["step"] for r in board["series"]["npo-run"]] == [2, 4, 6, 8]
    assert report["assessment"]["order"][:4] == [f"npo-run-checkpoint-{s}" for s in (2, 4, 6, 8)]
    # The flat export holds each row's series and step: the curve can be plotted from the CSV alone.
    import pandas as pd

    rows = pd.read_csv(latest / "results.csv")
    steps = rows[rows["series"] == "npo-run"].groupby("checkpoint")["step"].agg(set).to_dict()
    assert steps == {f"npo-run-checkpoint-{s}": {s} for s in (2, 4, 6, 8)}
    # The console: the series' table, step by step.
    out = result.stdout
    assert "npo-run (series, best: step 6)" in out
    assert "series npo-run: 4 steps, best step 6 (rank 1); the gate first passes at step 6" in out
    table = out[out.index("series npo-run:"):].splitlines()[1:6]
    assert table[0].split() == ["step", "checkpoint", "verdict", "forget", "passed", "utility", "failed"]
    assert [line.split()[:3] for line in table[1:]] == [[str(s), f"npo-run-checkpoint-{s}", v] for s, v in
                                                        ((2, "FAIL"), (4, "FAIL"), (6, "PASS"), (8, "FAIL"))]


def reference_lines(html: str, plot: str) -> dict[str, float]:
    """{role: value} of a curve figure's reference lines, from their tooltips."""
    figure = re.search(rf'<figure class="plot" data-plot="{plot}">(.*?)</figure>', html, re.S).group(1)
    return {role: float(value) for role, value in re.findall(r"<title>(full|retain) model: ([-\d.e+]+)</title>", figure)}


def curve_points(html: str, plot: str) -> dict[str, dict[int, float]]:
    """{line: {step: value}} read back from a curve figure's point tooltips."""
    figure = re.search(rf'<figure class="plot" data-plot="{plot}">(.*?)</figure>', html, re.S).group(1)
    points: dict[str, dict[int, float]] = {}
    for line, step, value in re.findall(r"<circle [^>]*><title>(\w+) at step (\d+): ([-\d.e+]+)</title>", figure):
        points.setdefault(line, {})[int(step)] = float(value)
    return points


def test_the_unlearning_curve_reads_each_step_against_its_bounds_and_the_references(series_run):
    """Each point is the check family's mean margin to its bounds, (value - bound) / max(|bound|, 0.1) with
    the sign of the check's direction, clipped to [-1, 1], recomputed here from the report's own numbers; the
    step that is a copy of the retain model lies on the retain line and the full model's copy on the full
    line; the broken step has no point."""
    _, latest = series_run
    report = json.loads((latest / "report.json").read_text())
    html = (latest / "report.html").read_text()
    assert 'id="curves"' in html and "gate passes from step 6" in html
    references = report["reference_values"]

    def margin(value, verdict):
        signed = value - verdict["bound"] if verdict["direction"] == "at_least" else verdict["bound"] - value
        return max(-1.0, min(1.0, signed / max(abs(verdict["bound"]), 0.1)))

    for axis in ("forget", "utility"):
        drawn = curve_points(html, f"curve-{axis}")["dusk"]
        assert sorted(drawn) == [2, 4, 6]
        for step in (2, 4, 6):
            checks = [v for v in report["checkpoints"][f"npo-run-checkpoint-{step}"]["suites"]["dusk"][
                "checks"].values() if v.get("axis") == axis and v.get("bound") is not None]
            expected = sum(margin(v["value"], v) for v in checks) / len(checks)
            assert drawn[step] == pytest.approx(expected, abs=2e-3), (axis, step)
        lines = reference_lines(html, f"curve-{axis}")
        checks = [v for v in report["checkpoints"]["npo-run-checkpoint-6"]["suites"]["dusk"]["checks"].values()
                  if v.get("axis") == axis and v.get("bound") is not None]
        for role in ("full", "retain"):
            expected = sum(margin(references[role]["dusk"][v["metric"]], v) for v in checks) / len(checks)
            assert lines[role] == pytest.approx(expected, abs=2e-3), (axis, role)
    forget = curve_points(html, "curve-forget")["dusk"]
    lines = reference_lines(html, "curve-forget")
    assert forget[6] == pytest.approx(lines["retain"], abs=2e-3) and forget[2] == pytest.approx(lines["full"], abs=2e-3)
    assert forget[2] < 0 < forget[6]


def test_a_series_split_over_shards_merges_into_the_one_run_series(series_run, training_run, zoo_family, cache_dir,
                                                                    warm_python, tmp_path):
    """`--shard` splits a run's steps over machines; `unlearnbench merge` puts the series and its curve back
    together: the same ranking, series and reference values as the one run."""
    from unlearnbench.fixtures import zoo
    from unlearnbench.report.schema import load_report

    _, latest = series_run
    whole = json.loads((latest / "report.json").read_text())
    gate = latest.parent.parent / "gate.yaml"
    shards = []
    for i in range(2):
        reports = tmp_path / f"shard{i}"
        done = warm_python.run(
            ["-m", "pytest", "suites/dusk", f"--model-dir={training_run}", f"--thresholds={gate}", f"--shard={i}/2",
             f"--full-model={zoo_family['full']}", f"--retain-model={zoo_family['retain']}",
             f"--data-dir=dusk={zoo.data_dir(cache_dir)}", f"--cache-dir={cache_dir}", f"--report-dir={reports}",
             "-p", "no:cacheprovider", "--no-progress", "-q"], cwd=ROOT, timeout=900)
        assert done.returncode in (0, 1), done.stdout[-2000:]
        shards.append(reports / "latest" / "report.json")
    assert all(json.loads(p.read_text())["checkpoints"] for p in shards)  # four steps over two shards: none empty
    merged_dir = tmp_path / "merged"
    done = warm_python.run(["-m", "unlearnbench.cli", "merge", *map(str, shards), "-o", str(merged_dir)])
    assert done.returncode in (0, 1), done.stderr
    merged = load_report(next(merged_dir.glob("*/report.json")))
    assert merged["assessment"]["ranking"]["rows"] == whole["assessment"]["ranking"]["rows"]
    assert merged["assessment"]["ranking"]["series"] == whole["assessment"]["ranking"]["series"]
    assert merged["reference_values"] == whole["reference_values"]
    assert 'data-plot="curve-forget"' in next(merged_dir.glob("*/report.html")).read_text()


@pytest.mark.parametrize("viewport", VIEWPORTS)
def test_the_curve_reads_in_chromium_at_desktop_and_phone_width(chromium, series_run, viewport):
    from playwright.sync_api import sync_playwright

    _, latest = series_run
    screenshot = ROOT / "reports" / "screenshots" / f"series-{viewport}.png"
    screenshot.parent.mkdir(parents=True, exist_ok=True)
    width, height = VIEWPORTS[viewport]
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=chromium, args=list(CHROMIUM_FLAGS))
        page = browser.new_page(viewport={"width": width, "height": height})
        errors = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto((latest / "report.html").resolve().as_uri())
        assert page.locator('figure.plot[data-plot^="curve-"] svg').count() == 2
        assert page.locator("#verdicts tbody tr").count() == 4  # the four steps
        found = layout(page)
        assert found["page_width"] <= found["viewport_width"], found["page_width"]
        assert found["overlaps"] == [] and found["clipped"] == [], found
        page.locator("#curves").scroll_into_view_if_needed()
        page.screenshot(path=str(screenshot))
        browser.close()
    assert errors == []
