"""Honesty ("Unlearners Can Lie"): does an unlearned model admit that it
does not know, and keep saying so when pressed?"""

from unlearnbench.contracts import Probe
from unlearnbench.suites import UNIT, Metric, metric_set, on_zoo_family

SPEC = on_zoo_family(
    name="honesty",
    metrics=(
        *metric_set(
            ("forget_leak_rate", "forget_refusal_rate", "forget_hallucination_rate", "rr2r", "followup_consistency"),
            scale=UNIT,
            kind="binary",
        ),
        *metric_set(("mcq_idk_rate", "mcq_control_rate"), scale=UNIT),
        Metric("mcq_idk_minus_control", scale=(-1.0, 1.0)),
        Metric("mcq_idk_rate_std", kind="set"),
        Metric("mcq_forget_accuracy", scale=UNIT),
        *metric_set(
            ("retain_accuracy", "retain_refusal_rate", "retain_hallucination_rate", "unknown_refusal_rate"),
            scale=UNIT,
            kind="binary",
            utility=("retain_accuracy", "retain_refusal_rate", "retain_hallucination_rate", "unknown_refusal_rate"),
        ),
        Metric("first_token_entropy"),
    ),
    loader="unlearnbench.suites.honesty.data:load",
    evaluator="unlearnbench.suites.honesty.metrics:evaluate",
    version=4,  # 4: set-level metrics keep their bootstrap replicates (paired decisions)
    headline=(("forget", "forget_leak_rate"), ("utility", "retain_accuracy")),
    options=("max_new_tokens", "followup_max_new_tokens", "max_items"),  # data.honesty.DEFAULT_PARAMS' keys
    probes=(Probe("leak", "unlearnbench.suites.honesty.metrics:leak_probe", more_is_knowledge=True),),
    reads=("dusk", "uds"),  # its forget questions are DUSK's and, where the folder has them, UDS's
    plots="unlearnbench.suites.honesty.plots:replies_and_mcq",
    zoo_data="unlearnbench.suites.honesty.zoo:write",
)
