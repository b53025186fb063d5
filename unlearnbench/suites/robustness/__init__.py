"""Robustness: does the forgetting survive 4-/8-bit quantization and a few
steps of relearning? Four probes (DUSK unique-forget recall, the honesty
leak rate, UDS, WMDP accuracy) before and after each attack, and the
recovered share."""

from unlearnbench.suites import UNIT, ZOO_REFERENCES, Metric, SuiteSpec

# The probes the suite declares metrics for: those the built-in suites own (`SuiteSpec.probes`; a test keeps
# them equal). Named here because a spec is built while the registry loads, before it can be enumerated.
PROBES = ("ufk", "leak", "uds", "wmdp")
ATTACKS = ("quant4", "quant8", "relearn")  # attacks.ATTACKS

SPEC = SuiteSpec(
    name="robustness",
    metrics=tuple(
        Metric(f"{probe}_{what}", scale=(-1.0, 1.0) if what.startswith("recovery") else UNIT)
        for probe in PROBES
        for what in ("before", *(f"{kind}_{attack}" for attack in ATTACKS for kind in ("after", "recovery")))
    ),
    loader="unlearnbench.suites.robustness.data:load",
    evaluator="unlearnbench.suites.robustness.metrics:evaluate",
    version=3,
    default_checkpoints=("retain", "shallow", "ga", "npo", "refusal"),
    default_references=ZOO_REFERENCES,
    default_data="zoo",
    reads=("dusk", "honesty", "uds", "wmdp"),  # each probe's owner; DUSK's data also gives the relearning set
    options=(
        "attacks",
        "probes",
        "relearn_set",
        "relearn_steps",
        "relearn_learning_rate",
        "relearn_rank",
        "relearn_seed",
        "uds_max_items",
        "wmdp_data",
    ),
)
