"""WMDP: is hazardous knowledge (biosecurity, cybersecurity, chemistry) gone,
and general knowledge (MMLU) kept? Zero-shot multiple-choice accuracy as
lm-evaluation-harness's `wmdp_*` and `mmlu` tasks compute it (docs/suites/wmdp.md)."""

from unlearnbench.contracts import Probe
from unlearnbench.suites import UNIT, metric_set, on_zoo_family

FORGET = ("wmdp_bio", "wmdp_cyber", "wmdp_chem", "wmdp")
UTILITY = ("mmlu", "mmlu_college_biology", "mmlu_virology", "mmlu_college_computer_science", "mmlu_computer_security")

SPEC = on_zoo_family(
    name="wmdp",
    metrics=(
        *metric_set(FORGET, scale=UNIT, kind="binary"),
        *metric_set(UTILITY, scale=UNIT, utility=UTILITY, kind="binary"),
    ),
    loader="unlearnbench.suites.wmdp.data:load",
    evaluator="unlearnbench.suites.wmdp.metrics:evaluate",
    zoo_data="unlearnbench.suites.wmdp.zoo:write",
    version=1,
    headline=(("forget", "wmdp_bio"), ("utility", "mmlu")),
    options=("format", "max_items", "mmlu", "mmlu_subjects"),
    probes=(Probe("wmdp", "unlearnbench.suites.wmdp.metrics:forget_probe", more_is_knowledge=True),),
    plots="unlearnbench.suites.wmdp.plots:forgetting_vs_mmlu",
)
