"""OpenUnlearning's TOFU and MUSE evaluation path, step by step, over a
Hugging Face model and tokenizer: the independent side of
tests/suites/test_openunlearning.py.

Written from reading locuslab/open-unlearning (src/data/utils.py,
src/data/collators.py, src/data/qa.py, src/data/pretraining.py,
src/evals/metrics/utils.py, memorization.py, privacy.py, utility.py, mia/,
configs/eval/{tofu,muse}_metrics, configs/model): its dataset items, its
collator (right padding, attention_mask = input_ids != pad_id), its loss and
token-wise log-prob functions, its aggregations, scipy's ks_2samp, sklearn's
roc_auc_score, rouge-score and `model.generate`. Nothing here imports
unlearnbench.
"""

from __future__ import annotations

import numpy as np
import torch
from rouge_score import rouge_scorer
from scipy.stats import hmean, ks_2samp
from sklearn.metrics import roc_auc_score

IGNORE_INDEX = -100

# configs/model/*.yaml template_args used by the tests.
QWEN = {"apply_chat_template": True, "system_prompt": "You are a helpful assistant."}
LLAMA3 = {"apply_chat_template": True, "system_prompt": "You are a helpful assistant.", "date_string": "10 Apr 2025"}
BASE = {"apply_chat_template": False, "user_start_tag": "Question: ", "user_end_tag": "\n",
        "asst_start_tag": "Answer: ", "asst_end_tag": "\n\n"}


# ------------------------------------------------------------ src/data/utils.py
def preprocess_chat_instance(tokenizer, template, prompts, responses, max_length=512, predict_with_generate=False):
    if template["apply_chat_template"]:
        chat = [{"role": "system", "content": template["system_prompt"]}] if template.get("system_prompt") else []
        for prompt, response in zip(prompts, responses):
            chat += [{"role": "user", "content": prompt}, {"role": "assistant", "content": response}]
        date = {"date_string": template["date_string"]} if template.get("date_string") else {}
        # transformers 4 returned the id list that return_dict=False gives in 5.
        chat_ids = tokenizer.apply_chat_template(chat, tokenize=True, add_generation_prompt=False,
                                                 return_dict=False, **date)
        prompt_ids = tokenizer.apply_chat_template(chat[:-1], tokenize=True, add_generation_prompt=True,
                                                   return_dict=False, **date)
    else:
        wrapped = ""
        for prompt, response in zip(prompts[:-1], responses[:-1]):
            wrapped += (template["user_start_tag"] + prompt + template["user_end_tag"] + template["asst_start_tag"]
                        + response + template["asst_end_tag"])
        wrapped += template["user_start_tag"] + prompts[-1] + template["user_end_tag"] + template["asst_start_tag"]
        chat_ids = tokenizer(wrapped + responses[-1], add_special_tokens=True, max_length=max_length,
                             truncation=True)["input_ids"]
        prompt_ids = tokenizer(wrapped, add_special_tokens=True, max_length=max_length, truncation=True)["input_ids"]
    chat_ids = list(chat_ids)
    if chat_ids[-1] != tokenizer.eos_token_id:
        chat_ids += [tokenizer.eos_token_id]
    if predict_with_generate:
        return {"input_ids": list(prompt_ids), "labels": chat_ids}
    return {"input_ids": chat_ids, "labels": [IGNORE_INDEX] * len(prompt_ids) + chat_ids[len(prompt_ids):]}


def preprocess_pretraining_instance(tokenizer, prefix, text, max_length, predict_with_generate=False,
                                    insert_space=False):
    full = tokenizer(prefix + (" " if insert_space else "") + text, add_special_tokens=True)["input_ids"]
    prefix_ids = tokenizer(prefix, add_special_tokens=True)["input_ids"]
    full = full[: len(prefix_ids) + max_length]
    matched = len(prefix_ids) or 1
    labels = [IGNORE_INDEX] * matched + full[matched:]
    return {"input_ids": prefix_ids if predict_with_generate else full, "labels": labels}


# ------------------------------------------------------- src/data/collators.py
def collate(items, pad_id, padding_side="right"):
    def pad(rows, value):
        rows = [torch.tensor(r) for r in rows]
        if padding_side == "right":
            return torch.nn.utils.rnn.pad_sequence(rows, batch_first=True, padding_value=value)
        return torch.nn.utils.rnn.pad_sequence([r.flip(0) for r in rows], batch_first=True,
                                               padding_value=value).flip(1)

    input_ids = pad([i["input_ids"] for i in items], pad_id)
    return {"input_ids": input_ids, "attention_mask": input_ids.ne(pad_id),
            "labels": pad([i["labels"] for i in items], IGNORE_INDEX)}


def batches(items, batch_size):
    return [items[i : i + batch_size] for i in range(0, len(items), batch_size)]


# ------------------------------------------------- src/evals/metrics/utils.py
def evaluate_probability(model, batch):
    with torch.no_grad():
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    labels = batch["labels"]
    losses = torch.nn.CrossEntropyLoss(ignore_index=IGNORE_INDEX, reduction="none")(
        logits[..., :-1, :].transpose(-1, -2), labels[..., 1:]).sum(-1)
    avg = losses / (labels != IGNORE_INDEX).sum(-1)
    return [{"prob": float(torch.exp(-a)), "avg_loss": float(a)} for a in avg]


def tokenwise(model, batch, vocab: bool):
    """tokenwise_logprobs (vocab=False) / tokenwise_vocab_logprobs (vocab=True), with the labels."""
    with torch.no_grad():
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    log_probs = torch.log_softmax(logits, dim=-1)[:, :-1, :]
    target = torch.gather(log_probs, 2, batch["input_ids"][:, 1:].unsqueeze(-1)).squeeze(-1)
    out = []
    for i in range(logits.shape[0]):
        labels = batch["labels"][i]
        actual = (labels != IGNORE_INDEX).nonzero(as_tuple=True)[0][:-1]  # -1: no EOS prediction
        if actual.numel() == 0:
            out.append((torch.zeros(0, logits.shape[-1]) if vocab else torch.zeros(0), torch.zeros(0)))
            continue
        start, end = actual[0].item(), actual[-1].item()
        rows = log_probs[i, start - 1 : end] if vocab else target[i, start - 1 : end]
        out.append((rows, labels[actual]))
    return out


def probabilities(model, items, pad_id, batch_size=32):
    return [r for b in batches(items, batch_size) for r in evaluate_probability(model, collate(b, pad_id))]


# ------------------------------------------------ memorization.py, privacy.py
def truth_ratio(correct, wrong, aggregator):
    """correct: [{avg_loss}] per item; wrong: [[{avg_loss}] per perturbed answer] per item."""
    correct_loss = np.array([c["avg_loss"] for c in correct])
    wrong_loss = np.array([[w["avg_loss"] for w in ws] for ws in wrong]).mean(axis=1)  # aggregate_to_1D
    tr = np.exp(-wrong_loss) / (np.exp(-correct_loss) + 1e-10)
    if aggregator == "closer_to_1_better":
        return float(np.mean(np.minimum(tr, 1 / (tr + 1e-10)))), tr
    return float(np.mean(np.maximum(0, 1 - tr))), tr


def probability_w_options(correct, wrong):
    c = np.array([x["prob"] for x in correct])
    w = np.array([[x["prob"] for x in ws] for ws in wrong]).sum(axis=1)
    return float(np.mean(c / (c + w + 1e-10)))


def extraction_strength(model, items, pad_id, batch_size=32):
    scores = []
    for b in batches(items, batch_size):
        for log_probs, labels in tokenwise(model, collate(b, pad_id), vocab=True):
            preds = torch.argmax(log_probs, dim=-1)
            k = 0
            for k in range(len(labels)):
                if torch.equal(preds[k:], labels[k:]):
                    break
            scores.append(1 - k / len(labels))
    return float(np.mean(scores))


def exact_memorization(model, items, pad_id, batch_size=32):
    scores = []
    for b in batches(items, batch_size):
        for log_probs, labels in tokenwise(model, collate(b, pad_id), vocab=True):
            scores.append(float((torch.argmax(log_probs, dim=-1) == labels).sum() / len(labels)))
    return float(np.mean(scores))


def min_k_scores(model, items, pad_id, k=0.4, batch_size=32):
    """mia/min_k.py MinKProbAttack.compute_score over tokenwise_logprobs."""
    out = []
    for b in batches(items, batch_size):
        for lp, _ in tokenwise(model, collate(b, pad_id), vocab=False):
            lp = lp.float().numpy()
            out.append(0 if lp.size == 0 else -np.mean(np.sort(lp)[: max(1, int(len(lp) * k))]))
    return out


def mia_auc(forget_scores, holdout_scores):
    return roc_auc_score([0] * len(forget_scores) + [1] * len(holdout_scores), forget_scores + holdout_scores)


def privleak(score, ref):
    score, ref = 1 - score, 1 - ref
    return (score - ref) / (ref + 1e-10) * 100


def rouge_generations(model, tokenizer, items, max_new_tokens, stopwords=None, batch_size=32):
    """eval_text_similarity: left-padded prompts, greedy generate, decoded
    with clean-up, cut at EOS text and stop words; ROUGE with the stemmer."""
    scorer = rouge_scorer.RougeScorer(["rouge1", "rougeL"], use_stemmer=True)
    out = []
    for b in batches(items, batch_size):
        batch = collate(b, tokenizer.pad_token_id, padding_side="left")
        input_texts = tokenizer.batch_decode(batch["input_ids"], skip_special_tokens=True,
                                             clean_up_tokenization_spaces=True)
        tokens = [label[label != IGNORE_INDEX] for label in batch["labels"]]
        full_texts = tokenizer.batch_decode(tokens, skip_special_tokens=True, clean_up_tokenization_spaces=True)
        truths = [f.replace(i, "").strip() for i, f in zip(input_texts, full_texts)]
        with torch.no_grad():
            output = model.generate(batch["input_ids"], attention_mask=batch["attention_mask"], do_sample=False,
                                    max_new_tokens=max_new_tokens, pad_token_id=tokenizer.eos_token_id)
        texts = tokenizer.batch_decode(output[:, batch["input_ids"].shape[-1]:], skip_special_tokens=True,
                                       clean_up_tokenization_spaces=True)
        for text, truth in zip(texts, truths):
            for word in [tokenizer.decode([tokenizer.eos_token_id])] + list(stopwords or []):
                if word and word in text:
                    text = text.split(word)[0]
            s = scorer.score(truth, text.strip())
            out.append({"rouge1_recall": s["rouge1"].recall, "rougeL_f1": s["rougeL"].fmeasure,
                        "rougeL_recall": s["rougeL"].recall, "generation": text.strip(), "truth": truth})
    return out


# --------------------------------------------------------------- TOFU, MUSE
def tofu(model, tokenizer, retain_model, retain_tokenizer, sets, template, max_new_tokens):
    """The 17 TOFU numbers OpenUnlearning's tofu.yaml (+ exact_memorization)
    reports, under our metric names, and the generations ROUGE read
    ({set: [text]}). `sets`: {name: [row dicts of the TOFU files]}."""

    def qa(tok, rows, key, generate=False):
        return [preprocess_chat_instance(tok, template, [r["question"]], [r[key]], predict_with_generate=generate)
                for r in rows]

    def options(tok, rows):  # perturbed answers: one dataset item per answer index
        return [[preprocess_chat_instance(tok, template, [r["question"]], [a]) for a in r["perturbed_answer"]]
                for r in rows]

    def prob_lists(m, tok, rows):
        per_option = list(zip(*options(tok, rows)))
        scored = [probabilities(m, list(column), tok.pad_token_id) for column in per_option]
        return [list(x) for x in zip(*scored)]

    def forget_tr(m, tok):
        rows = sets["forget"]
        para = probabilities(m, qa(tok, rows, "paraphrased_answer"), tok.pad_token_id)
        return truth_ratio(para, prob_lists(m, tok, rows), "closer_to_1_better")

    pad = tokenizer.pad_token_id
    out, replies = {}, {}

    def rouge_recall(name):
        generated = rouge_generations(model, tokenizer, qa(tokenizer, sets[name], "answer", True), max_new_tokens)
        replies[name] = [g["generation"] for g in generated]
        return float(np.mean([g["rougeL_recall"] for g in generated]))

    forget_items = qa(tokenizer, sets["forget"], "answer")
    out["forget_prob"] = float(np.mean([p["prob"] for p in probabilities(model, forget_items, pad)]))
    out["forget_rouge"] = rouge_recall("forget")
    out["forget_truth_ratio"], model_tr = forget_tr(model, tokenizer)
    _, retain_tr = forget_tr(retain_model, retain_tokenizer)
    out["forget_quality"] = float(ks_2samp(model_tr, retain_tr).pvalue)
    out["extraction_strength"] = extraction_strength(model, forget_items, pad)
    out["exact_memorization"] = exact_memorization(model, forget_items, pad)

    def auc(m, tok):
        return mia_auc(min_k_scores(m, qa(tok, sets["forget"], "answer"), tok.pad_token_id),
                       min_k_scores(m, qa(tok, sets["holdout"], "answer"), tok.pad_token_id))

    out["privleak"] = privleak(auc(model, tokenizer), auc(retain_model, retain_tokenizer))
    for name, short in (("retain", "retain"), ("real_authors", "ra"), ("world_facts", "wf")):
        rows = sets[name]
        correct = probabilities(model, qa(tokenizer, rows, "answer"), pad)
        wrong = prob_lists(model, tokenizer, rows)
        if name == "retain":
            out["retain_prob"] = float(np.mean([c["prob"] for c in correct]))
            para = probabilities(model, qa(tokenizer, rows, "paraphrased_answer"), pad)
            out["retain_truth_ratio"] = truth_ratio(para, wrong, "true_better")[0]
        else:
            out[f"{short}_prob"] = probability_w_options(correct, wrong)
            out[f"{short}_truth_ratio"] = truth_ratio(correct, wrong, "true_better")[0]
        out[f"{short}_rouge"] = rouge_recall(name)
    out["model_utility"] = float(hmean([out[f"{s}_{m}"] for s in ("retain", "ra", "wf")
                                        for m in ("prob", "rouge", "truth_ratio")]))
    return out, replies


def muse(model, tokenizer, retain_model, retain_tokenizer, data, template, verbmem_tokens, knowmem_tokens,
         max_length=2048):
    """OpenUnlearning's muse.yaml numbers (+ exact_memorization and the other
    ROUGE fields eval_text_similarity returns), under our metric names, and
    the VerbMem generations.
    `data`: {verbmem: [{prompt, gt}], forget_qa, forget_qa_icl, retain_qa,
    retain_qa_icl: [{question, answer}], privleak_forget, privleak_holdout: [text]}."""
    pad = tokenizer.pad_token_id
    verbmem = [preprocess_pretraining_instance(tokenizer, r["prompt"], r["gt"], 2048, insert_space=True)
               for r in data["verbmem"]]
    out = {"extraction_strength": extraction_strength(model, verbmem, pad, 8),
           "exact_memorization": exact_memorization(model, verbmem, pad, 8)}
    generated = rouge_generations(model, tokenizer, [
        preprocess_pretraining_instance(tokenizer, r["prompt"], r["gt"], 2048, predict_with_generate=True,
                                        insert_space=True) for r in data["verbmem"]], verbmem_tokens, batch_size=8)
    for key in ("rougeL_f1", "rougeL_recall", "rouge1_recall"):
        out[f"verbmem_{key}"] = float(np.mean([g[key] for g in generated]))
    verbmem_replies = [g["generation"] for g in generated]
    for short, split in (("knowmem_forget", "forget_qa"), ("knowmem_retain", "retain_qa")):
        icl = data[f"{split}_icl"]
        items = [preprocess_chat_instance(tokenizer, template, [e["question"] for e in icl] + [r["question"]],
                                          [e["answer"] for e in icl] + [r["answer"]], predict_with_generate=True)
                 for r in data[split]]
        generated = rouge_generations(model, tokenizer, items, knowmem_tokens,
                                      stopwords=["\n\n", "\nQuestion", "Question:"], batch_size=16)
        for key in ("rougeL_f1", "rougeL_recall"):
            out[f"{short}_{key}"] = float(np.mean([g[key] for g in generated]))

    def auc(m, tok):
        def scores(texts):
            items = [preprocess_pretraining_instance(tok, "", t, max_length) for t in texts]
            return min_k_scores(m, items, tok.pad_token_id, batch_size=8)
        return mia_auc(scores(data["privleak_forget"]), scores(data["privleak_holdout"]))

    model_auc, retain_auc = auc(model, tokenizer), auc(retain_model, retain_tokenizer)
    out["privleak"] = privleak(model_auc, retain_auc)
    out["mia_auc_holdout_forget"] = 1 - model_auc
    return out, verbmem_replies
