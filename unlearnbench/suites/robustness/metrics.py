"""Robustness probes (docs/suites/robustness.md): does the forgetting survive an attack?

Each probe measures forget knowledge on the checkpoint, then on each attacked
copy of it (4-bit and 8-bit quantization, LoRA relearning: attacks.py):
- `ufk`: DUSK unique-forget knowledge, ROUGE-L recall of greedy answers;
- `leak`: the honesty leak rate on the forget questions;
- `uds`: UDS (needs --full-model and --retain-model): 1 = erased in depth.
Metrics: `<probe>_before`, `<probe>_after_<attack>` and the recovery
`<probe>_recovery_<attack>`, oriented "higher = more knowledge came back"
(after - before for ufk and leak, before - after for UDS), its CI from the
per-item differences. The gate compares `after` with the retain model's
after the same attack (thresholds/robustness.yaml).
"""

from __future__ import annotations

import dataclasses

from unlearnbench.metrics.core import MetricResult, References, Unavailable, mean_result
from unlearnbench.models.interface import LanguageModel
from unlearnbench.suites import registered_probes
from unlearnbench.suites.robustness import ATTACKS, PROBES
from unlearnbench.suites.robustness.data import RobustnessData


def probes(model, data: RobustnessData, refs: References) -> dict[str, MetricResult | Unavailable]:
    """Each probe, as the suite that owns it computes it (`SuiteSpec.probes`), on its own data."""
    owned = registered_probes()
    return {probe: owned[probe][1].measure(model, data.probe_data[probe], refs) for probe in data.probes}


def recovery(name: str, probe: str, before, after, params: dict) -> MetricResult | Unavailable:
    if isinstance(before, Unavailable) or isinstance(after, Unavailable):
        reason = before.reason if isinstance(before, Unavailable) else after.reason
        return Unavailable(name, reason)
    sign = 1 if registered_probes()[probe][1].more_is_knowledge else -1
    common = [i for i in before.per_item if i in after.per_item]
    return mean_result(
        name,
        {i: sign * (after.per_item[i] - before.per_item[i]) for i in common},
        higher_is_better=False,
        params=params,
        ideal=0.0,
    )


def renamed(result, name: str, params: dict):
    if isinstance(result, Unavailable):
        return Unavailable(name, result.reason)
    return dataclasses.replace(result, name=name, params={**result.params, **params})


def evaluate(
    model: LanguageModel, data: RobustnessData, refs: References | None = None
) -> dict[str, MetricResult | Unavailable]:
    refs = refs or References()
    if refs.attacked is None:
        raise ValueError("the robustness probes need a session to build attacked checkpoints (References.attacked)")
    before = probes(model, data, refs)
    out = {}
    for probe in PROBES:
        skipped = f"not among --suite-option robustness.probes={data.params['probes']}"
        out[f"{probe}_before"] = (
            renamed(before[probe], f"{probe}_before", {})
            if probe in before
            else Unavailable(f"{probe}_before", skipped)
        )
    for attack_name in ATTACKS:
        names = [(p, f"{p}_after_{attack_name}", f"{p}_recovery_{attack_name}") for p in PROBES]
        if attack_name not in data.attacks:
            reason = f"not among --suite-option robustness.attacks={data.params['attacks']}"
            out |= {n: Unavailable(n, reason) for _, *pair in names for n in pair}
            continue
        attack = data.attacks[attack_name]
        with refs.attacked(model, attack) as attacked:
            after = probes(attacked, data, refs)
        params = {"attack": attack_name, **attack.params}
        for probe, after_name, recovery_name in names:
            if probe not in after:
                reason = f"not among --suite-option robustness.probes={data.params['probes']}"
                out[after_name], out[recovery_name] = (
                    Unavailable(after_name, reason),
                    Unavailable(recovery_name, reason),
                )
                continue
            out[after_name] = renamed(after[probe], after_name, params)
            out[recovery_name] = recovery(recovery_name, probe, before[probe], after[probe], params)
    return out
