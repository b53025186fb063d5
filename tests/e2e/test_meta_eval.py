"""Meta-evaluation (issue 16): faithfulness AUC and robustness R, Q, HM by
hand on made-up metric values; a pure-noise metric scores about 0.5 on the
zoo's labels; the command writes the table, the JSON and a page that renders
in headless Chromium with one point per metric."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

from unlearnbench import meta_eval
from unlearnbench.errors import UnlearnbenchError

LABELS = meta_eval.Labels(knows=("a", "b", "c"), never_saw=("r", "s"), retain="r")


def metric(value, higher_is_better=False):
    return {"value": value, "higher_is_better": higher_is_better}


def report_of(values: dict[str, dict[str, dict]]) -> dict:
    """{checkpoint: {suite: {metric: metric dict}}} as a report."""
    from unlearnbench.report.schema import SCHEMA, SCHEMA_VERSION

    return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, "run_id": "made-up", "checkpoints": {
        c: {"suites": {suite: {"metrics": ms} for suite, ms in suites.items()}} for c, suites in values.items()}}


def test_faithfulness_auc_by_hand():
    # knows a, b, c = 0.9, 0.4, 0.7; never_saw r, s = 0.5, 0.1. Pairs (knows > never): a>r, a>s, b>s, c>r,
    # c>s = 5 of 6, b<r: AUC 5/6.
    out = meta_eval.faithfulness({"a": 0.9, "b": 0.4, "c": 0.7, "r": 0.5, "s": 0.1, "x": 0.0}, LABELS)
    assert out["auc"] == pytest.approx(5 / 6)
    assert out["knows"] == 3 and out["never_saw"] == 2
    assert 0 <= out["ci"][0] <= 5 / 6 <= out["ci"][1] <= 1
    # A higher-is-better metric is negated first: the same values then rank the other way.
    report = report_of({c: {"s1": {"kept": metric(v, higher_is_better=True)}}
                        for c, v in {"a": 0.9, "b": 0.4, "c": 0.7, "r": 0.5, "s": 0.1}.items()})
    [row] = meta_eval.meta_evaluate(report, LABELS)["metrics"]
    assert row["faithfulness"]["auc"] == pytest.approx(1 / 6)


def test_relearning_and_quantization_robustness_by_hand():
    # ufk (higher = more knowledge). retain r: before 0.1, after relearning 0.3 -> Δ_r = -0.2.
    # u1: before 0.2, relearn 0.6 (Δ = -0.4 -> R = 0.5), quant4 0.1 (Q = 0.5).
    # u2: before 0.5, relearn 0.6 (Δ = -0.1 -> R = min(2, 1) = 1), quant4 0.9 (Q = min(1.8, 1) = 1).
    def probe(before, relearn, quant4):
        return {"ufk_before": metric(before), "ufk_after_relearn": metric(relearn),
                "ufk_after_quant4": metric(quant4)}

    rob = meta_eval.robustness({"r": probe(0.1, 0.3, 0.1), "u1": probe(0.2, 0.6, 0.1), "u2": probe(0.5, 0.6, 0.9)},
                               "ufk", LABELS)
    assert rob["R_per_checkpoint"] == pytest.approx({"u1": 0.5, "u2": 1.0})
    assert rob["Q_per_checkpoint"] == pytest.approx({"u1": 0.5, "u2": 1.0})
    assert rob["R"] == pytest.approx(0.75) and rob["Q"] == pytest.approx(0.75)
    assert rob["HM"] == pytest.approx(2 * 0.75 * 0.75 / 1.5)
    # UDS enters as 1 - UDS: before 0.8 (m = 0.2), after quant4 0.9 (m = 0.1): Q = 0.5.
    uds = {"r": {"uds_before": metric(1.0, True), "uds_after_relearn": metric(0.9, True),
                 "uds_after_quant4": metric(1.0, True)},
           "u": {"uds_before": metric(0.8, True), "uds_after_relearn": metric(0.6, True),
                 "uds_after_quant4": metric(0.9, True)}}
    rob = meta_eval.robustness(uds, "uds", LABELS)
    # Δ_r = 0 - 0.1 = -0.1, Δ_u = 0.2 - 0.4 = -0.2: R = 0.5.
    assert rob["Q_per_checkpoint"] == pytest.approx({"u": 0.5}) and rob["R_per_checkpoint"] == pytest.approx({"u": 0.5})


@pytest.mark.slow  # meta-evaluation over the whole zoo
def test_a_pure_noise_metric_scores_about_one_half_on_the_zoo_labels():
    """Noise drawn afresh for each of many runs over the zoo's labelled
    checkpoints: its faithfulness AUC averages 0.5; a metric that follows the
    labels scores 1."""
    labels = meta_eval.Labels.load(None)
    rng = np.random.default_rng(0)
    checkpoints = [*labels.knows, *labels.never_saw]
    aucs = [meta_eval.faithfulness(dict(zip(checkpoints, rng.normal(size=len(checkpoints)))), labels)["auc"]
            for _ in range(2000)]
    assert np.mean(aucs) == pytest.approx(0.5, abs=0.02)
    informative = {c: (1.0 if c in labels.knows else 0.0) + 0.01 * i for i, c in enumerate(checkpoints)}
    assert meta_eval.faithfulness(informative, labels)["auc"] == 1.0


@pytest.mark.parametrize("text,problem", [
    ("knows: [a]\n", "non-empty lists 'knows' and 'never_saw'"),
    ("knows: [a, b]\nnever_saw: [b]\n", "b is labelled both ways"),
    ("[unclosed", "cannot read it"),
])
def test_bad_labels_are_one_message_naming_the_file(tmp_path, text, problem):
    path = tmp_path / "labels.yaml"
    path.write_text(text)
    with pytest.raises(UnlearnbenchError, match=f"labels {path}.*{problem}"):
        meta_eval.Labels.load(path)


def test_the_command_prints_the_table_and_writes_a_page_chromium_renders(tmp_path):
    values = {"a": 0.9, "b": 0.4, "c": 0.7, "r": 0.5, "s": 0.1}
    robustness = {c: {"ufk_before": metric(v), "ufk_after_relearn": metric(v + 0.1),
                      "ufk_after_quant4": metric(v)} for c, v in values.items()}
    report = report_of({c: {"dusk": {"ufk_rougeL_recall": metric(v)}, "robustness": robustness[c]}
                        for c, v in values.items()})
    (tmp_path / "report.json").write_text(json.dumps(report))
    (tmp_path / "labels.yaml").write_text("knows: [a, b, c]\nnever_saw: [r, s]\nretain: r\n")
    run = subprocess.run([sys.executable, "-m", "unlearnbench.cli", "meta-eval", "--report",
                          str(tmp_path / "report.json"), "--labels", str(tmp_path / "labels.yaml"), "-o",
                          str(tmp_path / "out")], capture_output=True, text=True, check=True)
    assert "dusk.ufk_rougeL_recall" in run.stdout and "0.833" in run.stdout
    written = json.loads((tmp_path / "out" / "meta_eval.json").read_text())
    assert {row["metric"] for row in written["metrics"]} == {"ufk_rougeL_recall", "ufk_before"}
    assert "HM(R, Q)" in written["convention"]

    if shutil.which("chromium") is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=["--no-sandbox"])
        page = browser.new_page()
        page.goto((tmp_path / "out" / "meta_eval.html").as_uri())
        assert page.locator("#meta-eval tr").count() == 1 + 2
        assert page.locator('figure.plot[data-plot="faithfulness-robustness"] circle').count() == 1
        browser.close()


def test_one_checkpoint_per_label_gives_no_ci_and_says_why():
    one = meta_eval.Labels(knows=("a", "b"), never_saw=("r",), retain="r")
    out = meta_eval.faithfulness({"a": 0.9, "b": 0.4, "r": 0.5}, one)
    assert out["auc"] == pytest.approx(0.5) and out["ci"] is None
    assert "at least 2 per label" in out["ci_note"]
    report = report_of({c: {"dusk": {"ufk_rougeL_recall": metric(v)}} for c, v in {"a": 0.9, "b": 0.4, "r": 0.5}.items()})
    assert "(no CI: 2/1)" in meta_eval.table(meta_eval.meta_evaluate(report, one))


def test_negative_r_has_no_harmonic_mean_and_the_note_says_why():
    def probe(before, relearn, quant):
        return {"ufk_before": metric(before), "ufk_after_relearn": metric(relearn), "ufk_after_quant4": metric(quant)}

    # retain: relearning raises ufk (0.1 -> 0.3, Δ = -0.2); u1 drops it (0.6 -> 0.2, Δ = 0.4): R = -0.5
    rob = meta_eval.robustness({"r": probe(0.1, 0.3, 0.1), "u1": probe(0.6, 0.2, 0.6)}, "ufk", LABELS)
    assert rob["R"] == pytest.approx(-0.5) and rob["Q"] == pytest.approx(1.0)
    assert rob["HM"] is None and "R = -0.5 <= 0" in rob["hm_note"]  # 2RQ/(R+Q) would be -2: not a rate


def test_utility_metrics_are_not_scored_and_rows_are_sorted_best_first():
    values = {"a": 0.9, "b": 0.4, "c": 0.7, "r": 0.5, "s": 0.1}
    report = report_of({c: {"dusk": {"ufk_rougeL_recall": metric(v), "verbatim_rougeL_f1": metric(1 - v),
                                     "sk_rougeL_recall": metric(v, higher_is_better=True)}} for c, v in values.items()})
    result = meta_eval.meta_evaluate(report, LABELS)
    assert [r["metric"] for r in result["metrics"]] == ["ufk_rougeL_recall", "verbatim_rougeL_f1"]  # 5/6, then 1/6
    assert result["not_scored"] == ["dusk.sk_rougeL_recall"]
