"""Issue 46: `unlearnbench site` turns any set of reports into a static
leaderboard site. Built here from real zoo runs: three runs of different
suites, a sharded run merged, a report rewritten as schema 2 wrote it, the
same checkpoints on a second DUSK data set, and a training run whose steps
are a series beside a second checkpoint named `npo`. Every number the tests
expect is read from the reports' JSON here, with this file's own reading of
the headline metrics and of the Pareto front, never with the site's code."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
from browser import CHROMIUM_FLAGS, VIEWPORTS, layout

from unlearnbench.fixtures.perturb import nudged_copy


pytestmark = pytest.mark.slow  # a dozen zoo runs, most from the result cache

ROOT = Path(__file__).resolve().parents[2]
# (forget metric, higher is better), (utility metric, higher is better): as docs/leaderboard.md lists them.
HEADLINES = {
    "tofu": (("forget_quality", True), ("model_utility", True)),
    "muse": (("verbmem_rougeL_f1", False), ("knowmem_retain_rougeL_f1", True)),
    "dusk": (("verbatim_rougeL_f1", False), ("sk_rougeL_recall", True)),
    "honesty": (("forget_leak_rate", False), ("retain_accuracy", True)),
    "wmdp": (("wmdp_bio", False), ("mmlu", True)),
    "conceptguard": (("ctxt_sep", True), ("help_qa", True)),
}
# What schema 2 did not have (report/schema.py): the decision fields of a verdict and the run's decision rule.
DECISION_FIELDS = ("rule", "alpha", "correction", "decision_ci", "interval", "p_value", "p_adjusted", "decided_by",
                   "lean", "mde", "n_needed", "difference", "difference_ci_low", "difference_ci_high",
                   "reference_ci_low", "reference_ci_high")


def as_schema_2(report: dict) -> dict:
    """`report` as schema version 2 wrote it: `run.strict_ci` for `run.decision`, verdicts without their decision
    fields, no suite version with the data, no assessment (the reader recomputes it)."""
    report = json.loads(json.dumps(report))
    report["schema_version"] = 2
    report.pop("assessment", None)
    report["run"]["strict_ci"] = report["run"].pop("decision")["strict_ci"]
    for checkpoint in report["checkpoints"].values():
        for result in checkpoint["suites"].values():
            result["data"].pop("suite_version", None)
            for verdict in result["checks"].values():
                for field in DECISION_FIELDS:
                    verdict.pop(field, None)
    return report


@pytest.fixture(scope="module")
def runs(tmp_path_factory, zoo_family, cache_dir, warm_python) -> dict:
    """{label: report.json} of every run, under one reports/ folder (the site's input)."""
    project = tmp_path_factory.mktemp("site-project")
    shutil.copytree(ROOT / "suites", project / "suites", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "thresholds", project / "thresholds")
    reports = project / "reports"

    def pytest_run(label: str, *args: str) -> Path:
        result = warm_python.run(["-m", "pytest", *args, "-q", "-p", "no:cacheprovider", "--no-progress",
                                  "--cache-dir", str(cache_dir), "--report-dir", str(reports / label)],
                                 cwd=project, timeout=900)
        assert result.returncode in (0, 1), result.stdout[-3000:] + result.stderr[-3000:]
        return next((reports / label).glob("2*/report.json"))

    out = {"a": pytest_run("a", "suites/tofu", "suites/muse"),
           "b": pytest_run("b", "suites/dusk", "suites/honesty"),
           "c": pytest_run("c", "suites/wmdp", "suites/conceptguard"),
           "shard0": pytest_run("shard0", "suites/smoke", "--shard", "0/2"),
           "shard1": pytest_run("shard1", "suites/smoke", "--shard", "1/2")}
    merged = warm_python.run(["-m", "unlearnbench.cli", "merge", str(out["shard0"]), str(out["shard1"]), "-o",
                              str(reports / "merged")], cwd=project)
    assert merged.returncode == 0, merged.stderr
    out["merged"] = next((reports / "merged").glob("2*/report.json"))
    old = pytest_run("old", "suites/uds")
    old.write_text(json.dumps(as_schema_2(json.loads(old.read_text()))))
    out["old"] = old
    # The same checkpoints on a second DUSK data set: the zoo's, with a third of the forget questions left out.
    zoo_data = Path(warm_python.run(["-m", "unlearnbench.cli", "zoo", "--cache-dir", str(cache_dir), "data"])
                    .stdout.strip())
    zoo_dusk = zoo_data / "dusk"
    trimmed = shutil.copytree(zoo_dusk, project / "dusk-trimmed")
    questions = (zoo_dusk / "eval" / "SpecificForgetQA.jsonl").read_text().splitlines()
    (trimmed / "eval" / "SpecificForgetQA.jsonl").write_text("\n".join(questions[:16]) + "\n")
    # Two of the zoo's checkpoints (and its references): a second data set's group needs no more.
    out["trimmed"] = pytest_run("trimmed", "suites/dusk", "--data-dir", f"dusk={trimmed}",
                                *(a for name in ("npo", "ga") for a in ("--model", f"{name}={zoo_family[name]}")),
                                "--full-model", str(zoo_family["full"]), "--retain-model", str(zoo_family["retain"]))
    # A training run (three steps, one series) and a second checkpoint named npo (other weights).
    run = project / "npo-run"
    for step, recipe in ((2, "full"), (4, "npo"), (6, "retain")):
        nudged_copy(zoo_family[recipe], run / f"checkpoint-{step}")
    other_npo = nudged_copy(zoo_family["npo"], project / "npo-again", nudge=3e-7)
    out["series"] = pytest_run("series", "suites/tofu", "--model-dir", str(run), "--model", f"npo={other_npo}",
                               "--full-model", str(zoo_family["full"]), "--retain-model", str(zoo_family["retain"]),
                               "--data-dir", f"tofu={zoo_data / 'tofu'}")
    return out


@pytest.fixture(scope="module")
def site(runs, warm_python, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site") / "site"
    reports = runs["a"].parents[2]
    result = warm_python.run(["-m", "unlearnbench.cli", "site", str(reports), "-o", str(out)])
    assert result.returncode == 0, result.stderr
    assert f"open {out / 'index.html'}" in result.stdout
    return out


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def fingerprint_rows(group: dict) -> dict[str, dict]:
    return {row["fingerprint"]: row for row in group["rows"]}


def test_every_report_is_read_once_and_the_shards_through_their_merged_run(runs, site):
    board = load(site / "leaderboard.json")
    ids = {run["id"] for run in board["runs"]}
    expected = {load(runs[label])["run"]["id"] for label in ("a", "b", "c", "merged", "old", "trimmed", "series")}
    assert ids == expected
    assert {r["schema_version"] for r in board["runs"] if r["id"] == load(runs["old"])["run"]["id"]} == {2}
    for shard in ("shard0", "shard1"):
        assert any(str(runs[shard]) in note and "through merged run" in note for note in board["notes"])
    # the `latest` links point at the same files: each read once
    assert len(board["runs"]) == len(expected)


def test_the_leaderboard_values_are_the_reports_own(runs, site):
    """Each row's headline values are the latest report's metric values of that checkpoint's fingerprint, in
    the group of its setting; the trimmed DUSK data's results are in a group of their own."""
    board = load(site / "leaderboard.json")
    main, trimmed_group = board["groups"][0], board["groups"][1]
    assert len(board["groups"]) == 2
    main_rows = fingerprint_rows(main)
    for label in ("a", "b", "c", "merged", "old", "series"):
        report = load(runs[label])
        for name, checkpoint in report["checkpoints"].items():
            row = main_rows[checkpoint["info"]["fingerprint"]]
            assert report["run"]["id"] in row["runs"]
            for suite, result in checkpoint["suites"].items():
                cell = row["suites"][suite]
                if label == "a" and suite == "tofu" and row["fingerprint"] in latest_tofu(runs):
                    continue  # evaluated again, later, by the series run: that one is shown
                assert cell["run"] == report["run"]["id"], (name, suite)
                for axis, (metric, _) in zip(("forget", "utility"), HEADLINES.get(suite, ())):
                    value = result["metrics"][metric]
                    assert cell[axis]["value"] == value["value"] and cell[axis]["n"] == value["n"], (name, suite)
                    assert [cell[axis]["ci_low"], cell[axis]["ci_high"]] == value["ci"]
    trimmed = load(runs["trimmed"])
    assert trimmed_group["suites"] == ["dusk"] and set(trimmed_group["differs"]) == {"dusk"}
    trimmed_rows = fingerprint_rows(trimmed_group)
    original = load(runs["b"])
    for name, checkpoint in trimmed["checkpoints"].items():
        row = trimmed_rows[checkpoint["info"]["fingerprint"]]
        assert row["runs"] == [trimmed["run"]["id"]]
        metric = checkpoint["suites"]["dusk"]["metrics"]["sk_rougeL_recall"]
        assert row["suites"]["dusk"]["utility"]["value"] == metric["value"]
        assert list(row["suites"]) == ["dusk"]
        # the same checkpoint's dusk results on the zoo's data are the main comparison's
        assert main_rows[row["fingerprint"]]["suites"]["dusk"]["run"] == original["run"]["id"]
    data = {load(runs[k])["checkpoints"]["npo"]["suites"]["dusk"]["data"]["fingerprint"] for k in ("b", "trimmed")}
    assert len(data) == 2 and all(d in " ".join(trimmed_group["differs"]["dusk"]) for d in data)
    assert "dusk" not in main["differs"]


def latest_tofu(runs) -> set:
    series = load(runs["series"])
    return {c["info"]["fingerprint"] for c in series["checkpoints"].values() if "tofu" in c["suites"]}


def test_rows_are_checkpoints_anchors_stay_apart_and_a_shared_name_is_marked(runs, site):
    board = load(site / "leaderboard.json")
    main = board["groups"][0]
    zoo = load(runs["a"])
    roles = zoo["run"]["anchors"]
    for name, role in roles.items():
        row = fingerprint_rows(main)[zoo["checkpoints"][name]["info"]["fingerprint"]]
        assert row["role"] == role and row["rank"] is None
    # one zoo checkpoint seen in four runs is one row, its runs listed
    npo = fingerprint_rows(main)[zoo["checkpoints"]["npo"]["info"]["fingerprint"]]
    assert len(npo["runs"]) == 4  # a, b, c and the old-schema run (its trimmed-data results are in another group)
    series = load(runs["series"])
    other = fingerprint_rows(main)[series["checkpoints"]["npo"]["info"]["fingerprint"]]
    assert npo["name_clash"] and other["name_clash"] and npo["checkpoint"] != other["checkpoint"]
    assert {npo["checkpoint"], other["checkpoint"]} == {
        f"npo · {zoo['checkpoints']['npo']['info']['fingerprint'][:8]}",
        f"npo · {series['checkpoints']['npo']['info']['fingerprint'][:8]}"}
    steps = sorted((r["step"], r["series"]) for r in main["rows"] if r["series"])
    assert steps == [(2, "npo-run"), (4, "npo-run"), (6, "npo-run")]


def test_the_ranking_is_the_reports_own_rule(runs, tmp_path, warm_python):
    """A site of one report ranks as the report does."""
    report = load(runs["b"])
    result = warm_python.run(["-m", "unlearnbench.cli", "site", str(runs["b"]), "-o", str(tmp_path / "one")])
    assert result.returncode == 0, result.stderr
    rows = load(tmp_path / "one" / "leaderboard.json")["groups"][0]["rows"]
    ranked = [r["checkpoint"] for r in sorted((r for r in rows if r["rank"]), key=lambda r: r["rank"])]
    assert ranked == [r["checkpoint"] for r in report["assessment"]["ranking"]["rows"]]
    verdicts = {r["checkpoint"]: r["verdict"] for r in rows}
    assert verdicts == {name: v["verdict"] for name, v in report["assessment"]["verdicts"].items()}


def pareto_front(points: dict[str, tuple[float, float]]) -> set[str]:
    front = set()
    for name, (a, b) in points.items():
        beaten = any(x >= a and y >= b and (x, y) != (a, b) for other, (x, y) in points.items() if other != name)
        if not beaten:
            front.add(name)
    return front


def test_pareto_fronts_and_csv_agree_with_the_reports(runs, site):
    board = load(site / "leaderboard.json")
    main = board["groups"][0]
    rows = main["rows"]
    for suite, ((forget, forget_up), (utility, utility_up)) in HEADLINES.items():
        points = {}
        for row in rows:
            cell = row["suites"].get(suite)
            if row["role"] or not cell or not cell.get("forget"):
                continue
            report = next(load(p) for p in runs.values() if load(p)["run"]["id"] == cell["run"])
            name = next(n for n, c in report["checkpoints"].items() if c["info"]["fingerprint"] == row["fingerprint"])
            metrics = report["checkpoints"][name]["suites"][suite]["metrics"]
            points[row["id"]] = ((1 if forget_up else -1) * metrics[forget]["value"],
                                 (1 if utility_up else -1) * metrics[utility]["value"])
        assert points, suite
        assert set(main["pareto"][suite]) == pareto_front(points), suite
    with (site / "leaderboard.csv").open() as handle:
        lines = [line for line in csv.DictReader(handle) if line["group"] == main["id"]]
    assert [line["checkpoint"] for line in lines] == [r["checkpoint"] for r in rows]
    for line, row in zip(lines, rows):
        if "dusk" in row["suites"] and row["suites"]["dusk"].get("forget"):
            assert float(line["dusk.forget.verbatim_rougeL_f1"]) == row["suites"]["dusk"]["forget"]["value"]
            assert line["dusk.pareto"] == ("" if row["role"] else str(row["id"] in main["pareto"]["dusk"]))


@pytest.mark.parametrize("viewport", VIEWPORTS)
def test_the_site_reads_sorts_filters_and_labels_its_points_in_chromium(chromium, site, viewport):
    from playwright.sync_api import sync_playwright

    board = load(site / "leaderboard.json")
    main = board["groups"][0]
    width, height = VIEWPORTS[viewport]
    shots = ROOT / "reports" / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=chromium, args=list(CHROMIUM_FLAGS))
        page = browser.new_page(viewport={"width": width, "height": height})
        errors, requests = [], []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: requests.append(r.url))
        pages = [site / "index.html", *sorted((site / "checkpoints").glob("*.html"))[:3],
                 *sorted((site / "runs").glob("*.html"))[:2]]
        for path in pages:
            page.goto(path.as_uri())
            found = layout(page)
            assert found["page_width"] <= found["viewport_width"], (path.name, found["page_width"])
            assert found["overlaps"] == [] and found["clipped"] == [], (path.name, found)
        page.goto((site / "index.html").as_uri())
        page.screenshot(path=str(shots / f"site-{viewport}.png"))
        assert page.locator("#lead").inner_text().startswith("Top row:")

        board_rows = page.locator(f"#board-{main['id']} tbody tr")
        names = lambda: board_rows.evaluate_all("rows => rows.map(r => r.dataset.id)")  # noqa: E731
        assert names() == [r["id"] for r in main["rows"]]
        # sort by the DUSK forget value (lower is better), ascending, then descending: by the JSON's values
        header = page.locator(f"#board-{main['id']} thead th", has_text="dusk forget")
        header.click()
        value = {r["id"]: (r["suites"].get("dusk") or {}).get("forget") for r in main["rows"]}
        with_value = [i for i in names() if value[i]]
        assert with_value == sorted(with_value, key=lambda i: value[i]["value"])
        assert names()[-1] not in with_value or len(with_value) == len(names())  # rows without a value last
        header.click()
        with_value = [i for i in names() if value[i]]
        assert with_value == sorted(with_value, key=lambda i: -value[i]["value"])
        # filter
        page.locator(f'input[data-table="board-{main["id"]}"]').fill("npo-run")
        shown = board_rows.evaluate_all("rows => rows.filter(r => !r.hidden).map(r => r.dataset.id)")
        assert sorted(shown) == sorted(r["id"] for r in main["rows"] if "npo-run" in r["checkpoint"])
        page.locator(f'input[data-table="board-{main["id"]}"]').fill("")
        # one point per checkpoint with both values, each with its label; a tap shows it
        for suite in HEADLINES:
            figure = page.locator(f'#{main["id"]} figure[data-plot="tradeoff-{suite}"]')
            expected = [r for r in main["rows"] if (r["suites"].get(suite) or {}).get("forget")
                        and r["suites"][suite].get("utility")]
            points = figure.locator(".pt")
            assert points.count() == len(expected), suite
            labels = points.evaluate_all("ps => ps.map(p => [p.dataset.id, p.dataset.label])")
            assert {i for i, _ in labels} == {r["id"] for r in expected}
            assert all(label.startswith(next(r["checkpoint"] for r in expected if r["id"] == i) + ":")
                       for i, label in labels)
        tofu = page.locator(f'#{main["id"]} figure[data-plot="tradeoff-tofu"]')
        assert tofu.locator("polyline.series-path").count() == 1  # the training run's steps, joined
        # a tap shows the point's label, and those of the points under it (the full model and the run's
        # first step, a copy of it, coincide)
        tofu.locator(".pt").first.click(force=True)
        shown = tofu.locator(".tip").inner_text()
        assert tofu.locator(".pt").first.get_attribute("data-label") in shown.split(" · ")
        step_2 = tofu.locator('.pt[data-id="npo-run-checkpoint-2"]')
        step_2.click(force=True)
        assert {"npo-run-checkpoint-2", "full"} <= {label.split(":")[0] for label in
                                                    tofu.locator(".tip").inner_text().split(" · ")}
        # a checkpoint page: its runs, and an item list that unpacks when opened, one row per item of the report
        row = next(r for r in main["rows"] if r["checkpoint"].startswith("npo ·") and len(r["runs"]) > 1)
        page.goto((site / "checkpoints" / f"{row['id']}.html").as_uri())
        runs_of_row = {run for group in board["groups"] for r in group["rows"] if r["id"] == row["id"]
                       for run in r["runs"]}
        assert len(runs_of_row) == len(row["runs"]) + 1  # the trimmed DUSK data's run: the other group's
        assert page.locator("h2", has_text="Run ").count() == len(runs_of_row)
        items = page.locator("details.items").first
        items.locator("summary").click()
        page.wait_for_function("d => d.querySelector('.scroll').dataset.ready === '1'", arg=items.element_handle())
        expected = int(items.locator("summary").inner_text().split()[0])  # "24 items, ..."
        assert items.locator("tr.item").count() == expected > 0
        browser.close()
    assert errors == []
    assert all(url.startswith("file://") for url in requests), [u for u in requests if not u.startswith("file")]


def test_bad_input_is_one_line_each_and_the_site_is_still_built(runs, tmp_path, warm_python):
    inputs = tmp_path / "in"
    for label in ("a", "b"):
        shutil.copytree(runs[label].parent, inputs / label)
    text = runs["c"].read_text()
    (inputs / "truncated").mkdir()
    (inputs / "truncated" / "report.json").write_text(text[: len(text) // 2])
    future = load(runs["c"]) | {"schema_version": 99}
    (inputs / "future").mkdir()
    (inputs / "future" / "report.json").write_text(json.dumps(future))
    edited = load(runs["a"])
    edited["checkpoints"]["npo"]["suites"]["tofu"]["metrics"]["model_utility"]["value"] = 0.123
    (inputs / "edited").mkdir()
    (inputs / "edited" / "report.json").write_text(json.dumps(edited))
    shutil.copytree(runs["a"].parent, inputs / "copy-of-a")

    result = warm_python.run(["-m", "unlearnbench.cli", "site", str(inputs), "-o", str(tmp_path / "site")])
    assert result.returncode == 0, result.stderr
    lines = result.stderr.strip().splitlines()
    run_a = load(runs["a"])["run"]["id"]
    truncated = [line for line in lines if "truncated/report.json" in line]
    assert len(truncated) == 1 and truncated[0].startswith(
        f"unlearnbench site: skipped {inputs / 'truncated' / 'report.json'}: invalid JSON")
    assert any("future/report.json: report schema version 99" in line for line in lines)
    assert sum(f"claims run id {run_a}" in line and "edited/report.json" in line for line in lines) == 1
    assert sum("copy-of-a" in line and "a copy of run" in line for line in lines) == 1
    board = load(tmp_path / "site" / "leaderboard.json")
    assert {r["id"] for r in board["runs"]} == {run_a, f"{run_a}~2", load(runs["b"])["run"]["id"]}
    index = (tmp_path / "site" / "index.html").read_text()
    assert "truncated/report.json" in index and "schema version 99" in index

    empty = tmp_path / "empty"
    empty.mkdir()
    result = warm_python.run(["-m", "unlearnbench.cli", "site", str(empty), "-o", str(tmp_path / "nothing")])
    assert result.returncode == 2
    assert result.stderr.strip() == f"unlearnbench: error: no report.json under {empty}: run pytest suites first " \
                                    "(its reports are written under reports/)"
    assert not (tmp_path / "nothing").exists()
