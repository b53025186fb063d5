"""MetricResult statistics and text metrics against independent computations."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from rouge_score import rouge_scorer
from scipy import stats

from unlearnbench.metrics.core import MetricResult, bootstrap_ci, mean_result
from unlearnbench.metrics.text import rouge


def test_bootstrap_ci_agrees_with_scipy_percentile_bootstrap():
    values = np.random.default_rng(3).normal(1.0, 2.0, size=60)
    low, high = bootstrap_ci(values)
    ref = stats.bootstrap((values,), np.mean, n_resamples=20000, method="percentile", random_state=1)
    assert low == pytest.approx(ref.confidence_interval.low, abs=0.05)
    assert high == pytest.approx(ref.confidence_interval.high, abs=0.05)
    assert bootstrap_ci(values) == (low, high)  # fixed seed: reproducible


def test_bootstrap_ci_degenerate_cases():
    assert bootstrap_ci([0.3]) == (0.3, 0.3)
    assert bootstrap_ci([2.0, 2.0, 2.0]) == (2.0, 2.0)
    with pytest.raises(ValueError):
        bootstrap_ci([])


def test_mean_result_is_json_round_trippable():
    result = mean_result("m", {"a": 1.0, "b": 0.0, "c": 0.5}, higher_is_better=True, params={"k": 1})
    assert result.value == 0.5 and result.n == 3
    again = MetricResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert again == result
    with pytest.raises(ValueError, match="NaN"):
        mean_result("m", {"a": float("nan")}, higher_is_better=True)


def test_rouge_hand_computed():
    # LCS("the cat sat on the mat", "the cat on the mat") = 5 words:
    # recall 5/6, precision 5/5, F1 = 2 * (5/6) / (5/6 + 1) = 10/11.
    scores = rouge("the cat sat on the mat", "the cat on the mat")
    assert scores["rougeL_recall"] == pytest.approx(5 / 6)
    assert scores["rougeL_f1"] == pytest.approx(10 / 11)
    assert scores["rouge1_recall"] == pytest.approx(5 / 6)


def test_rouge_matches_rouge_score_directly():
    scorer = rouge_scorer.RougeScorer(["rouge1", "rougeL"], use_stemmer=False)
    ref, gen = "Paris is the capital of France", "The capital city is Paris, in France"
    direct = scorer.score(ref, gen)
    ours = rouge(ref, gen)
    assert ours["rouge1_f1"] == direct["rouge1"].fmeasure and ours["rougeL_recall"] == direct["rougeL"].recall


def test_the_bench_seed_reaches_every_bootstrap(cache_dir, smoke_lm_dir):
    """--seed changes the CIs, and the same seed gives the same CIs."""
    from unlearnbench.models.checkpoint import CheckpointSpec
    from unlearnbench.session import Bench, BenchOptions

    spec = CheckpointSpec("lm", str(smoke_lm_dir))
    root = Path(__file__).resolve().parents[1]
    cis = []
    for seed in (0, 0, 1):
        bench = Bench(BenchOptions(models=[spec], cache_dir=cache_dir, device="cpu", seed=seed))
        bench.prepare_suites(["smoke"], {"smoke": root / "thresholds" / "smoke.yaml"})
        cis.append(bench.run(spec, "smoke").metrics["mean_token_logprob"].ci)
    assert cis[0] == cis[1] and cis[0] != cis[2]


@pytest.mark.parametrize("ci", ["", "true"])
def test_missing_test_inputs_skip_with_how_to_get_them_but_fail_under_ci(ci, monkeypatch):
    from tests.conftest import require

    monkeypatch.setenv("CI", ci)
    expected = pytest.fail.Exception if ci else pytest.skip.Exception
    with pytest.raises(expected, match="the thing is missing: install it"):
        require(False, "the thing", "install it")
    require(True, "the thing", "install it")  # present: nothing happens


def test_one_resampler_draws_every_set_of_a_paired_bootstrap_in_the_same_draw():
    """bootstrap_indices by hand: draw k takes one index sample per set, in
    order, from the run-seeded generator, so a paired statistic (PL's holdout,
    forget and retain chunks) resamples all its sets together."""
    from unlearnbench.metrics.core import bootstrap_indices, seeded

    with seeded(7):
        holdout, forget = bootstrap_indices([3, 5], resamples=4)
    rng = np.random.default_rng(7)
    for k in range(4):
        np.testing.assert_array_equal(holdout[k], rng.integers(0, 3, 3))
        np.testing.assert_array_equal(forget[k], rng.integers(0, 5, 5))
    assert holdout.shape == (4, 3) and forget.shape == (4, 5)


def test_no_metric_resamples_on_its_own():
    """One bootstrap implementation: every CI in the metrics goes through
    core.bootstrap_indices and core.percentile_ci (one resample count, one seed)."""
    metrics = Path(__file__).resolve().parents[1] / "unlearnbench" / "metrics"
    for module in metrics.glob("*.py"):
        if module.name == "core.py":
            continue
        source = module.read_text()
        for own in ("resampling_rng", "default_rng", "np.percentile", ".integers("):
            assert own not in source, f"{module.name} resamples on its own ({own})"


# What runs a model: the metrics must not depend on any of it.
BACKEND_MODULES = ("unlearnbench.backends", "unlearnbench.session", "unlearnbench.plugin", "unlearnbench.models.")
ALLOWED_MODEL_MODULES = ("unlearnbench.models.interface",)


def test_metrics_import_no_backend_module():
    """Issue 15: no metrics module imports a backend module anywhere in its
    code (the AST, function-level imports included), and importing every
    metrics module loads no backend module, torch or transformers (a fresh
    interpreter's sys.modules)."""
    import ast
    import subprocess
    import sys

    def is_backend(module: str) -> bool:
        return module.startswith(BACKEND_MODULES) and module not in ALLOWED_MODEL_MODULES

    metrics = Path(__file__).resolve().parents[1] / "unlearnbench" / "metrics"
    names = sorted(f"unlearnbench.metrics.{m.stem}" for m in metrics.glob("*.py") if m.stem != "__init__")
    imported = {}
    for module in sorted(metrics.glob("*.py")):
        for node in ast.walk(ast.parse(module.read_text())):
            targets = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                       [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for target in targets:
                imported.setdefault(target, f"{module.name}:{node.lineno}")
    assert "unlearnbench.models.interface" in imported or any(t.startswith("unlearnbench.metrics") for t in imported)
    direct = {t: where for t, where in imported.items() if is_backend(t) or t.split(".")[0] in ("torch", "pytest")}
    assert not direct, f"metrics import backend modules: {direct}"
    code = (f"import sys\nfor m in {names!r}: __import__(m)\n"
            "print('\\n'.join(sorted(sys.modules)))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert "unlearnbench.metrics.dusk" in loaded  # the probe imported the metrics
    leaked = [m for m in loaded if is_backend(m) or m.split(".")[0] in ("torch", "transformers", "pytest")]
    assert not leaked, f"importing the metrics loads {leaked}"
