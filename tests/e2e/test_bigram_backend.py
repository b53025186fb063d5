"""Issue 27: a backend that implements exactly the model protocol, written
from scratch without torch (tests/bigram_backend.py) and registered through
the `unlearnbench.backends` entry point as a third-party package would be,
runs every suite that does not need weights end to end (WMDP too, issue 28); the two that do
(UDS patches activations, robustness attacks weights) are unavailable with
the reason, and the gates still separate the bigram model trained on the
forget data from the one that never saw it."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import fresh_cache

ROOT = Path(__file__).resolve().parents[2]
WEIGHT_FREE = ("honesty", "conceptguard", "dusk", "tofu", "muse", "wmdp", "elicitation")
# What the zoo's data has nothing for: no first-turn refusal to follow up, no MMLU neighbour subject.
NOTHING_TO_MEASURE = {"followup_consistency", "mmlu_college_biology", "mmlu_virology",
                      "mmlu_college_computer_science", "mmlu_computer_security", "forget_cross_lingual",
                      "forget_adversarial", "neighbour_cross_lingual", "neighbour_adversarial",
                      # the zoo asks its elicitation neighbours four ways only (canonical, paraphrase, cloze, choice)
                      *(f"neighbour_{family}" for family in ("verify", "reverse", "one_hop", "few_shot", "reminder",
                                                             "role_play"))}


@pytest.fixture(scope="module")
def bigram_env(tmp_path_factory) -> dict:
    """PYTHONPATH with tests/ (the backend's module) and a dist-info folder
    declaring its entry point: what `pip install` of a backend package leaves."""
    site = tmp_path_factory.mktemp("site")
    info = site / "ub_bigram-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ub-bigram\nVersion: 0\n")
    (info / "entry_points.txt").write_text("[unlearnbench.backends]\nbigram = bigram_backend:BACKEND\n")
    path = os.pathsep.join([str(site), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path}


def run(python, env: dict, tmp: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    reports = tmp / "reports"
    result = python.run(["-m", "pytest", *args, "-q", "-p", "no:cacheprovider", "--no-progress",
                         "--cache-dir", str(fresh_cache(tmp / "cache")), "--report-dir", str(reports)],
                        cwd=ROOT, env=env, timeout=900)
    report = reports / "latest" / "report.json"
    assert report.exists(), result.stdout[-3000:] + result.stderr[-3000:]
    return result, json.loads(report.read_text())


def test_weight_free_suites_run_on_a_protocol_only_backend(bigram_env, tmp_path, cache_dir, warm_python):
    from unlearnbench.fixtures import zoo

    data = zoo.data_dir(cache_dir)
    result, report = run(warm_python, bigram_env, tmp_path, *(f"suites/{s}" for s in (*WEIGHT_FREE, "uds", "robustness")),
                         "--model", "full=bigram:full", "--model", "retain=bigram:retain",
                         "--full-model", "bigram:full", "--retain-model", "bigram:retain", "--data-dir", str(data))
    assert result.returncode == 1, result.stdout[-3000:]  # checks fail; nothing errors
    assert "error" not in result.stdout.splitlines()[-1]
    for name in ("full", "retain"):
        assert report["checkpoints"][name]["info"]["backend"] == "bigram"  # its own describe()
        suites = report["checkpoints"][name]["suites"]
        for suite in WEIGHT_FREE:
            metrics = suites[suite]["metrics"]
            missing = {m: v["unavailable"] for m, v in metrics.items() if v.get("value") is None}
            assert set(missing) <= NOTHING_TO_MEASURE, (name, suite, missing)
            assert all(c["outcome"] != "error" for c in suites[suite]["checks"].values())
        # Generation and teacher-forced scoring both ran: DUSK verbatim and QA, TOFU ROUGE and probability.
        assert suites["dusk"]["metrics"]["verbatim_rougeL_f1"]["value"] > 0
        assert {"ufk_rougeL_recall", "sk_rougeL_recall"} <= set(suites["dusk"]["metrics"])
        assert 0 < suites["tofu"]["metrics"]["forget_prob"]["value"] < 1
        assert "forget_rouge" in suites["tofu"]["metrics"]
        uds = suites["uds"]["checks"]["knowledge_erased_in_depth"]
        assert uds["outcome"] == "skip" and "activation patching" in uds["reason"]
        for check in suites["robustness"]["checks"].values():
            # On the retain model itself, a check relative to it is n/a before any capability is asked for.
            reasons = ("does not hold in this process",) + (("n/a (reference)",) if name == "retain" else ())
            assert check["outcome"] == "skip" and any(r in check["reason"] for r in reasons), check["reason"]
    # The gate separates the model that saw the forget data from the one that never did. These three metrics
    # measure a checkpoint against the retain model: on the retain model itself they are n/a, not a pass.
    # The full model's MUSE PrivLeak is -100 in every resample (its forget and holdout texts separate
    # perfectly): an interval of zero width decides nothing, and it leans fail.
    for suite, check in (("tofu", "forget_quality_like_retain"), ("dusk", "privacy_leakage_near_zero"),
                         ("muse", "privleak_near_zero")):
        verdicts = {n: report["checkpoints"][n]["suites"][suite]["checks"][check] for n in ("full", "retain")}
        full = "fail" if suite != "muse" else "inconclusive"
        assert {n: v["outcome"] for n, v in verdicts.items()} == {"full": full, "retain": "skip"}, (suite, check)
        assert verdicts["retain"]["reason"].startswith("n/a (reference)")
        assert verdicts["full"]["outcome"] == "fail" or (verdicts["full"]["lean"] == "fail"
                                                         and "zero width" in verdicts["full"]["reason"])
        assert report["checkpoints"]["retain"]["suites"][suite]["checks"][check]["reason"].startswith("n/a (reference)")
    # WMDP: the bigram full model is near chance on every subset (its distractors are facts it learned, as
    # WMDP's are plausible answers), so no forget check fails; on bio it is at chance: nothing to forget.
    for check in ("bio_forgotten", "cyber_forgotten", "chem_forgotten"):
        assert {report["checkpoints"][n]["suites"]["wmdp"]["checks"][check]["outcome"] for n in ("full", "retain")} \
            <= {"inconclusive", "pass"}, check
    bio = report["checkpoints"]["retain"]["suites"]["wmdp"]["checks"]["bio_forgotten"]
    assert "it holds nothing to forget" in bio["reason"], bio["reason"]


def test_smoke_runs_on_it_too(bigram_env, tmp_path, warm_python):
    result, report = run(warm_python, bigram_env, tmp_path, "suites/smoke", "--model", "lm=bigram:smoke")
    metrics = report["checkpoints"]["lm"]["suites"]["smoke"]["metrics"]
    assert metrics["mean_token_logprob"]["value"] < 0 and metrics["qa_rougeL_recall"]["n"] == 6
    assert result.returncode in (0, 1), result.stdout[-3000:]
