"""Reports and sweeps: HTML page, report.md and flat results, merge,
baselines, --model-dir, reruns reusing cached reference work. (Verdicts and
ranking: test_verdicts.py.)"""

from __future__ import annotations

import base64
import copy
import gzip
import json
import shutil
from pathlib import Path

import pytest

from unlearnbench.errors import CheckpointError, UnlearnbenchError
from unlearnbench.models.checkpoint import discover
from unlearnbench.report import baseline, html, merge
from unlearnbench.report.schema import new_report, write_outputs

ROOT = Path(__file__).resolve().parents[2]


def verdict(outcome, value, bound, direction="at_least", metric="m", relative_to=None):
    return {"check": "c", "outcome": outcome, "value": value, "bound": bound, "direction": direction,
            "metric": metric, "relative_to": relative_to, "margin": 0.0, "strict_ci": False, "reason": "",
            "ci": [value, value] if value is not None else None}


def synthetic(checkpoints: dict[str, dict[str, dict]], fingerprint="data-1") -> dict:
    """A report with {name: {check: verdict}} in suite "s"; per-item values for metric m."""
    report = new_report({"id": "run-x"})
    for name, checks in checkpoints.items():
        report["checkpoints"][name] = {"info": {}, "suites": {"s": {
            "data": {"fingerprint": fingerprint},
            "metrics": {"m": {"name": "m", "value": 0.5, "n": 2, "ci": [0.4, 0.6], "higher_is_better": True,
                              "params": {}, "per_item": {"i1": 0.9, "i2": 0.1},
                              "details": {"items": {"i1": {"generation": "fine"},
                                                    "i2": {"generation": "<script>alert(1)</script>"}}}}},
            "checks": checks, "timings": {}}}}
        for v in checks.values():
            report["summary"][{"pass": "passed", "fail": "failed", "skip": "skipped"}[v["outcome"]]] += 1
    return report


# --------------------------------------------------------------------- html
def item_tables(page: str, checkpoint: str) -> list[str]:
    """A checkpoint's item tables as the page carries them: base64 of a gzipped JSON list, in its drill-down."""
    marker = '<script type="application/octet-stream" class="item-tables">'
    start = page.index(marker, page.index(f'<details class="cp" id="cp-{checkpoint}">')) + len(marker)
    packed = page[start:page.index("</script>", start)]
    return json.loads(gzip.decompress(base64.b64decode(packed)))


def test_html_is_self_contained_escaped_and_marks_failing_items():
    report = synthetic({"good": {"c1": verdict("pass", 0.6, 0.5)},
                        "bad": {"c1": verdict("fail", 0.3, 0.5, metric="m")}})
    page = html.render(report)
    assert page == html.render(report)  # the same report, the same bytes
    [table] = item_tables(page, "bad")
    assert "<script>alert(1)</script>" not in page + table and "&lt;script&gt;alert(1)&lt;/script&gt;" in table
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in page and "<link" not in page and "src=" not in page
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in page
    matrix = page[page.index('id="summary-matrix"'):]
    assert matrix.index("<th>good</th>") < matrix.index("<th>bad</th>")  # the ranking's order: the passing one first
    assert 'href="#c-bad-s-c1"' in matrix and 'id="c-bad-s-c1"' in page  # a cell links to its check
    bad_check = page[page.index('id="c-bad-s-c1"'):]
    assert '<details class="items" data-table="0"><summary>2 items, 1 on the failing side of the bound' in bad_check
    assert '<tr class="item bad"><td>i2</td>' in table  # 0.1 < 0.5: on the failing side of the bound
    assert '<tr class="item"><td>i1</td>' in table
    assert "must be</dt><dd>&gt;= 0.5" not in bad_check and "≥ 0.5" in bad_check  # the bound with its direction


def test_not_run_is_a_dash_and_rows_follow_one_order():
    report = synthetic({"a": {"c1": verdict("fail", 0.3, 0.5)}, "b": {"c1": verdict("pass", 0.6, 0.5),
                                                                       "c2": verdict("pass", 0.6, 0.5)}})
    page = html.render(report)
    matrix = page[page.index('id="summary-matrix"'):page.index("</table>", page.index('id="summary-matrix"'))]
    assert matrix.count('title="not run">—</td>') == 1  # a.c2
    verdicts = page[page.index('id="verdicts"'):]
    assert verdicts.index('href="#cp-b"') < verdicts.index('href="#cp-a"')


def test_report_md_and_flat_results(tmp_path, monkeypatch):
    import pandas as pd

    report = synthetic({"good": {"c1": verdict("pass", 0.6, 0.5)},
                        "bad": {"c1": verdict("fail", 0.3, 0.5, metric="m")}})
    summary = tmp_path / "step-summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    files = write_outputs(report, tmp_path / "run")
    assert list(json.loads(files.json.read_text()))[:4] == ["schema", "schema_version", "assessment", "run"]
    md = files.markdown.read_text()
    assert "| good | **PASS** | s 1/1 |" in md and "| bad | **FAIL** | s 0/1 |" in md
    assert "| bad | `s.c1` | 0.3 (n=2) | >= 0.5 |" in md
    assert summary.read_text() == "earlier step\n" + md  # appended, not replaced
    table = pd.read_csv(files.csv)
    assert len(table) == 2 and set(table["checkpoint"]) == {"good", "bad"}
    row = table[table["checkpoint"] == "bad"].iloc[0]
    assert (row["metric"], row["value"], row["ci_low"], row["ci_high"], row["n"], row["bound"], row["outcome"],
            row["checkpoint_verdict"]) == ("m", 0.5, 0.4, 0.6, 2, 0.5, "fail", "fail")
    assert row["ci_half_width"] == pytest.approx(0.1)
    assert pd.read_json(files.jsonl, lines=True).equals(pd.read_json(files.jsonl, lines=True)) and \
        len(pd.read_json(files.jsonl, lines=True)) == 2


# -------------------------------------------------------------------- merge
def test_html_says_a_run_was_interrupted_at_the_top():
    report = synthetic({"a": {"c1": verdict("pass", 0.6, 0.5)}})
    assert "Interrupted" not in html.render(report)
    report["run"]["interrupted"] = True
    page = html.render(report)
    banner = page.index('class="interrupted"')
    assert banner < page.index('id="verdict-banner"')
    assert "Interrupted (Ctrl-C)" in page[banner:page.index('id="verdict-banner"')]


def typed(pairs):
    """(label, report dict) pairs as `unlearnbench merge` reads them: typed, upgraded and checked."""
    from unlearnbench.report.model import Report

    return [(label, Report.of(report, label)) for label, report in pairs]


def test_merge_combines_disjoint_runs_and_refuses_incompatible_ones():
    a = synthetic({"a": {"c1": verdict("pass", 0.6, 0.5)}})
    b = synthetic({"b": {"c1": verdict("fail", 0.3, 0.5)}})
    merged = merge.merge_reports(typed([("A.json", a), ("B.json", b)]))
    assert set(merged["checkpoints"]) == {"a", "b"}
    assert merged["summary"]["passed"] == 1 and merged["summary"]["failed"] == 1
    assert [m["file"] for m in merged["merged_from"]] == ["A.json", "B.json"]

    other_bound = synthetic({"b": {"c1": verdict("fail", 0.3, 0.7)}})
    with pytest.raises(ValueError, match=r"check s.c1 differs between A.json and B.json.*--force"):
        merge.merge_reports(typed([("A.json", a), ("B.json", other_bound)]))
    forced = merge.merge_reports(typed([("A.json", a), ("B.json", other_bound)]), force=True)
    assert "differs" in forced["merge_warnings"][0]
    other_data = synthetic({"b": {"c1": verdict("fail", 0.3, 0.5)}}, fingerprint="data-2")
    with pytest.raises(ValueError, match="s data fingerprint differs"):
        merge.merge_reports(typed([("A.json", a), ("B.json", other_data)]))
    with pytest.raises(ValueError, match="checkpoint a is in both A.json and C.json"):
        merge.merge_reports(typed([("A.json", a), ("C.json", copy.deepcopy(a))]), force=True)


def test_merge_keeps_each_runs_regressions_and_non_finite_notes():
    a = synthetic({"a": {"c": verdict("pass", 0.6, 0.5)}})
    b = synthetic({"b": {"c": verdict("fail", 0.3, 0.5)}})
    a["regressions"] = [{"checkpoint": "a", "suite": "s", "metric": "m", "value": 0.2, "baseline": 0.6}]
    b["regressions"] = [{"checkpoint": "b", "suite": "s", "metric": "m", "value": 0.1, "baseline": 0.5}]
    b["non_finite"] = [{"path": "checkpoints.b.suites.s.metrics.m.value", "was": "nan"}]
    merged = merge.merge_reports(typed([("A.json", a), ("B.json", b)]))
    assert [r["checkpoint"] for r in merged["regressions"]] == ["a", "b"]
    assert merged["non_finite"] == b["non_finite"]
    assert set(merge.merge_reports(typed([("A.json", a)]))["checkpoints"]) == {"a"}  # one shard's report is a sweep too


def test_merge_cli_writes_json_and_html(tmp_path, capsys):
    from unlearnbench.cli import main

    for name, ckpt in (("a", "x"), ("b", "y")):
        (tmp_path / f"{name}.json").write_text(json.dumps(synthetic({ckpt: {"c1": verdict("pass", 0.6, 0.5)}})))
    assert main(["merge", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "-o", str(tmp_path / "out")]) == 0
    [run_dir] = [p for p in (tmp_path / "out").iterdir() if p.is_dir() and p.name != "latest"]
    assert (run_dir / "report.html").is_file() and (tmp_path / "out" / "latest").resolve() == run_dir.resolve()
    assert set(json.loads((run_dir / "report.json").read_text())["checkpoints"]) == {"x", "y"}
    (tmp_path / "broken.json").write_text("{")
    assert main(["merge", str(tmp_path / "a.json"), str(tmp_path / "broken.json"), "-o", str(tmp_path)]) == 2
    assert "broken.json: invalid JSON" in capsys.readouterr().err


# ---------------------------------------------------------------- baselines
def test_regression_rules_and_comparisons():
    assert baseline.RegressionRule.parse("dusk.ufk_rougeL_recall:0.02") == baseline.RegressionRule(
        "dusk", "ufk_rougeL_recall", 0.02)
    assert baseline.RegressionRule.parse("uds:0.1").suite is None
    for bad in ("uds", "uds:-1", ":0.1", "uds:x"):
        with pytest.raises(UnlearnbenchError, match="--fail-on-regression"):
            baseline.RegressionRule.parse(bad)
    current = {"up": {"value": 0.70, "higher_is_better": True}, "down": {"value": 0.30, "higher_is_better": False}}
    base = {"up": {"value": 0.75}, "down": {"value": 0.20}}
    rules = [baseline.RegressionRule(None, "up", 0.1), baseline.RegressionRule("s", "down", 0.05),
             baseline.RegressionRule("other", "up", 0.0)]
    rows = {r["metric"]: r for r in baseline.regressions(current, base, "s", rules)}
    assert rows["up"]["worse_by"] == pytest.approx(0.05) and not rows["up"]["regressed"]
    assert rows["down"]["worse_by"] == pytest.approx(0.10) and rows["down"]["regressed"]
    report = synthetic({"a": {}, "b": {}})
    assert baseline.baseline_checkpoint(report, "a", "B") is report["checkpoints"]["a"]
    with pytest.raises(UnlearnbenchError, match="no checkpoint named 'z'"):
        baseline.baseline_checkpoint(report, "z", "B")
    single = synthetic({"released": {}})
    assert baseline.baseline_checkpoint(single, "candidate", "B") is single["checkpoints"]["released"]



def test_regressions_of_metrics_with_an_ideal_value_are_distances_to_it():
    """PL's ideal is 0 and the membership AUC's is the retain model's: moving
    towards the ideal is never a regression, whichever side it crosses to."""
    rules = [baseline.RegressionRule(None, "privacy_leakage", 5), baseline.RegressionRule(None, "auc", 0.1)]
    pl = {"higher_is_better": False, "ideal": 0.0}
    auc = {"higher_is_better": True, "ideal": "retain"}
    retain = {"retain": {"auc": {"value": 0.5}}}

    def rows(pl_now, pl_base, auc_now, auc_base, references=retain):
        current = {"privacy_leakage": pl | {"value": pl_now}, "auc": auc | {"value": auc_now}}
        base = {"privacy_leakage": {"value": pl_base}, "auc": {"value": auc_base}}
        return {r["metric"]: r for r in baseline.regressions(current, base, "dusk", rules, references)}

    better = rows(pl_now=2.0, pl_base=-40.0, auc_now=0.45, auc_base=0.9)
    assert better["privacy_leakage"]["worse_by"] == pytest.approx(2 - 40) and not better["privacy_leakage"]["regressed"]
    assert better["auc"]["worse_by"] == pytest.approx(0.05 - 0.4) and not better["auc"]["regressed"]
    assert better["auc"]["ideal"] == 0.5
    worse = rows(pl_now=-9.0, pl_base=2.0, auc_now=0.8, auc_base=0.55)
    assert worse["privacy_leakage"]["worse_by"] == pytest.approx(9 - 2) and worse["privacy_leakage"]["regressed"]
    assert worse["auc"]["worse_by"] == pytest.approx(0.3 - 0.05) and worse["auc"]["regressed"]
    unresolved = rows(pl_now=-9.0, pl_base=2.0, auc_now=0.8, auc_base=0.55, references={})
    assert not unresolved["auc"]["regressed"] and "retain" in unresolved["auc"]["reason"]


# ------------------------------------------------------------------ sweeps
def test_model_dir_finds_every_checkpoint(tmp_path, smoke_lm_dir):
    shutil.copytree(smoke_lm_dir, tmp_path / "runs" / "ga" / "step500")
    shutil.copytree(smoke_lm_dir, tmp_path / "runs" / "npo")
    (tmp_path / "runs" / "q.gguf").write_bytes(b"GGUF")
    (tmp_path / "runs" / "notes").mkdir()
    specs = discover(tmp_path / "runs")
    assert [s.name for s in specs] == ["ga-step500", "npo", "q"]
    assert specs[1].source == str(tmp_path / "runs" / "npo")
    with pytest.raises(CheckpointError, match="no checkpoint"):
        discover(tmp_path / "runs" / "notes")


@pytest.fixture
def project(warm_pytester):
    shutil.copytree(ROOT / "suites" / "smoke", warm_pytester.path / "suites" / "smoke")
    shutil.copytree(ROOT / "suites" / "uds", warm_pytester.path / "suites" / "uds")
    shutil.copytree(ROOT / "thresholds", warm_pytester.path / "thresholds")
    return warm_pytester


def latest_report(project) -> dict:
    return json.loads((project.path / "reports" / "latest" / "report.json").read_text())


def test_model_dir_sweep_html_latest_and_baseline_regressions(project, cache_dir, smoke_lm_dir,
                                                              smoke_untrained_dir, tmp_path):
    runs = tmp_path / "runs"
    shutil.copytree(smoke_lm_dir, runs / "lm")
    shutil.copytree(smoke_untrained_dir, runs / "untrained")
    common = ["suites/smoke", "--cache-dir", str(cache_dir), "--model-dir", str(runs),
              "--report-dir", str(project.path / "reports")]
    first = project.runpytest_subprocess(*common)
    first.assert_outcomes(passed=2, failed=2, skipped=2)  # no --baseline: regression tests deselected
    report = latest_report(project)
    assert set(report["checkpoints"]) == {"lm", "untrained"}
    assert [r["checkpoint"] for r in report["assessment"]["ranking"]["rows"]] == ["lm", "untrained"]
    first.stdout.fnmatch_lines(["*unlearnbench verdicts*", "lm *PASS*", "untrained *FAIL*", "*1*lm*PASS*",
                                "report: *report.json", "HTML report: *report.html*"])
    assert first.stdout.lines[-1].startswith("also in ")  # the report paths are the last lines
    first.stdout.fnmatch_lines(["*answers_reference_questions*0 [[]0, 0.39] (n=6)*>= 0.5*"])  # value, n, bound in the table
    assert (project.path / "reports" / "latest" / "report.html").is_file()

    saved = tmp_path / "baseline.json"
    shutil.copy(project.path / "reports" / "latest" / "report.json", saved)
    same = project.runpytest_subprocess(*common, "--baseline", str(saved),
                                        "--fail-on-regression", "qa_rougeL_recall:0.0")
    same.assert_outcomes(passed=4, failed=2, skipped=2)  # + 2 regression tests, both passing

    better = json.loads(saved.read_text())
    better["checkpoints"]["lm"]["suites"]["smoke"]["metrics"]["qa_rougeL_recall"]["value"] += 0.3
    saved.write_text(json.dumps(better))
    worse = project.runpytest_subprocess(*common, "--baseline", str(saved),
                                         "--fail-on-regression", "smoke.qa_rougeL_recall:0.1")
    worse.assert_outcomes(passed=3, failed=3, skipped=2)
    worse.stdout.fnmatch_lines(["*test_no_regression*lm*", "REGRESSION lm smoke.qa_rougeL_recall*"])
    [row] = latest_report(project)["regressions"]
    assert row["checkpoint"] == "lm" and row["worse_by"] == pytest.approx(0.3)

    usage = project.runpytest_subprocess(*common, "--fail-on-regression", "qa_rougeL_recall:0.1")
    assert usage.ret == 4 and "needs --baseline" in usage.stderr.str()
    (tmp_path / "bad.json").write_text("[]")
    bad = project.runpytest_subprocess(*common, "--baseline", str(tmp_path / "bad.json"),
                                       "--fail-on-regression", "qa_rougeL_recall:0.1")
    assert bad.ret == 4 and "not an unlearnbench report" in bad.stderr.str()


def test_interrupted_sweep_rerun_reuses_every_reference_computation(project, zoo_family, tmp_path):
    """A sweep stopped after its first checkpoint, then rerun whole: the rerun
    finds all reference work (UDS stage 1, full x retain) in the cache."""
    cache = tmp_path / "cache"
    shutil.copytree(Path(zoo_family["full"]).parents[1], cache)  # the built zoo, an empty results cache
    shutil.rmtree(cache / "results", ignore_errors=True)
    reports = ["--report-dir", str(project.path / "reports")]
    first = project.runpytest_subprocess("suites/uds", "--cache-dir", str(cache), "-k", "retain", *reports)
    first.assert_outcomes(passed=1)
    assert latest_report(project)["run"]["cache"]["misses"] >= 1
    rerun = project.runpytest_subprocess("suites/uds", "--cache-dir", str(cache), *reports)
    assert rerun.ret == 1  # full, npo and idknll fail the gate
    report = latest_report(project)
    # Computed now: only the nine family checkpoints the first run did not
    # reach; UDS stage 1 and the retain checkpoint's results are read back.
    assert report["run"]["cache"]["misses"] == 9 and report["run"]["cache"]["hits"] >= 2
    from_cache = {n for n, c in report["checkpoints"].items() if c["suites"]["uds"]["timings"]["from_cache"]}
    assert from_cache == {"retain"}


def test_xdist_workers_share_the_cpu_cores(monkeypatch):
    import os

    import torch

    from unlearnbench.models.device import resolve_device

    before = torch.get_num_threads()
    try:
        monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
        assert resolve_device("cpu").type == "cpu"
        assert torch.get_num_threads() == max(1, (os.cpu_count() or 1) // 2)
    finally:
        torch.set_num_threads(before)


def test_report_command_filters_and_version(tmp_path, capsys):
    from unlearnbench import cli

    report = synthetic({"good": {"c1": verdict("pass", 0.6, 0.5)}, "bad": {"c1": verdict("fail", 0.3, 0.5)}})
    files = write_outputs(report, tmp_path / "run")
    assert cli.main(["report", str(files.json)]) == 1
    out = capsys.readouterr().out
    assert out.index("good ") < out.index("bad ") and "Candidates are ranked on the 1 checks" in out
    assert cli.main(["report", str(files.json), "--failed"]) == 1
    out = capsys.readouterr().out
    assert "bad: FAIL" in out and "good:" not in out and "s.c1" in out and "0.3 (n=2)" in out
    assert cli.main(["report", str(files.json), "--checkpoint", "good", "--all"]) == 1
    out = capsys.readouterr().out
    assert "PASS  s.c1" in out and "bad:" not in out
    assert cli.main(["report", str(files.json), "--suite", "nope"]) == 2
    assert "no suite nope (it has: s)" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out.startswith("unlearnbench ")


def test_console_shows_progress_under_default_capture_and_ends_with_the_answer(project, smoke_lm_dir,
                                                                               smoke_untrained_dir, tmp_path):
    """`pytest suites/smoke` with pytest's default output capture, computing
    afresh (a new cache): one progress line per step on the terminal's stderr,
    none replayed inside a failure block, no warnings summary, and the
    verdicts, ranking and report paths as the last lines."""
    result = project.runpytest_subprocess(
        "suites/smoke", "--cache-dir", str(tmp_path / "fresh-cache"), "--report-dir", str(project.path / "reports"),
        "--model", f"lm={smoke_lm_dir}", "--model", f"untrained={smoke_untrained_dir}")
    assert result.ret == 1
    result.stderr.fnmatch_lines(["[[]unlearnbench[]] loading lm on cpu: * s", "[[]unlearnbench[]] lm: smoke suite: * s",
                                 "[[]unlearnbench[]] loading untrained on cpu: * s"])
    assert not any(line.endswith(" ...") for line in result.stderr.lines)  # one line per step, not two
    out = result.stdout.str()
    assert "Captured stderr" not in out and "warnings summary" not in out
    tail = result.stdout.lines[result.stdout.lines.index(next(l for l in result.stdout.lines
                                                                if "unlearnbench verdicts" in l)):]
    assert tail[1].startswith("lm ") and "PASS" in tail[1] and tail[2].startswith("untrained ") and "FAIL" in tail[2]
    assert [line.split(":")[0] for line in tail[-3:]] == ["report", "HTML report", "also in " + str(
        Path(tail[-3].split(": ", 1)[1]).parent)]


def test_an_unwritable_step_summary_costs_one_line_not_the_report(tmp_path, monkeypatch, capsys):
    report = synthetic({"a": {"c1": verdict("pass", 0.6, 0.5)}})
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path))  # a folder: cannot be appended to
    files = write_outputs(report, tmp_path / "run")
    assert files.markdown.is_file() and files.html.is_file()
    assert capsys.readouterr().err.startswith(f"unlearnbench: GITHUB_STEP_SUMMARY {tmp_path}: ")
