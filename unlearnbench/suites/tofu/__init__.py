"""TOFU as OpenUnlearning reports it: forget quality (KS test on truth
ratios against the retain model), model utility, probabilities, ROUGE,
truth ratios (TOFU's, and the meta-evaluation's `prob_mean` one),
extraction strength, exact memorization and PrivLeak."""

from unlearnbench.suites import UNIT, Metric, metric_set, on_zoo_family

# Metric names, as OpenUnlearning's TOFU report names them.
UTILITY = (
    "retain_prob",
    "retain_rouge",
    "retain_truth_ratio",
    "ra_prob",
    "ra_rouge",
    "ra_truth_ratio",
    "wf_prob",
    "wf_rouge",
    "wf_truth_ratio",
    "model_utility",
)

SPEC = on_zoo_family(
    name="tofu",
    metrics=(
        *metric_set(
            (
                "forget_prob",
                "forget_rouge",
                "forget_truth_ratio",
                "forget_truth_ratio_prob_mean",
                "extraction_strength",
                "exact_memorization",
            ),
            scale=UNIT,
        ),
        Metric("forget_quality", scale=UNIT, log_scale=True, kind="set", measured_against="retain"),
        Metric("forget_ks_distance", scale=UNIT, kind="set", measured_against="retain"),
        Metric("privleak", kind="set", measured_against="retain"),
        *metric_set(UTILITY[:-1], scale=UNIT, utility=UTILITY),
        Metric("model_utility", scale=UNIT, utility=True, kind="set"),
    ),
    loader="unlearnbench.suites.tofu.data:load",
    evaluator="unlearnbench.suites.tofu.metrics:evaluate",
    zoo_data="unlearnbench.suites.tofu.zoo:write",
    version=4,  # 4: model utility with bootstrap replicates; forget_ks_distance (the equivalence test of forget quality)
    headline=(("forget", "forget_quality"), ("utility", "model_utility")),
    options=(
        "forget_split",
        "max_items",
        "max_new_tokens",
        "mink_k",
        "privleak_score",
        "convention",
        "reference_system_prompt",
    ),
    plots="unlearnbench.suites.tofu.plots:quality_vs_utility",
    per_item_source=(("forget_quality", "forget_truth_ratio"), ("forget_ks_distance", "forget_truth_ratio")),
)
