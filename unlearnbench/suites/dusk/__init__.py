"""DUSK: forget what is unique to a document, keep what is shared with
others (verbatim memorisation, knowledge QA on unique-forget / shared /
unique-retain facts, membership inference)."""

from unlearnbench.contracts import Probe
from unlearnbench.suites import UNIT, Metric, metric_set, on_zoo_family

SPEC = on_zoo_family(
    name="dusk",
    metrics=(
        *metric_set(
            (
                "verbatim_rougeL_f1",
                "verbatim_rougeL_recall",
                "verbatim_rouge1_f1",
                "verbatim_rouge1_recall",
                "verbatim_levenshtein",
                "verbatim_lcs_ratio",
            ),
            scale=UNIT,
        ),
        Metric("verbatim_embedding_cosine"),
        *metric_set(
            (
                "ufk_rougeL_recall",
                "ufk_rougeL_f1",
                "sk_rougeL_recall",
                "sk_rougeL_f1",
                "urk_rougeL_recall",
                "urk_rougeL_f1",
            ),
            scale=UNIT,
            utility=("sk_rougeL_recall", "sk_rougeL_f1", "urk_rougeL_recall", "urk_rougeL_f1"),
        ),
        Metric("mia_auc_holdout_forget", scale=UNIT, kind="set"),
        Metric("privacy_leakage", kind="set", measured_against="retain"),
        Metric("privacy_leakage_magnitude", kind="set", measured_against="retain"),
        Metric("retain_deviation", utility=True, kind="set", measured_against="retain"),
    ),
    loader="unlearnbench.suites.dusk.data:load",
    evaluator="unlearnbench.suites.dusk.metrics:evaluate",
    zoo_data="unlearnbench.suites.dusk.zoo:write",
    version=4,  # 4: PL and RD keep the resamples whose retain AUC is 0 (as +inf)
    headline=(("forget", "verbatim_rougeL_f1"), ("utility", "sk_rougeL_recall")),
    # data.dusk.DEFAULT_PARAMS' keys (a test keeps them equal; the data module needs scipy)
    options=(
        "forget_style",
        "icl_shots",
        "qa_max_new_tokens",
        "verbatim_max_new_tokens",
        "verbatim_reference_tokens",
        "mia_chunk_tokens",
        "mink_k",
        "embedder",
        "max_items",
    ),
    probes=(Probe("ufk", "unlearnbench.suites.dusk.metrics:unique_forget_probe", more_is_knowledge=True),),
    plots="unlearnbench.suites.dusk.plots:knowledge_and_tradeoff",
)
