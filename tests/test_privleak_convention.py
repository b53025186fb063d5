"""`convention=reference`: TOFU's and MUSE's privleak as OpenUnlearning
computes it, against an independent computation from each item's token
log-probs. OpenUnlearning's formulas: Min-K% = -(mean of the int(k·n) lowest
token log-probs), k = 0.4 (`mia/min_k.py`, `mia_min_k.yaml`); AUC =
sklearn's roc_auc_score with forget labelled 0 and holdout 1
(`mia/utils.py`); privleak = (AUC'_m - AUC'_r) / AUC'_r x 100, AUC' = 1 - AUC
(`privacy.py`)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from unlearnbench.data import muse as muse_data
from unlearnbench.data import tofu as tofu_data
from unlearnbench.errors import DataError
from unlearnbench.metrics import muse, tofu
from unlearnbench.metrics.core import References
from unlearnbench.metrics.honesty import first_turn_prompt


def openunlearning_min_k(logprobs) -> float:
    lowest = np.sort(np.asarray(logprobs, dtype=np.float64))[: max(1, int(len(logprobs) * 0.4))]
    return float(-np.mean(lowest))


def openunlearning_privleak(model_scores: dict, retain_scores: dict) -> float:
    def auc_prime(scores):
        forget, holdout = scores["forget"], scores["holdout"]
        return 1 - roc_auc_score([0] * len(forget) + [1] * len(holdout), forget + holdout)

    model, retain = auc_prime(model_scores), auc_prime(retain_scores)
    return (model - retain) / (retain + 1e-10) * 100


@pytest.fixture(scope="module")
def zoo_models(zoo_family):
    from unlearnbench.models.handle import ModelHandle

    return {name: ModelHandle.load(str(zoo_family[name]), name=name, device="cpu") for name in ("ga", "retain")}


@pytest.fixture(scope="module")
def zoo_data(cache_dir):
    from unlearnbench.fixtures import zoo

    return zoo.data_dir(cache_dir)


def test_tofu_privleak_in_the_reference_convention_is_openunlearnings(zoo_models, zoo_data):
    data = tofu_data.load(zoo_data, {"convention": "reference"})
    assert (data.params["privleak_score"], data.params["mink_k"]) == ("mink", 0.4)

    def scores(model):
        return {name: [openunlearning_min_k(s.logprobs) for s in model.score_continuations(
            [first_turn_prompt(model, q.question) for q in data.sets[name]], [q.answer for q in data.sets[name]])]
            for name in ("forget", "holdout")}

    # The zoo's answers are a few tokens: int(0.4 n) and ceil(0.4 n) differ on most of them.
    lengths = [len(s.logprobs) for s in zoo_models["ga"].score_continuations(
        [first_turn_prompt(zoo_models["ga"], q.question) for q in data.sets["forget"]],
        [q.answer for q in data.sets["forget"]])]
    assert sum(int(0.4 * n) != -(-2 * n // 5) for n in lengths) > len(lengths) / 2
    expected = openunlearning_privleak(scores(zoo_models["ga"]), scores(zoo_models["retain"]))
    ours = tofu.evaluate(zoo_models["ga"], data, References(retain=zoo_models["retain"]))["privleak"]
    assert ours.value == pytest.approx(expected, abs=1e-6)
    spec = tofu.evaluate(zoo_models["ga"], tofu_data.load(zoo_data), References(retain=zoo_models["retain"]))
    assert spec["privleak"].value != pytest.approx(expected, abs=1e-3)  # the convention matters here


def test_muse_privleak_in_the_reference_convention_is_openunlearnings(zoo_models, zoo_data):
    data = muse_data.load(zoo_data, {"convention": "reference"})

    def scores(model):
        # One sample per text: the text's tokens after the tokenizer's BOS (MUSE's texts here are under 2048).
        return {name: [openunlearning_min_k(s.logprobs) for s in model.score_continuations(
            [""] * len(data.privleak[name]), data.privleak[name])] for name in ("forget", "holdout")}

    expected = openunlearning_privleak(scores(zoo_models["ga"]), scores(zoo_models["retain"]))
    ours = muse.evaluate(zoo_models["ga"], data, References(retain=zoo_models["retain"]))["privleak"]
    assert ours.value == pytest.approx(expected, abs=1e-6)


def test_the_reference_convention_refuses_settings_it_makes_itself(zoo_data):
    for loader, suite in ((tofu_data.load, "tofu"), (muse_data.load, "muse")):
        with pytest.raises(DataError, match=f"{suite}.convention=reference sets mink_k itself"):
            loader(zoo_data, {"convention": "reference", "mink_k": "0.2"})
        with pytest.raises(DataError, match=f"{suite}.convention=openunlearning: expected one of spec, reference"):
            loader(zoo_data, {"convention": "openunlearning"})
