"""MUSE as OpenUnlearning reports it: verbatim memorisation (VerbMem),
knowledge memorisation on forget and retain (KnowMem), PrivLeak and retain
deviation."""

from unlearnbench.suites import UNIT, Metric, metric_set, on_zoo_family

SPEC = on_zoo_family(
    name="muse",
    metrics=(
        *metric_set(
            tuple(
                f"verbmem_{m}"
                for m in ("rougeL_f1", "rougeL_recall", "rouge1_f1", "rouge1_recall", "levenshtein", "lcs_ratio")
            ),
            scale=UNIT,
        ),
        *metric_set(
            ("extraction_strength", "exact_memorization", "knowmem_forget_rougeL_recall", "knowmem_forget_rougeL_f1"),
            scale=UNIT,
        ),
        *metric_set(
            ("knowmem_retain_rougeL_recall", "knowmem_retain_rougeL_f1"),
            scale=UNIT,
            utility=("knowmem_retain_rougeL_recall", "knowmem_retain_rougeL_f1"),
        ),
        Metric("mia_auc_holdout_forget", scale=UNIT, kind="set"),
        *(Metric(name, kind="set", measured_against="retain") for name in ("privleak", "privleak_magnitude")),
        Metric("retain_deviation", utility=True, kind="set", measured_against="retain"),  # percentages
    ),
    loader="unlearnbench.suites.muse.data:load",
    evaluator="unlearnbench.suites.muse.metrics:evaluate",
    zoo_data="unlearnbench.suites.muse.zoo:write",
    version=5,  # 5: PL and RD keep the resamples whose retain AUC is 0 (as +inf)
    headline=(("forget", "verbmem_rougeL_f1"), ("utility", "knowmem_retain_rougeL_f1")),
    options=(
        "max_items",
        "verbmem_max_new_tokens",
        "knowmem_max_new_tokens",
        "icl_shots",
        "privleak_max_tokens",
        "mink_k",
        "privleak_score",
        "convention",
        "reference_system_prompt",
    ),
    plots="unlearnbench.suites.muse.plots:verbmem_vs_utility",
)
