"""The MUSE suite (issue 17): the data layout (local JSON, JSON lines, the
Hub's parquet) and its errors, the zoo gate separating retain from full and
the collapsing recipes, and every metric against a deliberately naive
implementation on SmolLM2 (one item at a time, transformers, rouge-score and
Levenshtein directly, written from the definitions)."""

from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest

from unlearnbench.errors import DataError
from unlearnbench.metrics import mia
from unlearnbench.suites import SUITES
from unlearnbench.suites.muse import data as muse_data


@pytest.fixture(scope="module")
def zoo_muse(cache_dir):
    from unlearnbench.fixtures import zoo

    return zoo.data_dir(cache_dir) / "muse"


def test_the_zoo_writes_the_muse_layout(zoo_muse):
    data = muse_data.load(zoo_muse.parent)
    assert len(data.verbmem) == 128  # 16 forget people's 4 profiles, each cut twice
    assert {split: len(items) for split, items in data.knowmem.items()} == {
        "forget_qa": 128, "forget_qa_icl": 4, "retain_qa": 128, "retain_qa_icl": 4}
    assert {split: len(texts) for split, texts in data.privleak.items()} == {"forget": 64, "retain": 64, "holdout": 64}
    assert data.icl("forget_qa") == []  # the zoo's suite.json: zero-shot
    assert len(muse_data.load(zoo_muse, {"icl_shots": "-1"}).icl("retain_qa")) == 4
    small = muse_data.load(zoo_muse, {"max_items": "3"})
    assert len(small.verbmem) == len(small.knowmem["forget_qa"]) == len(small.privleak["holdout"]) == 3
    assert len(small.knowmem["forget_qa_icl"]) == 4  # the ICL block is a prompt, not a sample: kept whole
    # Members and non-members are disjoint.
    assert not set(data.privleak["forget"]) & (set(data.privleak["retain"]) | set(data.privleak["holdout"]))


def test_the_hub_parquet_layout_reads_as_the_json_one(zoo_muse, tmp_path):
    """muse-bench/MUSE-News: `<config>/<split>-00000-of-00001.parquet`,
    privleak's retain split named retain2, and older JSON files beside the
    parquet ones: the parquet files are what `datasets` reads, so they win."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for path in zoo_muse.glob("*/*.json"):
        rows = json.loads(path.read_text())
        split = "retain2" if path.parent.name == "privleak" and path.stem == "retain" else path.stem
        target = tmp_path / "snapshot" / path.parent.name / f"{split}-00000-of-00001.parquet"
        target.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(rows), target)
        target.with_name(f"{split}.json").write_text(json.dumps(rows[:1]))  # stale: ignored
    from_hub = muse_data.load(f"hf:{tmp_path / 'snapshot'}", {"icl_shots": "0"})
    local = muse_data.load(zoo_muse)
    assert (from_hub.verbmem, from_hub.knowmem, from_hub.privleak) == (local.verbmem, local.knowmem, local.privleak)


def test_bad_muse_data_is_one_message_naming_the_file_and_line(zoo_muse, tmp_path):
    folder = tmp_path / "muse"
    shutil.copytree(zoo_muse, folder)
    (folder / "privleak" / "holdout.json").unlink()
    with pytest.raises(DataError, match=r"privleak/holdout.json: file not found \(the MUSE layout"):
        muse_data.load(folder)
    texts = json.loads((zoo_muse / "privleak" / "holdout.json").read_text())
    # A JSON list of plain strings is MUSE's own privleak format.
    (folder / "privleak" / "holdout.json").write_text(json.dumps([t["text"] for t in texts]))
    assert muse_data.load(folder).privleak["holdout"] == [t["text"] for t in texts]
    rows = json.loads((zoo_muse / "knowmem" / "retain_qa.json").read_text())
    (folder / "knowmem" / "retain_qa.json").unlink()
    lines = [json.dumps(r) for r in rows]
    lines[2] = json.dumps({"question": rows[2]["question"], "answer": ""})
    (folder / "knowmem" / "retain_qa.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=r"retain_qa.jsonl:3: item 2: field 'answer' missing, empty"):
        muse_data.load(folder)
    lines[2] = "{not json"
    (folder / "knowmem" / "retain_qa.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=r"retain_qa.jsonl:3: invalid JSON"):
        muse_data.load(folder)
    with pytest.raises(DataError, match="privleak_score must be one of loss, zlib, mink, minkpp"):
        muse_data.load(zoo_muse, {"privleak_score": "gradnorm"})
    with pytest.raises(DataError, match="unknown MUSE parameter 'k'"):
        muse_data.load(zoo_muse, {"k": "0.2"})


def test_truncated_membership_samples_are_one_per_text_cut_at_the_limit(random_llama):
    """MUSE scores each text once, cut at 2048 tokens; DUSK chunks it."""
    text = " ".join(["Dr. Orin Valcourt studies tidal acoustics at Vesper College."] * 6)
    bos = random_llama.encode("", add_special_tokens=True)
    ids = random_llama.encode(text, add_special_tokens=False)
    assert len(bos) == 1 and len(ids) > 3 * 16
    [sample] = mia.chunk_token_ids(random_llama, text, 16, truncate=True)
    assert sample == bos + ids[:15]
    assert len(mia.chunk_token_ids(random_llama, text, 16)) == len(ids) // 15
    [whole] = mia.chunk_token_ids(random_llama, text, 4096, truncate=True)
    assert whole == bos + ids


def test_the_zoo_gate_passes_retain_and_fails_full_and_the_collapsing_recipes(zoo_gate):
    gate = zoo_gate("muse")
    assert set(gate.verdicts("retain").values()) == {"skip"}  # every check reads the retain model: n/a on it
    full = gate.verdicts("full")
    # The full model's PrivLeak is -100 in every resample (its forget and holdout texts separate perfectly):
    # a zero-width interval decides nothing; it leans fail.
    assert (full["verbmem_forgotten"], full["knowmem_forgotten"], full["privleak_near_zero"]) == (
        "fail", "fail", "leans fail")
    for collapsed in ("ga", "graddiff", "rmu"):
        assert gate.verdicts(collapsed)["utility_preserved"] == "fail", collapsed
    full_m, retain_m = gate.metrics("full"), gate.metrics("retain")
    assert full_m["verbmem_rougeL_f1"].value > 0.8 > 0.5 > retain_m["verbmem_rougeL_f1"].value
    assert full_m["extraction_strength"].value > retain_m["extraction_strength"].value
    assert full_m["privleak"].value < -50


# ------------------------------------------------------------ naive reference
def naive_metrics(model_dir, retain_dir, data) -> dict:
    """Every MUSE metric, one item at a time, from the definitions."""
    import Levenshtein
    import torch
    from rouge_score import rouge_scorer
    from transformers import AutoModelForCausalLM, AutoTokenizer

    params = data.params
    scorer = rouge_scorer.RougeScorer(["rouge1", "rougeL"], use_stemmer=True)

    def load(path):
        return AutoTokenizer.from_pretrained(str(path)), AutoModelForCausalLM.from_pretrained(
            str(path), dtype=torch.float32).eval()

    def greedy(tokenizer, model, prompt, max_new_tokens, stops=()):
        ids = tokenizer(prompt)["input_ids"]
        with torch.no_grad():
            out = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                 max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tokenizer.eos_token_id)
        text = tokenizer.decode(out[0, len(ids):], skip_special_tokens=True)
        for stop in stops:
            text = text.split(stop)[0]
        return text

    def lcs(ref, gen):
        a, b = ref.split(), gen.split()
        table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
        for i in range(len(a)):
            for j in range(len(b)):
                table[i + 1][j + 1] = table[i][j] + 1 if a[i] == b[j] else max(table[i][j + 1], table[i + 1][j])
        return table[-1][-1] / len(a)

    def minkpp(tokenizer, model, text):
        ids = tokenizer(text, add_special_tokens=False)["input_ids"][: params["privleak_max_tokens"]]
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0].float()
        logp = torch.log_softmax(logits[:-1], dim=-1)  # SmolLM2 adds no BOS: the first token is not scored
        token_logp = logp[torch.arange(len(ids) - 1), torch.tensor(ids[1:])]
        p = logp.exp()
        mu = (p * logp).sum(-1)
        sigma = (p * (logp - mu[:, None]) ** 2).sum(-1).sqrt()
        z = ((token_logp - mu) / sigma).numpy()
        return float(np.sort(z)[: max(1, math.ceil(params["mink_k"] * len(z)))].mean())

    def auc(a, b):
        return np.mean([[1.0 if x > y else 0.5 if x == y else 0.0 for y in b] for x in a])

    tokenizer, model = load(model_dir)
    out = {}
    scores = {"rougeL_f1": [], "rougeL_recall": [], "rouge1_f1": [], "rouge1_recall": [], "levenshtein": [],
              "lcs_ratio": []}
    es, em = [], []
    for item in data.verbmem:
        generation = greedy(tokenizer, model, item.prompt, params["verbmem_max_new_tokens"])
        rouge = scorer.score(item.gt, generation)
        for kind in ("rougeL", "rouge1"):
            scores[f"{kind}_f1"].append(rouge[kind].fmeasure)
            scores[f"{kind}_recall"].append(rouge[kind].recall)
        scores["levenshtein"].append(1 - Levenshtein.distance(item.gt, generation) / max(len(item.gt), len(generation)))
        scores["lcs_ratio"].append(lcs(item.gt, generation))
        # docs/conventions.md: the joined text, split where lm-eval's _encode_pair splits it.
        whole, context = tokenizer(item.prompt + item.gt)["input_ids"], tokenizer(item.prompt.rstrip())["input_ids"]
        gold = whole[len(context):]
        with torch.no_grad():
            argmax = model(torch.tensor([whole])).logits[0, len(context) - 1: -1].argmax(-1).tolist()
        em.append(np.mean(np.equal(argmax, gold)))
        n = len(gold)
        k = next((k for k in range(n) if argmax[k:] == gold[k:]), n - 1)
        es.append(1 - k / n)
    out |= {f"verbmem_{name}": np.mean(values) for name, values in scores.items()}
    out["extraction_strength"], out["exact_memorization"] = np.mean(es), np.mean(em)
    for short, split in (("knowmem_forget", "forget_qa"), ("knowmem_retain", "retain_qa")):
        icl = "".join(f"Question: {q.question}\nAnswer: {q.answer}\n\n" for q in data.icl(split))
        replies = [greedy(tokenizer, model, f"{icl}Question: {q.question}\nAnswer: ", params["knowmem_max_new_tokens"],
                          ("\n\n", "\nQuestion", "Question:")) for q in data.knowmem[split]]
        rouge = [scorer.score(q.answer, r)["rougeL"] for q, r in zip(data.knowmem[split], replies)]
        out[f"{short}_rougeL_f1"] = np.mean([s.fmeasure for s in rouge])
        out[f"{short}_rougeL_recall"] = np.mean([s.recall for s in rouge])

    retain_tokenizer, retain_model = load(retain_dir)
    member = {role: {name: [minkpp(tok, mod, t) for t in texts] for name, texts in data.privleak.items()}
              for role, (tok, mod) in {"model": (tokenizer, model), "retain": (retain_tokenizer, retain_model)}.items()}
    h_m, h_r = (auc(member[r]["holdout"], member[r]["forget"]) for r in ("model", "retain"))
    out["mia_auc_holdout_forget"] = h_m
    out["privleak"] = (h_m - h_r) / h_r * 100
    out["privleak_magnitude"] = abs(out["privleak"])
    a_m, a_r = (auc(member[r]["retain"], member[r]["holdout"]) for r in ("model", "retain"))
    out["retain_deviation"] = abs(a_m - a_r) / a_r * 100
    return out


@pytest.mark.real_model
def test_every_muse_metric_equals_a_naive_implementation_on_smollm2(smollm2, smollm2_dir, perturbed_smollm2_dir,
                                                                    zoo_muse, tmp_path, reference_results):
    """SmolLM2-135M-Instruct on the zoo's MUSE set (2 items a split), every
    ICL example before each KnowMem question, VerbMem and KnowMem replies cut
    at 32 and 16 tokens, PrivLeak texts cut at 32 tokens (most are longer, so
    the cut is exercised), a noise-perturbed copy as the retain model."""
    from unlearnbench.cache import DiskCache, SuiteMemo
    from unlearnbench.metrics.core import References
    from unlearnbench.models.handle import ModelHandle
    from unlearnbench.suites.muse import metrics as muse

    data = muse_data.load(zoo_muse, {"max_items": "2", "icl_shots": "-1", "privleak_max_tokens": "32",
                                     "verbmem_max_new_tokens": "32", "knowmem_max_new_tokens": "16"})
    assert sum(len(smollm2.encode(t, add_special_tokens=False)) > 32 for t in data.privleak["forget"]) >= 1
    retain = ModelHandle.load(str(perturbed_smollm2_dir), name="retain", device="cpu")
    refs = References(retain=retain, memo=SuiteMemo(DiskCache(tmp_path / "cache"), "muse", data.fingerprint, 1))
    ours = muse.evaluate(smollm2, data, refs)
    naive = reference_results.get(
        "muse-naive", lambda: naive_metrics(smollm2_dir, perturbed_smollm2_dir, data), code=[naive_metrics],
        inputs=(data.verbmem, data.knowmem, data.privleak, data.params), models=[smollm2_dir, perturbed_smollm2_dir])
    assert set(naive) == set(SUITES["muse"].metric_names)
    for name, value in naive.items():
        assert ours[name].value == pytest.approx(value, abs=1e-4), name
