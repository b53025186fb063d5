"""UDS (Unlearning Depth Score): is the knowledge gone from the model's
internals? Activation patching between the full model, the retain model and
the checkpoint, per layer, at the entity-predicting positions."""

from unlearnbench.contracts import Probe
from unlearnbench.suites import UNIT, Metric, on_zoo_family

# `--suite-option uds.KEY=VALUE` overrides these (validated in data.py).
DEFAULT_PARAMS = {"tau": 0.05, "max_items": 0, "convention": "spec"}  # max_items 0 = all

SPEC = on_zoo_family(
    name="uds",
    metrics=(Metric("uds", scale=UNIT),),  # a weighted mean of ratios clipped to [0, 1]
    loader="unlearnbench.suites.uds.data:load",
    evaluator="unlearnbench.suites.uds.metrics:evaluate",
    zoo_data="unlearnbench.suites.uds.zoo:write",
    version=3,
    headline=(("forget", "uds"),),
    options=tuple(DEFAULT_PARAMS),
    preflight="unlearnbench.suites.uds.preflight:one_tokenizer",
    probes=(Probe("uds", "unlearnbench.suites.uds.metrics:uds_probe", more_is_knowledge=False),),
    plots="unlearnbench.suites.uds.plots:layer_profiles",
)
