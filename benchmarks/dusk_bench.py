"""DUSK suite wall time for one checkpoint, by stage, fast path vs a naive path.

Naive = what the DUSK reference code does: one unbatched generation pass per
verbatim metric family (ROUGE, Levenshtein, LCS, embedding cosine) for every
prompt, and every knowledge question generated alone with the ICL block
re-encoded. Fast = unlearnbench: one batched generation pass feeds every
verbatim metric; all questions batched behind one cached ICL prefix. Both run
in the same process on the same data; the script checks the scores agree.

    python benchmarks/dusk_bench.py                       # zoo `full` on the zoo data
    python benchmarks/dusk_bench.py --smollm2 --items 4   # SmolLM2-135M on a real DUSK subset
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path

import numpy as np

from unlearnbench.cache import DiskCache
from unlearnbench.metrics.text import Embedder, lcs_ratio, levenshtein_similarity, rouge
from unlearnbench.models.handle import ModelHandle
from unlearnbench.suites.dusk import data as dusk_data
from unlearnbench.suites.dusk import metrics as dusk

REAL_DUSK = Path(__file__).resolve().parents[2] / "shared" / "data" / "dusk"


def timed(fn):
    started = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - started


def subset(data, items: int, qa_items: int, doc_words: int):
    """The first items of every set, and documents cut to `doc_words` words."""
    cut = lambda text: " ".join(text.split(" ")[:doc_words])  # noqa: E731
    return dataclasses.replace(
        data,
        verbatim=data.verbatim[:items],
        qa={k: v[:qa_items] for k, v in data.qa.items()},
        documents={k: cut(v) for k, v in data.documents.items()},
        holdout=cut(data.holdout),
    )


def naive_verbatim(handle, data, references, embedder):
    """One batch-1 generation pass per metric family, as the reference code does."""
    params = data.params
    per_family = {}
    for family in ("rouge", "levenshtein", "lcs", "embedding"):
        gens = [handle.generate([v.prompt], max_new_tokens=params["verbatim_max_new_tokens"])[0]
                for v in data.verbatim]
        if family == "rouge":
            per_family[family] = [rouge(r, g)["rougeL_f1"] for r, g in zip(references, gens)]
        elif family == "levenshtein":
            per_family[family] = [levenshtein_similarity(r, g) for r, g in zip(references, gens)]
        elif family == "lcs":
            per_family[family] = [lcs_ratio(r, g) for r, g in zip(references, gens)]
        else:
            per_family[family] = [embedder.cosine([r], [g])[0] for r, g in zip(references, gens)]
    return per_family


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smollm2", action="store_true", help="SmolLM2-135M-Instruct on real DUSK data")
    parser.add_argument("--items", type=int, default=4, help="verbatim items (SmolLM2 run)")
    parser.add_argument("--questions", type=int, default=6, help="questions per QA set (SmolLM2 run)")
    parser.add_argument("--cache-dir", type=Path, default=None, help="zoo / offline model cache")
    args = parser.parse_args()

    if args.smollm2:
        from unlearnbench.models.offline import smollm2_checkpoint

        path = smollm2_checkpoint(args.cache_dir)
        data = subset(dusk_data.load(REAL_DUSK), args.items, args.questions, doc_words=1500)
        retain_path = path  # the benchmark times the cache, not a real retain model
    else:
        from unlearnbench.fixtures import zoo

        paths = zoo.build_many(["full", "retain"], args.cache_dir)
        path, retain_path = paths["full"], paths["retain"]
        data = dusk_data.load(zoo.data_dir(args.cache_dir))
    handle = ModelHandle.load(str(path), device="cpu")
    single = ModelHandle(handle.model, handle.tokenizer, name="batch1", source=handle.source,
                         fingerprint=handle.fingerprint, batch_size=1)
    n_qa = sum(len(v) for v in data.qa.values())
    print(f"model {path.name}: {len(data.verbatim)} verbatim items, {n_qa} questions, "
          f"{data.params['icl_shots']}-shot ICL, chunks of {data.params['mia_chunk_tokens']} tokens")
    embedder = Embedder(data.params["embedder"])
    embedder.cosine(["warm up"], ["warm up"])

    # -- verbatim: one pass feeds every metric vs one pass per metric family
    references = dusk.verbatim_references(handle, data)
    prompts = [v.prompt for v in data.verbatim]
    ids = [v.id for v in data.verbatim]
    fast_v, t_fast_v = timed(lambda: dusk.verbatim_metrics(
        references, handle.generate(prompts, max_new_tokens=data.params["verbatim_max_new_tokens"]),
        ids, prompts, embedder, data.params))
    naive_v, t_naive_v = timed(lambda: naive_verbatim(single, data, references, embedder))
    same_v = all(np.allclose(list(fast_v[name].per_item.values()), naive_v[family], atol=1e-6)
                 for name, family in (("verbatim_rougeL_f1", "rouge"), ("verbatim_levenshtein", "levenshtein"),
                                      ("verbatim_lcs_ratio", "lcs"), ("verbatim_embedding_cosine", "embedding")))

    # -- knowledge QA: batched + cached ICL prefix vs variants
    order = [q for name in dusk.QA_SETS.values() for q in data.qa[name]]
    qa_prompts = [dusk.qa_prompt(q.question) for q in order]
    kw = dict(prefix=dusk.qa_prefix(data), max_new_tokens=data.params["qa_max_new_tokens"],
              stop_strings=dusk.QA_STOP_STRINGS)
    fast_q, t_fast_q = timed(lambda: handle.generate(qa_prompts, **kw))
    handle.generator.reuse_prefix_cache = single.generator.reuse_prefix_cache = False
    nocache_q, t_nocache_q = timed(lambda: handle.generate(qa_prompts, **kw))
    naive_q, t_naive_q = timed(lambda: [single.generate([p], **kw)[0] for p in qa_prompts])
    handle.generator.reuse_prefix_cache = True

    # -- membership: one teacher-forced pass per chunk, all four scores
    scores, t_mia = timed(lambda: dusk.membership_scores(handle, data))
    # -- the retain model's membership scores: cold (computed) vs warm (on-disk cache)
    retain = ModelHandle.load(str(retain_path), device="cpu")
    with tempfile.TemporaryDirectory() as tmp:
        cache = DiskCache(tmp)
        parts = {"op": "dusk:membership-scores", "model": retain.fingerprint, "data": data.fingerprint}
        _, t_cold = timed(lambda: cache.get_or_compute(parts, lambda: dusk.membership_scores(retain, data)))
        retain_scores, t_warm = timed(lambda: cache.get_or_compute(parts, lambda: None))
    _, t_metrics = timed(lambda: dusk.membership_metrics(scores, retain_scores, data.params))

    print("\nstage                                        seconds   speed-up")
    print(f"verbatim  naive (4 passes, batch 1)        {t_naive_v:9.2f}")
    print(f"verbatim  fast (1 batched pass)            {t_fast_v:9.2f}   {t_naive_v / t_fast_v:6.1f}x"
          f"   identical scores: {same_v}")
    print(f"QA        naive (batch 1, ICL re-encoded)  {t_naive_q:9.2f}")
    print(f"QA        batched, ICL re-encoded          {t_nocache_q:9.2f}   {t_naive_q / t_nocache_q:6.1f}x")
    print(f"QA        batched, ICL KV reused           {t_fast_q:9.2f}   {t_naive_q / t_fast_q:6.1f}x"
          f"   identical answers: {fast_q == nocache_q == naive_q}")
    print(f"MIA       one pass per chunk, 4 scores     {t_mia:9.2f}")
    print(f"retain    membership scores, cold cache    {t_cold:9.2f}")
    print(f"retain    membership scores, warm cache    {t_warm:9.4f}   {t_cold / max(t_warm, 1e-9):6.0f}x")
    print(f"PL/RD     AUCs + paired bootstrap          {t_metrics:9.2f}")
    total_fast = t_fast_v + t_fast_q + t_mia + t_warm + t_metrics
    total_naive = t_naive_v + t_naive_q + t_mia + t_cold + t_metrics
    print(f"\nwhole suite, one checkpoint: fast + warm cache {total_fast:.1f} s; naive + cold {total_naive:.1f} s "
          f"({total_naive / total_fast:.1f}x)")


if __name__ == "__main__":
    main()
