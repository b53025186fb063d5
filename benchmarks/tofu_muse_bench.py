"""TOFU and MUSE wall time for one checkpoint: shared passes vs naive per-metric passes.

Shared = unlearnbench (`metrics/tofu.py`, `metrics/muse.py`): one
teacher-forced pass over every TOFU answer, paraphrase and perturbed answer
feeds probability, truth ratio, memorization and Min-K%++; one greedy pass
feeds every ROUGE; MUSE's VerbMem generations feed six text metrics, one
teacher-forced pass feeds ES and EM, one membership pass feeds PL and RD.

Naive = one pass per metric (per metric family where one library call gives
several values, as rouge-score's ROUGE-1/ROUGE-L F1 and recall), as
OpenUnlearning's metric handlers run: each metric its own dataset and
forward pass; forget quality and privleak recompute the truth ratios and
membership scores they build on. Every metric the suites report is
computed on both sides. Both sides
batch within a pass the same way, so the difference is the shared passes
alone. The script checks that both give the same values.

    python benchmarks/tofu_muse_bench.py                  # SmolLM2-135M-Instruct, the zoo's sets, 10 items a set
    python benchmarks/tofu_muse_bench.py --model zoo:full --items 0
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from unlearnbench.cache import DEFAULT_CACHE_DIR
from unlearnbench.metrics import mia
from unlearnbench.metrics.core import References
from unlearnbench.metrics.text import lcs_ratio, levenshtein_similarity, rouge
from unlearnbench.models.handle import ModelHandle
from unlearnbench.suites.dusk import metrics as dusk
from unlearnbench.suites.honesty.metrics import STOP_STRINGS, first_turn_prompt
from unlearnbench.suites.muse import data as muse_data
from unlearnbench.suites.muse import metrics as muse
from unlearnbench.suites.tofu import data as tofu_data
from unlearnbench.suites.tofu import metrics as tofu


class CountingModel:
    """The model with its forward passes counted (one per scoring or generation call)."""

    def __init__(self, handle):
        self._handle, self.passes = handle, 0

    def __getattr__(self, name):
        attribute = getattr(self._handle, name)
        if name in ("score_continuations", "token_logprobs", "generate"):
            def counted(*args, **kwargs):
                self.passes += 1
                return attribute(*args, **kwargs)
            return counted
        return attribute


def _nll(s) -> float:
    return float(-np.mean(s.logprobs))


def naive_tofu(model, retain, data) -> dict[str, float]:
    """Every TOFU metric from its own passes."""
    params, sets = data.params, data.sets

    def score(m, name, texts, stats=False):
        items = sets[name]
        return m.score_continuations([first_turn_prompt(m, q.question) for q in items], texts, vocab_stats=stats)

    def answers(m, name, stats=False):
        return score(m, name, [q.answer for q in sets[name]], stats)

    def greedy_rouge(name):
        replies = model.generate([first_turn_prompt(model, q.question) for q in sets[name]],
                                 max_new_tokens=params["max_new_tokens"], stop_strings=STOP_STRINGS)
        return float(np.mean([rouge(q.answer, r, stemmed=True)["rougeL_recall"] for q, r in zip(sets[name], replies)]))

    def ratios(m, name):
        base = score(m, name, [q.paraphrased or q.answer for q in sets[name]])
        perturbed = [score(m, name, [q.perturbed[k] for q in sets[name]]) for k in range(len(sets[name][0].perturbed))]
        return [tofu.truth_ratio(_nll(b), [_nll(p[i]) for p in perturbed]) for i, b in enumerate(base)]

    def membership(m):
        def minkpp(name):
            return [mia.chunk_scores(s.logprobs, s.vocab_mean, s.vocab_var, q.answer, params["mink_k"])["minkpp"]
                    for q, s in zip(sets[name], answers(m, name, stats=True))]
        return 1 - mia.auc(minkpp("forget"), minkpp("holdout"))

    out = {"forget_prob": float(np.mean([tofu.answer_probability(_nll(s)) for s in answers(model, "forget")])),
           "forget_rouge": greedy_rouge("forget"),
           "forget_truth_ratio": tofu.forget_truth_ratio(ratios(model, "forget")),
           "extraction_strength": float(np.mean([tofu.extraction_strength(s.argmax, s.token_ids)
                                                 for s in answers(model, "forget")])),
           "exact_memorization": float(np.mean([tofu.exact_memorization(s.argmax, s.token_ids)
                                                for s in answers(model, "forget")])),
           "forget_quality": tofu.forget_quality(ratios(model, "forget"), ratios(retain, "forget"))}
    auc_m, auc_r = membership(model), membership(retain)
    out["privleak"] = (auc_m - auc_r) / auc_r * 100
    parts = []
    for name, short in tofu.SHORT.items():
        if name == "retain":
            prob = np.mean([tofu.answer_probability(_nll(s)) for s in answers(model, name)])
        else:
            correct = answers(model, name)
            wrong = [score(model, name, [q.perturbed[k] for q in sets[name]]) for k in range(len(sets[name][0].perturbed))]
            prob = np.mean([tofu.normalised_probability(_nll(c), [_nll(w[i]) for w in wrong])
                            for i, c in enumerate(correct)])
        values = (float(prob), greedy_rouge(name), tofu.retained_truth_ratio(ratios(model, name)))
        out[f"{short}_prob"], out[f"{short}_rouge"], out[f"{short}_truth_ratio"] = values
        parts += values
    out["model_utility"] = tofu.model_utility(parts)
    return out


def naive_muse(model, retain, data) -> dict[str, float]:
    """Every MUSE metric from its own pass, one per metric family (the four
    ROUGE values come from one rouge-score call, so from one generation)."""
    params, verbmem = data.params, data.verbmem

    def continuations():
        return model.generate([v.prompt for v in verbmem], max_new_tokens=params["verbmem_max_new_tokens"])

    out = {}
    scores = [rouge(v.gt, g, stemmed=True) for v, g in zip(verbmem, continuations())]
    for key in ("rougeL_f1", "rougeL_recall", "rouge1_f1", "rouge1_recall"):
        out[f"verbmem_{key}"] = float(np.mean([s[key] for s in scores]))
    out["verbmem_levenshtein"] = float(np.mean([levenshtein_similarity(v.gt, g) for v, g in zip(verbmem, continuations())]))
    out["verbmem_lcs_ratio"] = float(np.mean([lcs_ratio(v.gt, g) for v, g in zip(verbmem, continuations())]))
    for name, function in (("extraction_strength", tofu.extraction_strength),
                           ("exact_memorization", tofu.exact_memorization)):
        scored = model.score_continuations([v.prompt for v in verbmem], [v.gt for v in verbmem])
        out[name] = float(np.mean([function(s.argmax, s.token_ids) for s in scored]))
    for short, split in muse.KNOWMEM_SETS.items():
        items = data.knowmem[split]
        answers = model.generate([dusk.qa_prompt(q.question) for q in items], prefix=dusk.qa_block(data.icl(split)),
                                 max_new_tokens=params["knowmem_max_new_tokens"], stop_strings=dusk.QA_STOP_STRINGS)
        for key in ("rougeL_recall", "rougeL_f1"):
            out[f"{short}_{key}"] = float(np.mean([rouge(q.answer, a, stemmed=True)[key]
                                                   for q, a in zip(items, answers)]))

    def auc(m, a, b):
        scores = mia.score_texts(m, {a: data.privleak[a], b: data.privleak[b]}, params["privleak_max_tokens"],
                                 params["mink_k"], truncate=True)
        return mia.auc(scores[a][params["privleak_score"]], scores[b][params["privleak_score"]])

    h_m, h_r = auc(model, "holdout", "forget"), auc(retain, "holdout", "forget")
    out["mia_auc_holdout_forget"] = h_m
    out["privleak"] = mia.privacy_leakage(h_m, h_r)
    out["privleak_magnitude"] = abs(out["privleak"])
    out["retain_deviation"] = mia.retain_deviation(auc(model, "retain", "holdout"), auc(retain, "retain", "holdout"))
    return out


def run(label, evaluate, naive, model, retain, data, repeats):
    shared_model, naive_model = CountingModel(model), CountingModel(model)
    shared_retain, naive_retain = CountingModel(retain), CountingModel(retain)
    t_shared, t_naive = [], []
    for _ in range(repeats):
        started = time.perf_counter()
        fast = evaluate(shared_model, data, References(retain=shared_retain))
        t_shared.append(time.perf_counter() - started)
        started = time.perf_counter()
        slow = naive(naive_model, naive_retain, data)
        t_naive.append(time.perf_counter() - started)
    for name, value in slow.items():
        assert abs(fast[name].value - value) < 1e-4, (label, name, fast[name].value, value)
    passes = (shared_model.passes + shared_retain.passes) // repeats, (naive_model.passes + naive_retain.passes) // repeats
    print(f"| {label} | {len(slow)} | {passes[0]} | {min(t_shared):.2f} | {passes[1]} | {min(t_naive):.2f} | "
          f"{min(t_naive) / min(t_shared):.2f}x |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2", help="smollm2 (SmolLM2-135M-Instruct) or zoo:RECIPE")
    parser.add_argument("--items", type=int, default=10, help="items per set (0: all)")
    parser.add_argument("--repeats", type=int, default=2, help="timed runs of each side; the best is reported")
    args = parser.parse_args()
    from unlearnbench.fixtures import zoo

    if args.model == "smollm2":
        from unlearnbench.models.offline import smollm2_checkpoint

        path = smollm2_checkpoint(DEFAULT_CACHE_DIR)
    else:
        path = zoo.build(args.model.removeprefix("zoo:"))
    # The retain model's passes count on both sides; the same weights serve (the work is what is timed).
    model = ModelHandle.load(str(path), name="model", device="cpu")
    retain = ModelHandle.load(str(path), name="retain", device="cpu")
    folder = zoo.data_dir()
    options = {"max_items": str(args.items)}
    print(f"{args.model}, the zoo's TOFU and MUSE sets, {args.items or 'all'} items a set, CPU "
          f"(torch threads: {__import__('torch').get_num_threads()})\n")
    print("| suite | metrics compared | shared: passes | shared: s | naive: passes | naive: s | speed-up |")
    print("|---|---|---|---|---|---|---|")
    run("tofu", tofu.evaluate, naive_tofu, model, retain, tofu_data.load(folder, options), args.repeats)
    run("muse", muse.evaluate, naive_muse, model, retain, muse_data.load(folder, options), args.repeats)


if __name__ == "__main__":
    main()
