"""The TOFU suite (issue 17): the data layout and its errors, the zoo gate
separating retain from full and the collapsing recipes, and every metric of
the default convention against a deliberately naive implementation on
SmolLM2 (one item at a time, transformers and rouge-score directly, written
from docs/conventions.md and docs/suites/tofu.md). The reference convention is OpenUnlearning's code
path: tests/suites/test_openunlearning.py."""

from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest

from unlearnbench.errors import DataError
from unlearnbench.suites import SUITES
from unlearnbench.suites.tofu import data as tofu_data


@pytest.fixture(scope="module")
def zoo_tofu(cache_dir):
    from unlearnbench.fixtures import zoo

    return zoo.data_dir(cache_dir) / "tofu"


def test_the_zoo_writes_the_tofu_layout(zoo_tofu):
    data = tofu_data.load(zoo_tofu.parent)
    assert {name: len(items) for name, items in data.sets.items()} == {
        "forget": 128, "retain": 128, "real_authors": 64, "world_facts": 64, "holdout": 128}
    for item in data.sets["forget"]:
        assert item.paraphrased and item.answer in item.paraphrased and len(item.perturbed) == 3
        assert all(item.answer not in p for p in item.perturbed)
    assert tofu_data.load(zoo_tofu, {"max_items": "5"}).sets["retain"][4].id == "retain-4"
    # hf:ID resolves through the HF cache; a local snapshot folder is read the same way.
    assert tofu_data.load(f"hf:{zoo_tofu}").sets == data.sets


def test_bad_tofu_data_is_one_message_naming_the_file_and_line(zoo_tofu, tmp_path):
    folder = tmp_path / "tofu"
    shutil.copytree(zoo_tofu, folder)
    (folder / "holdout10.json").unlink()
    with pytest.raises(DataError, match=r"holdout10.json: file not found"):
        tofu_data.load(folder)
    shutil.copy(zoo_tofu / "holdout10.json", folder)
    rows = (folder / "retain_perturbed.json").read_text().splitlines()
    broken = json.loads(rows[2])
    broken["perturbed_answer"] = "one string, not a list"
    rows[2] = json.dumps(broken)
    (folder / "retain_perturbed.json").write_text("\n".join(rows) + "\n")
    with pytest.raises(DataError, match=r"retain_perturbed.json:3: field 'perturbed_answer'"):
        tofu_data.load(folder)
    with pytest.raises(DataError, match="forget_split"):
        tofu_data.load(zoo_tofu, {"forget_split": "forget20"})
    with pytest.raises(DataError, match="hf:nobody/no-such-dataset: not a local folder"):
        tofu_data.load("hf:nobody/no-such-dataset")


def test_the_zoo_gate_passes_retain_and_fails_full_and_the_collapsing_recipes(zoo_gate):
    gate = zoo_gate("tofu")
    # The retain model is both checks' yardstick: n/a (reference), not a pass on a difference of 0.
    assert gate.verdicts("retain") == {"forget_quality_like_retain": "skip", "model_utility_kept": "skip"}
    assert gate.verdicts("full")["forget_quality_like_retain"] == "fail"
    # graddiff, on the zoo's v2 data, damages DUSK's shared facts, not TOFU's. ga collapses (utility 0); rmu
    # loses 0.12 of 0.44, against a margin of 0.1: its paired interval [-0.16, -0.09] straddles -0.1.
    assert gate.verdicts("ga")["model_utility_kept"] == "fail"
    assert gate.verdicts("rmu")["model_utility_kept"] == "leans fail"
    full, retain = gate.metrics("full"), gate.metrics("retain")
    assert full["forget_rouge"].value > 0.9 > 0.2 > retain["forget_rouge"].value
    assert full["forget_quality"].value < 0.01
    # The zoo's full model is near-certain of every token it trained on, and
    # Min-K%++ (privleak's default score) normalises a token's log-prob by the
    # spread of the distribution it came from: at p ~ 1 the spread is ~0 and
    # the z-score ~0, so memorised answers do not score above never-seen ones
    # (measured: AUC(forget vs holdout) 0.43 under Min-K%++, 0.82 under loss).
    # Under loss, full's leak is what it is: PrivLeak far below 0.
    by_loss = zoo_gate("tofu", privleak_score="loss")
    assert by_loss.metrics("full")["privleak"].value < -50
    assert abs(by_loss.metrics("retain")["privleak"].value) < 1e-9


# ------------------------------------------------------------ naive reference
def naive_metrics(model_dir, retain_dir, data) -> dict:
    """Every TOFU metric, one item at a time, from the formulas."""
    import torch
    from rouge_score import rouge_scorer
    from scipy.stats import hmean, ks_2samp
    from transformers import AutoModelForCausalLM, AutoTokenizer

    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)

    def load(path):
        return AutoTokenizer.from_pretrained(str(path)), AutoModelForCausalLM.from_pretrained(
            str(path), dtype=torch.float32).eval()

    def prompt_text(tokenizer, question):
        return tokenizer.apply_chat_template([{"role": "user", "content": question}], tokenize=False,
                                             add_generation_prompt=True)

    def encode(tokenizer, text):
        return tokenizer(text, add_special_tokens=not text.startswith(tokenizer.bos_token or "\0"))["input_ids"]

    seen = {}  # one forward pass per (model, question, answer): the formulas ask for some pairs several times

    def answer_stats(tokenizer, model, question, answer):
        key = (id(model), question, answer)
        if key not in seen:
            seen[key] = answer_stats_uncached(tokenizer, model, question, answer)
        return seen[key]

    def answer_stats_uncached(tokenizer, model, question, answer):
        # docs/conventions.md: the joined text, split where lm-eval's _encode_pair splits it.
        text = prompt_text(tokenizer, question)
        whole, context = encode(tokenizer, text + answer), encode(tokenizer, text.rstrip())
        target = whole[len(context):]
        with torch.no_grad():
            logits = model(torch.tensor([whole])).logits[0].float()
        logp = torch.log_softmax(logits[len(context) - 1: -1], dim=-1)
        token_logp = logp[torch.arange(len(target)), torch.tensor(target)]
        p = logp.exp()
        mu = (p * logp).sum(-1)
        sigma = (p * (logp - mu[:, None]) ** 2).sum(-1).sqrt()
        z = ((token_logp - mu) / sigma).numpy()
        k = max(1, math.ceil(0.2 * len(target)))
        return {"nll": float(-token_logp.mean()), "argmax": logp.argmax(-1).tolist(), "gold": target,
                "minkpp": float(np.sort(z)[:k].mean())}

    def greedy(tokenizer, model, question):
        ids = encode(tokenizer, prompt_text(tokenizer, question).rstrip(" \t"))
        with torch.no_grad():
            out = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                 max_new_tokens=data.params["max_new_tokens"], do_sample=False, pad_token_id=tokenizer.eos_token_id)
        text = tokenizer.decode(out[0, len(ids):], skip_special_tokens=True)
        for stop in ("\nUser:", "\nQuestion:"):
            text = text.split(stop)[0]
        return text

    def true_and_wrong(tokenizer, model, item):
        base = answer_stats(tokenizer, model, item.question, item.paraphrased or item.answer)["nll"]
        wrong = [answer_stats(tokenizer, model, item.question, p)["nll"] for p in item.perturbed]
        return math.exp(-base), math.exp(-np.mean(wrong))

    def truth_ratio(tokenizer, model, item):
        true, wrong = true_and_wrong(tokenizer, model, item)
        return wrong / true

    tokenizer, model = load(model_dir)
    out = {}
    forget = data.sets["forget"]
    stats = [answer_stats(tokenizer, model, q.question, q.answer) for q in forget]
    out["forget_prob"] = np.mean([math.exp(-s["nll"]) for s in stats])
    out["forget_rouge"] = np.mean([scorer.score(q.answer, greedy(tokenizer, model, q.question))["rougeL"].recall
                                   for q in forget])
    ratios = [truth_ratio(tokenizer, model, q) for q in forget]
    out["forget_truth_ratio"] = np.mean([min(r, 1 / r) for r in ratios])
    out["forget_truth_ratio_prob_mean"] = np.mean([t / (t + w) for t, w in (true_and_wrong(tokenizer, model, q)
                                                                           for q in forget)])
    out["exact_memorization"] = np.mean([np.mean(np.equal(s["argmax"], s["gold"])) for s in stats])
    es = []
    for s in stats:
        n = len(s["gold"])
        k = next((k for k in range(n) if s["argmax"][k:] == s["gold"][k:]), n - 1)
        es.append(1 - k / n)
    out["extraction_strength"] = np.mean(es)
    utility = []
    for name, short in (("retain", "retain"), ("real_authors", "ra"), ("world_facts", "wf")):
        items = data.sets[name]
        if name == "retain":
            prob = np.mean([math.exp(-answer_stats(tokenizer, model, q.question, q.answer)["nll"]) for q in items])
        else:
            prob = np.mean([
                math.exp(-answer_stats(tokenizer, model, q.question, q.answer)["nll"]) / (
                    math.exp(-answer_stats(tokenizer, model, q.question, q.answer)["nll"])
                    + sum(math.exp(-answer_stats(tokenizer, model, q.question, p)["nll"]) for p in q.perturbed))
                for q in items])
        rouge = np.mean([scorer.score(q.answer, greedy(tokenizer, model, q.question))["rougeL"].recall
                         for q in items])
        tr = np.mean([max(0.0, 1 - truth_ratio(tokenizer, model, q)) for q in items])
        out[f"{short}_prob"], out[f"{short}_rouge"], out[f"{short}_truth_ratio"] = prob, rouge, tr
        utility += [prob, rouge, tr]
    out["model_utility"] = 0.0 if min(utility) == 0 else hmean(utility)

    def membership_auc(tok, mod):
        f = [answer_stats(tok, mod, q.question, q.answer)["minkpp"] for q in forget]
        h = [answer_stats(tok, mod, q.question, q.answer)["minkpp"] for q in data.sets["holdout"]]
        return np.mean([[1.0 if a > b else 0.5 if a == b else 0.0 for b in h] for a in f])

    retain_tokenizer, retain_model = load(retain_dir)
    retain_ratios = [truth_ratio(retain_tokenizer, retain_model, q) for q in forget]
    out["forget_quality"] = ks_2samp(ratios, retain_ratios).pvalue
    # the largest gap between the two empirical CDFs, over every value either takes
    points = sorted(ratios + retain_ratios)
    out["forget_ks_distance"] = max(abs(sum(r <= x for r in ratios) / len(ratios)
                                        - sum(r <= x for r in retain_ratios) / len(retain_ratios)) for x in points)
    auc_m, auc_r = 1 - membership_auc(tokenizer, model), 1 - membership_auc(retain_tokenizer, retain_model)
    out["privleak"] = (auc_m - auc_r) / auc_r * 100
    return out


@pytest.mark.real_model
def test_every_tofu_metric_equals_a_naive_implementation_on_smollm2(smollm2, smollm2_dir, perturbed_smollm2_dir,
                                                                    zoo_tofu, tmp_path, reference_results):
    """SmolLM2-135M-Instruct with its chat template on the zoo's TOFU set
    (2 items a set, replies cut at 24 tokens: every code path, a fraction of
    the work), a noise-perturbed copy as the retain model."""
    from unlearnbench.cache import DiskCache, SuiteMemo
    from unlearnbench.metrics.core import References
    from unlearnbench.models.handle import ModelHandle
    from unlearnbench.suites.tofu import metrics as tofu

    retain_dir = perturbed_smollm2_dir
    retain = ModelHandle.load(str(retain_dir), name="retain", device="cpu")
    data = tofu_data.load(zoo_tofu, {"max_items": "2", "max_new_tokens": "24"})
    refs = References(retain=retain, memo=SuiteMemo(DiskCache(tmp_path / "cache"), "tofu", data.fingerprint, 1))
    ours = tofu.evaluate(smollm2, data, refs)
    naive = reference_results.get("tofu-naive", lambda: naive_metrics(smollm2_dir, retain_dir, data),
                                  code=[naive_metrics], inputs=(data.sets, data.params),
                                  models=[smollm2_dir, retain_dir])
    # forget_ks_distance, the statistic behind forget quality, is checked against scipy item by item in
    # tests/unit/test_tofu_statistics.py; here against the naive code where its stored result has it.
    assert set(naive) | {"forget_ks_distance"} == set(SUITES["tofu"].metric_names)
    for name, value in naive.items():
        assert ours[name].value == pytest.approx(value, abs=1e-4), name
