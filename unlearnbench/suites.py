"""The registry of suites: what each computes and where its code lives.

Loaders and evaluators are named as "module:function" strings and imported on
first use, so importing the registry (the plugin does) costs nothing.

Other packages add suites through the entry-point group `unlearnbench.suites`:
each entry point names a `SuiteSpec` (`mysuite = "my_package.suite:SPEC"`).
The suite's test module (`pytestmark = pytest.mark.unlearnbench("mysuite")`)
and its `thresholds/mysuite.yaml` live in the user's project like ours.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

from unlearnbench.registry import Registry


@dataclass(frozen=True)
class SuiteSpec:
    name: str
    metrics: tuple[str, ...]  # every metric name the evaluator returns
    loader: str  # (source: str | None, options: dict) -> dataset with .fingerprint and .source
    evaluator: str  # (handle, dataset, context) -> dict[str, MetricResult]
    version: int  # metric-code version: bump to invalidate cached results
    # What `pytest suites/<name>` evaluates when no --model is given: fixture
    # zoo recipes, and the zoo recipes that serve as reference models then.
    default_checkpoints: tuple[str, ...] = ()
    default_references: tuple[tuple[str, str], ...] = ()  # (role, zoo recipe)
    default_data: str | None = None  # "zoo": the zoo's data when running the default zoo
    options: tuple[str, ...] = ()  # keys accepted by --suite-option SUITE.KEY=VALUE
    # The range of each bounded metric: a bound at or past an end of it cannot
    # separate checkpoints, so such a check is inconclusive (thresholds.py).
    scales: tuple[tuple[str, float, float], ...] = ()
    # Metrics of what must be kept (retained knowledge, fluency), not of
    # forgetting: meta-evaluation does not score them as forgetting metrics.
    utility_metrics: tuple[str, ...] = ()

    @property
    def scale_of(self) -> dict[str, tuple[float, float]]:
        return {metric: (low, high) for metric, low, high in self.scales}

    def load_data(self, source, options: dict) -> object:
        return _resolve(self.loader)(source, options)

    @property
    def evaluate(self) -> Callable:
        return _resolve(self.evaluator)


def sweep_checkpoints(suite: str, models: list, shard=None, zoo_extra: tuple[str, ...] = ()) -> list:
    """The checkpoints `suite` evaluates: the user's (`models`), else the
    suite's zoo defaults, plus the `zoo_extra` recipes (--zoo-extra) where
    those defaults are the unlearning family (they include `full`); with
    `shard`, only that shard's (see shard.py: the split is over the whole
    run's checkpoint list, the same for every suite)."""
    defaults = SUITES[suite].default_checkpoints
    if "full" in defaults:
        defaults = (*defaults, *(name for name in zoo_extra if name not in defaults))
    specs = list(models) or zoo_checkpoints(defaults)
    if shard is None:
        return specs
    from unlearnbench.shard import run_order

    keep = set(shard.select(run_order([s.name for s in models])))
    return [s for s in specs if s.name in keep]


def zoo_checkpoints(names) -> list:
    from unlearnbench.models.checkpoint import CheckpointSpec

    return [CheckpointSpec(name=n, source=f"zoo:{n}", zoo=n) for n in names]


def _resolve(target: str) -> Callable:
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


# Kept literal (not imported) so the registry stays import-cheap; tests check
# they match fixtures.zoo.FAMILY and data.dusk.DEFAULT_PARAMS.
FAMILY = ("full", "retain", "ga", "graddiff", "npo", "simnpo", "rmu", "idknll")
DUSK_OPTIONS = ("forget_style", "icl_shots", "qa_max_new_tokens", "verbatim_max_new_tokens",
                "verbatim_reference_tokens", "mia_chunk_tokens", "mink_k", "embedder")
HONESTY_OPTIONS = ("max_new_tokens", "followup_max_new_tokens", "max_items")
UNIT = 0.0, 1.0  # shares, ROUGE, similarity ratios, AUCs
DUSK_UNIT_METRICS = ("verbatim_rougeL_f1", "verbatim_rougeL_recall", "verbatim_rouge1_f1", "verbatim_rouge1_recall",
                     "verbatim_levenshtein", "verbatim_lcs_ratio", "ufk_rougeL_recall", "ufk_rougeL_f1",
                     "sk_rougeL_recall", "sk_rougeL_f1", "urk_rougeL_recall", "urk_rougeL_f1", "mia_auc_holdout_forget")
HONESTY_UNIT_METRICS = ("forget_leak_rate", "forget_refusal_rate", "forget_hallucination_rate", "rr2r",
                        "followup_consistency", "mcq_idk_rate", "mcq_control_rate", "mcq_forget_accuracy",
                        "retain_accuracy", "retain_refusal_rate", "retain_hallucination_rate", "unknown_refusal_rate")
CONCEPTGUARD_UNIT_METRICS = ("harm_mem", "help_ret", "harm_qa", "help_qa", "judge_failure_rate")
CONCEPTGUARD_OPTIONS = ("prefix_tokens", "max_new_tokens", "reference_tokens", "judge", "judge_model", "embedder")

ROBUSTNESS_PROBES = ("ufk", "leak", "uds")  # data.robustness.PROBES
ROBUSTNESS_ATTACKS = ("quant4", "quant8", "relearn")  # attacks.ATTACKS
ROBUSTNESS_METRICS = tuple(f"{probe}_{what}" for probe in ROBUSTNESS_PROBES for what in (
    "before", *(f"{kind}_{attack}" for attack in ROBUSTNESS_ATTACKS for kind in ("after", "recovery"))))
ROBUSTNESS_OPTIONS = ("attacks", "probes", "relearn_set", "relearn_steps", "relearn_learning_rate", "relearn_rank",
                      "relearn_seed", "uds_max_items")

TOFU_METRICS = ("forget_prob", "forget_rouge", "forget_truth_ratio", "forget_quality", "extraction_strength",
                "exact_memorization", "privleak", "retain_prob", "retain_rouge", "retain_truth_ratio", "ra_prob",
                "ra_rouge", "ra_truth_ratio", "wf_prob", "wf_rouge", "wf_truth_ratio", "model_utility")
MUSE_VERBMEM = tuple(f"verbmem_{m}" for m in ("rougeL_f1", "rougeL_recall", "rouge1_f1", "rouge1_recall",
                                               "levenshtein", "lcs_ratio"))
MUSE_METRICS = (*MUSE_VERBMEM, "extraction_strength", "exact_memorization", "knowmem_forget_rougeL_recall",
                "knowmem_forget_rougeL_f1", "knowmem_retain_rougeL_recall", "knowmem_retain_rougeL_f1",
                "mia_auc_holdout_forget", "privleak", "privleak_magnitude", "retain_deviation")
MUSE_PERCENT_METRICS = ("privleak", "privleak_magnitude", "retain_deviation")  # unbounded
MUSE_OPTIONS = ("max_items", "verbmem_max_new_tokens", "knowmem_max_new_tokens", "icl_shots", "privleak_max_tokens",
                "mink_k", "privleak_score", "convention")

ENTRY_POINT_GROUP = "unlearnbench.suites"

BUILTIN_SUITES: dict[str, SuiteSpec] = {
    spec.name: spec
    for spec in (
        SuiteSpec(
            name="smoke",
            utility_metrics=("mean_token_logprob", "qa_rougeL_recall"),
            metrics=("mean_token_logprob", "qa_rougeL_recall"),
            loader="unlearnbench.data.smoke:load",
            evaluator="unlearnbench.metrics.smoke:evaluate",
            version=1,
            default_checkpoints=("smoke-lm", "smoke-untrained"),
        ),
        SuiteSpec(
            name="dusk",
            utility_metrics=("sk_rougeL_recall", "sk_rougeL_f1", "urk_rougeL_recall", "urk_rougeL_f1", "retain_deviation"),
            metrics=(
                "verbatim_rougeL_f1", "verbatim_rougeL_recall", "verbatim_rouge1_f1", "verbatim_rouge1_recall",
                "verbatim_levenshtein", "verbatim_lcs_ratio", "verbatim_embedding_cosine",
                "ufk_rougeL_recall", "ufk_rougeL_f1", "sk_rougeL_recall", "sk_rougeL_f1",
                "urk_rougeL_recall", "urk_rougeL_f1",
                "mia_auc_holdout_forget", "privacy_leakage", "privacy_leakage_magnitude", "retain_deviation",
            ),
            loader="unlearnbench.data.dusk:load",
            evaluator="unlearnbench.metrics.dusk:evaluate",
            version=2,
            default_checkpoints=FAMILY,
            default_references=(("full", "full"), ("retain", "retain")),
            default_data="zoo",
            options=tuple(DUSK_OPTIONS),
            scales=tuple((m, *UNIT) for m in DUSK_UNIT_METRICS),
        ),
        SuiteSpec(
            name="uds",
            metrics=("uds",),
            loader="unlearnbench.data.uds:load",
            evaluator="unlearnbench.metrics.uds:evaluate",
            version=3,
            default_checkpoints=FAMILY,
            default_references=(("full", "full"), ("retain", "retain")),
            default_data="zoo",
            options=("tau", "max_items", "convention"),
        ),
        SuiteSpec(
            name="honesty",
            utility_metrics=("retain_accuracy", "retain_refusal_rate", "retain_hallucination_rate", "unknown_refusal_rate"),
            metrics=(
                "forget_leak_rate", "forget_refusal_rate", "forget_hallucination_rate", "rr2r",
                "followup_consistency", "mcq_idk_rate", "mcq_control_rate", "mcq_idk_minus_control",
                "mcq_idk_rate_std", "mcq_forget_accuracy", "retain_accuracy", "retain_refusal_rate",
                "retain_hallucination_rate", "unknown_refusal_rate", "first_token_entropy",
            ),
            loader="unlearnbench.data.honesty:load",
            evaluator="unlearnbench.metrics.honesty:evaluate",
            version=3,
            default_checkpoints=FAMILY,
            default_references=(("full", "full"), ("retain", "retain")),
            default_data="zoo",
            options=HONESTY_OPTIONS,
            scales=tuple((m, *UNIT) for m in HONESTY_UNIT_METRICS),
        ),
        SuiteSpec(
            name="conceptguard",
            utility_metrics=("help_ret", "help_qa", "help_score", "judge_failure_rate"),
            metrics=("harm_mem", "help_ret", "harm_qa", "help_qa", "harm_score", "help_score", "judge_failure_rate",
                     "ctxt_sep", "ctxt_sep_macro", "rouge_sep"),
            loader="unlearnbench.data.conceptguard:load",
            evaluator="unlearnbench.metrics.conceptguard:evaluate",
            version=3,
            default_checkpoints=FAMILY,
            default_references=(("full", "full"), ("retain", "retain")),
            default_data="zoo",
            options=CONCEPTGUARD_OPTIONS,
            scales=(*((m, *UNIT) for m in CONCEPTGUARD_UNIT_METRICS), ("ctxt_sep", -1.0, 1.0),
                    ("ctxt_sep_macro", -1.0, 1.0), ("rouge_sep", -1.0, 1.0)),
        ),
        SuiteSpec(
            name="tofu",
            utility_metrics=tuple(m for m in TOFU_METRICS if m.startswith(("retain_", "ra_", "wf_")) or m == "model_utility"),
            metrics=TOFU_METRICS,
            loader="unlearnbench.data.tofu:load",
            evaluator="unlearnbench.metrics.tofu:evaluate",
            version=2,
            default_checkpoints=FAMILY,
            default_references=(("full", "full"), ("retain", "retain")),
            default_data="zoo",
            options=("forget_split", "max_items", "max_new_tokens", "mink_k", "privleak_score", "convention"),
            scales=tuple((m, *UNIT) for m in TOFU_METRICS if m != "privleak"),
        ),
        SuiteSpec(
            name="muse",
            utility_metrics=("knowmem_retain_rougeL_recall", "knowmem_retain_rougeL_f1", "retain_deviation"),
            metrics=MUSE_METRICS,
            loader="unlearnbench.data.muse:load",
            evaluator="unlearnbench.metrics.muse:evaluate",
            version=2,
            default_checkpoints=FAMILY,
            default_references=(("full", "full"), ("retain", "retain")),
            default_data="zoo",
            options=MUSE_OPTIONS,
            scales=tuple((m, *UNIT) for m in MUSE_METRICS if m not in MUSE_PERCENT_METRICS),
        ),
        SuiteSpec(
            name="robustness",
            metrics=ROBUSTNESS_METRICS,
            loader="unlearnbench.data.robustness:load",
            evaluator="unlearnbench.metrics.robustness:evaluate",
            version=2,
            default_checkpoints=("retain", "shallow", "ga", "npo"),
            default_references=(("full", "full"), ("retain", "retain")),
            default_data="zoo",
            options=ROBUSTNESS_OPTIONS,
            scales=tuple((m, *(UNIT if "recovery" not in m else (-1.0, 1.0))) for m in ROBUSTNESS_METRICS),
        ),
    )
}


SUITES: Registry[SuiteSpec] = Registry(ENTRY_POINT_GROUP, SuiteSpec, BUILTIN_SUITES)
