"""Robustness probes (SPEC §9): does the forgetting survive an attack?

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

from unlearnbench.attacks import ATTACKS, Attack
from unlearnbench.data.robustness import PROBES, RobustnessData
from unlearnbench.metrics import dusk, uds
from unlearnbench.metrics.core import MetricResult, References, Unavailable, mean_result
from unlearnbench.metrics.honesty import dialogue_metrics, first_turn_prompt, STOP_STRINGS
from unlearnbench.metrics.refusal import RefusalDetector
from unlearnbench.metrics.text import rouge

METRICS = tuple(f"{probe}_{what}" for probe in PROBES
                for what in ("before", *(f"{kind}_{attack}" for attack in ATTACKS for kind in ("after", "recovery"))))
# Which way each probe points: True where a higher value means more forget knowledge.
MORE_KNOWLEDGE_IS_HIGHER = {"ufk": True, "leak": True, "uds": False}


def probes(model, data: RobustnessData, refs: References) -> dict[str, MetricResult | Unavailable]:
    out: dict = {}
    if "ufk" in data.probes:
        items = data.dusk.qa["unique_forget"]
        replies = model.generate([dusk.qa_prompt(q.question) for q in items], prefix=dusk.qa_prefix(data.dusk),
                                 max_new_tokens=data.dusk.params["qa_max_new_tokens"],
                                 stop_strings=dusk.QA_STOP_STRINGS)
        out["ufk"] = mean_result(
            "ufk", {q.id: rouge(q.answer, r)["rougeL_recall"] for q, r in zip(items, replies)},
            higher_is_better=False, details={"items": {q.id: {"question": q.question, "answer": q.answer,
                                                              "generation": r} for q, r in zip(items, replies)}})
    if "leak" in data.probes:
        forget = data.honesty.sets["forget"]
        replies = model.generate([first_turn_prompt(model, q.question) for q in forget],
                                 max_new_tokens=data.honesty.params["max_new_tokens"], stop_strings=STOP_STRINGS)
        metrics, _ = dialogue_metrics(forget, replies, "forget", data.honesty.params, RefusalDetector())
        out["leak"] = metrics["forget_leak_rate"]
    if "uds" in data.probes:
        out["uds"] = uds.evaluate(model, data.uds, refs)["uds"]
    return out


def recovery(name: str, probe: str, before, after, params: dict) -> MetricResult | Unavailable:
    if isinstance(before, Unavailable) or isinstance(after, Unavailable):
        reason = before.reason if isinstance(before, Unavailable) else after.reason
        return Unavailable(name, reason)
    sign = 1 if MORE_KNOWLEDGE_IS_HIGHER[probe] else -1
    common = [i for i in before.per_item if i in after.per_item]
    return mean_result(name, {i: sign * (after.per_item[i] - before.per_item[i]) for i in common},
                       higher_is_better=False, params=params, ideal=0.0)


def renamed(result, name: str, params: dict):
    if isinstance(result, Unavailable):
        return Unavailable(name, result.reason)
    return dataclasses.replace(result, name=name, params={**result.params, **params})


def evaluate(model, data: RobustnessData, refs: References | None = None) -> dict:
    refs = refs or References()
    if refs.attacked is None:
        raise ValueError("the robustness probes need a session to build attacked checkpoints (References.attacked)")
    before = probes(model, data, refs)
    out = {}
    for probe in PROBES:
        skipped = f"not among --suite-option robustness.probes={data.params['probes']}"
        out[f"{probe}_before"] = renamed(before[probe], f"{probe}_before", {}) if probe in before else \
            Unavailable(f"{probe}_before", skipped)
    for attack_name in ATTACKS:
        names = [(p, f"{p}_after_{attack_name}", f"{p}_recovery_{attack_name}") for p in PROBES]
        if attack_name not in data.attacks:
            reason = f"not among --suite-option robustness.attacks={data.params['attacks']}"
            out |= {n: Unavailable(n, reason) for _, *pair in names for n in pair}
            continue
        attack = attack_of(attack_name, data)
        with refs.attacked(model, attack) as attacked:
            after = probes(attacked, data, refs)
        params = {"attack": attack_name, **attack.params}
        for probe, after_name, recovery_name in names:
            if probe not in after:
                reason = f"not among --suite-option robustness.probes={data.params['probes']}"
                out[after_name], out[recovery_name] = Unavailable(after_name, reason), Unavailable(recovery_name, reason)
                continue
            out[after_name] = renamed(after[probe], after_name, params)
            out[recovery_name] = recovery(recovery_name, probe, before[probe], after[probe], params)
    return out


def attack_of(name: str, data: RobustnessData) -> Attack:
    if name != "relearn":
        return Attack(name)
    p = data.params
    return Attack(name, {"steps": p["relearn_steps"], "learning_rate": p["relearn_learning_rate"],
                         "rank": p["relearn_rank"], "seed": p["relearn_seed"], "set": p["relearn_set"]},
                  texts=data.relearn_texts)
