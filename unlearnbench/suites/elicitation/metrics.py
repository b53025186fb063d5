"""Elicitation: is a forgotten fact gone however it is asked, and a
neighbouring fact kept? (docs/suites/elicitation.md)

Every probe is asked once per checkpoint, in two batched calls: ONE greedy
generation over every probe without choices (in the model's dialogue format:
its chat template with the probe's system prompt and earlier turns, else the
plain fallback), scored by whether the reply contains the answer (or by
ROUGE-L recall of it, RWKU's measure), and ONE log-likelihood pass over every
option of the probes with choices (multiple choice, true or false), scored by
whether the answer's option is the most likely, as lm-eval scores multiple
choice.

The `sampled` family asks each canonical forget probe `samples` more times,
sampling at `temperature` with a seed of the run's seed and the probe's id
(the same draws on every run with the same --seed), in one more batched
generation: a probe counts as answered when any draw answers it (best of k).

Per set (forget, neighbour) and family: the share of probes answered
(`forget_<family>`, `neighbour_<family>`), with the probes' clusters; and
`neighbour_all`, every neighbour probe. The gate judges each family against
the retain model asked the same way (thresholds/elicitation.yaml).
"""

from __future__ import annotations

import zlib

import numpy as np

from unlearnbench.errors import MissingCapability
from unlearnbench.metrics.continuations import continuation_loglikelihoods
from unlearnbench.metrics.core import MetricResult, References, Unavailable, mean_result, run_seed
from unlearnbench.metrics.dialogue import STOP_STRINGS, dialogue_prompt
from unlearnbench.metrics.text import contains_answer, rouge
from unlearnbench.models.interface import LanguageModel, Sampling
from unlearnbench.suites.elicitation.data import ASKED, SETS, ElicitationData, Probe

REPLY_CHARS = 120  # of a reply kept per probe in the report's drill-down (the prompt: one per family)


def metric_name(name: str, family: str) -> str:
    return f"{name}_{family}"


def prompt(model, probe: Probe) -> str:
    """What the model is asked: the probe in its dialogue format, up to where the reply begins."""
    return dialogue_prompt(model, probe.question, system=probe.system, shots=probe.shots) + probe.answer_prefix


def score_reply(reply: str, answer: str, scoring: str) -> float:
    if scoring == "rouge_recall":
        return rouge(answer, reply)["rougeL_recall"]
    return float(contains_answer(reply, answer))


def answered(model, probes: list[Probe], scoring: str, max_new_tokens: int) -> tuple[dict[str, float], dict]:
    """Each probe's score (1: answered) and what the model said, asking every
    probe once: generated ones in one batch, multiple-choice ones in one
    log-likelihood pass."""
    generated = [p for p in probes if not p.choices]
    chosen = [p for p in probes if p.choices]
    scores: dict[str, float] = {}
    said: dict[str, dict] = {}
    if generated:
        prompts = [prompt(model, p) for p in generated]
        replies = model.generate(prompts, max_new_tokens=max_new_tokens, stop_strings=STOP_STRINGS)
        for p, text, reply in zip(generated, prompts, replies):
            scores[p.id] = score_reply(reply, p.answer, scoring)
            said[p.id] = {"prompt": text, "answer": p.answer, "reply": reply[:REPLY_CHARS]}
    if chosen:
        contexts = [prompt(model, p) for p in chosen]
        pairs = [(c, " " + option) for c, p in zip(contexts, chosen) for option in p.choices]
        lls, _ = continuation_loglikelihoods(model, [c for c, _ in pairs], [x for _, x in pairs])
        at = 0
        for p, context in zip(chosen, contexts):
            row = lls[at : at + len(p.choices)]
            at += len(p.choices)
            pick = int(np.argmax(row))  # the first of tied options, as lm-eval
            scores[p.id] = float(p.choices[pick] == p.answer)
            said[p.id] = {"prompt": context, "answer": p.answer, "picked": p.choices[pick]}
    return scores, said


def sampled(model, probes: list[Probe], params: dict) -> tuple[dict[str, float], dict]:
    """Each probe's best score over `samples` seeded draws at `temperature`, and the draws."""
    k = params["samples"]
    prompts = [prompt(model, p) for p in probes for _ in range(k)]
    seeds = tuple(zlib.crc32(f"{run_seed()}:{p.id}:{draw}".encode()) for p in probes for draw in range(k))
    replies = model.generate(
        prompts,
        max_new_tokens=params["max_new_tokens"],
        stop_strings=STOP_STRINGS,
        sampling=Sampling(params["temperature"], seeds),
    )
    scores, said = {}, {}
    for i, p in enumerate(probes):
        draws = replies[i * k : (i + 1) * k]
        scores[p.id] = max(score_reply(reply, p.answer, params["scoring"]) for reply in draws)
        said[p.id] = {"prompt": prompts[i * k], "answer": p.answer, "draws": [reply[:REPLY_CHARS] for reply in draws]}
    return scores, said


def drill_down(probes: list[Probe], said: dict) -> dict:
    """The report's details of a family: its first prompt in full, as the model
    saw it, and per probe what the model said (the answer is the data's)."""
    return {
        "example_prompt": said[probes[0].id]["prompt"],
        "items": {p.id: {k: v for k, v in said[p.id].items() if k not in ("prompt", "answer")} for p in probes},
    }


def evaluate(
    model: LanguageModel, data: ElicitationData, refs: References | None = None
) -> dict[str, MetricResult | Unavailable]:
    """Every family's answer rate on the forget and neighbour probes (no
    reference-model work: the gate compares with the retain model's own run)."""
    scoring = data.params["scoring"]
    params = {**data.params, "dialogue": "chat template" if model.has_chat_template else "plain fallback"}
    probes = {name: data.sets.get(name, []) for name in SETS}
    scores, said = answered(model, [p for name in SETS for p in probes[name]], scoring, data.params["max_new_tokens"])

    def result(name: str, family: str, chosen: list[Probe]) -> MetricResult:
        return mean_result(
            metric_name(name, family),
            {p.id: scores[p.id] for p in chosen},
            higher_is_better=name == "neighbour",
            params={
                **params,
                "family": family,
                "scored_by": "log-likelihood of the options" if chosen[0].choices else scoring,
            },
            details=drill_down(chosen, said),
        )

    out: dict[str, MetricResult | Unavailable] = {}
    for name in SETS:
        families = data.families(name)
        for family in ASKED:
            metric = metric_name(name, family)
            out[metric] = (
                result(name, family, families[family])
                if family in families
                else Unavailable(metric, f"no {family} probes in the {name} set of {data.source}")
            )
    out |= sampled_result(model, data, params)
    out["neighbour_all"] = (
        result("neighbour", "all", probes["neighbour"])
        if probes["neighbour"]
        else Unavailable("neighbour_all", f"no neighbour probes in {data.source}")
    )
    return out


def sampled_result(model, data: ElicitationData, params: dict) -> dict[str, MetricResult | Unavailable]:
    """The `sampled` family: the forget set's canonical probes' best of `samples` draws."""
    name = "forget"
    metric = metric_name(name, "sampled")
    canonical = data.families(name).get("canonical", [])
    if not canonical or not params["samples"]:
        why = "samples=0" if canonical else f"no canonical probes in the {name} set of {data.source}"
        return {metric: Unavailable(metric, why)}
    try:
        scores, said = sampled(model, canonical, params)
    except MissingCapability as exc:
        return {metric: Unavailable(metric, str(exc))}
    return {
        metric: mean_result(
            metric,
            scores,
            higher_is_better=False,
            params={
                **params,
                "family": "sampled",
                "seed": run_seed(),
                "scored_by": f"best of {params['samples']} draws, {params['scoring']}",
            },
            details=drill_down(canonical, said),
        )
    }
