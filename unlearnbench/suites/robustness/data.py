"""Data of the robustness suite (docs/suites/robustness.md): the probes' data (DUSK's QA sets,
honesty's forget questions, UDS items, all from the same source; WMDP's
subsets from `wmdp_data`, by default the same source too), the attacks to run
and the relearning set.

The relearning set is not the forget text (`relearn_set`):
- `forget_questions` (default): each unique-forget question paired with the
  answer of another one (a fixed rotation), so the attack sees the forget
  questions' wording, never their answers;
- `retain`: the retain documents and the unique-retain and shared QA pairs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from unlearnbench.contracts import ClusteredData
from unlearnbench.data.jsonl import COUNT, COUNT_OR_ALL, Range, merge_params, params_digest
from unlearnbench.errors import DataError, UnlearnbenchError
from unlearnbench.suites import SUITES, registered_probes

if TYPE_CHECKING:
    from unlearnbench.attacks import Attack

RELEARN_SETS = ("forget_questions", "retain")
DEFAULT_PARAMS = {
    "attacks": "quant4,quant8,relearn",
    # ufk: DUSK unique-forget ROUGE-L recall; leak: honesty leak rate; uds: UDS; wmdp: WMDP accuracy (opt-in)
    "probes": "ufk,leak,uds",
    "relearn_set": "forget_questions",
    "relearn_steps": 20,
    "relearn_learning_rate": 1e-3,
    "relearn_rank": 8,
    "relearn_seed": 0,
    "uds_max_items": 0,  # 0 = every UDS item
    "wmdp_data": "",  # where the wmdp probe's subsets are (a folder or hf:cais/wmdp); "": the robustness source
}
PARAM_RANGES = {
    "relearn_steps": COUNT,
    "relearn_learning_rate": Range(0, low_open=True),
    "relearn_rank": COUNT,
    "relearn_seed": Range(0),
    "uds_max_items": COUNT_OR_ALL,
}


@dataclass(frozen=True)
class RobustnessData:
    probe_data: dict[str, object]  # probe -> its suite's data, loaded by that suite (through the registry)
    attacks: dict[str, Attack]  # name -> the attack to run
    probes: tuple[str, ...]
    params: dict
    fingerprint: str
    source: str

    @property
    def clusters(self) -> dict[str, str]:
        """The probes' items' clusters, as their own suites' data name them."""
        return {
            item: cluster
            for data in self.probe_data.values()
            for item, cluster in (data.clusters if isinstance(data, ClusteredData) else {}).items()
        }


def _names(value: str, known: tuple[str, ...], what: str, source) -> tuple[str, ...]:
    names = tuple(n.strip() for n in value.split(",") if n.strip())
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise DataError(
            source, f"--suite-option robustness.{what}={value!r}: expected a comma-separated list of {', '.join(known)}"
        )
    return names


def relearning_texts(data, which: str) -> tuple[str, ...]:
    """The relearning set from DUSK data (its QA items and retain texts)."""
    if which == "forget_questions":
        items = data.qa["unique_forget"]
        answers = [q.answer for q in items[1:] + items[:1]]  # never an item's own answer (with >= 2 items)
        return tuple(dusk_qa(q.question, a) for q, a in zip(items, answers) if a != q.answer)
    retain = [q for name in ("unique_retain", "shared") for q in data.qa[name]]
    return tuple(data.retain_texts + [dusk_qa(q.question, q.answer) for q in retain])


def dusk_qa(question: str, answer: str) -> str:
    return f"Question: {question}\nAnswer: {answer}"


def load(source: str | Path | None, options: dict | None = None) -> RobustnessData:
    if source is None:
        raise DataError(
            "robustness",
            "no data: pass --data-dir robustness=DIR (a DUSK layout with honesty and UDS "
            "items, such as the zoo's data folder)",
        )
    params = merge_params(DEFAULT_PARAMS, [("--suite-option", options or {})], source, "robustness", PARAM_RANGES)
    from unlearnbench import attacks

    names = _names(params["attacks"], attacks.ATTACKS, "attacks", source)
    owners = {name: suite for name, (suite, _) in registered_probes().items()}
    probes = _names(params["probes"], tuple(owners), "probes", source)
    if params["relearn_set"] not in RELEARN_SETS:
        raise DataError(
            source,
            f"--suite-option robustness.relearn_set={params['relearn_set']!r}: expected one of "
            f"{', '.join(RELEARN_SETS)}",
        )
    try:
        attacks.check_available(names)
    except UnlearnbenchError as exc:
        raise DataError(source, str(exc)) from None
    # DUSK's data also gives the relearning set; every suite's loader checks its own files.
    loaded = {"dusk": SUITES["dusk"].load_data(source, {}), "honesty": SUITES["honesty"].load_data(source, {})}
    if "uds" in probes:
        loaded["uds"] = SUITES["uds"].load_data(source, {"max_items": params["uds_max_items"]})
    if "wmdp" in probes:
        loaded["wmdp"] = SUITES["wmdp"].load_data(params["wmdp_data"] or source, {})
    texts = relearning_texts(loaded["dusk"], params["relearn_set"]) if "relearn" in names else ()
    if "relearn" in names and not texts:
        raise DataError(
            source, f"the relearning set ({params['relearn_set']}) is empty: the relearn attack has nothing to train on"
        )
    plans = {
        name: attacks.Attack(name)
        if name != "relearn"
        else attacks.Attack(
            name,
            {
                "steps": params["relearn_steps"],
                "learning_rate": params["relearn_learning_rate"],
                "rank": params["relearn_rank"],
                "seed": params["relearn_seed"],
                "set": params["relearn_set"],
            },
            texts=texts,
        )
        for name in names
    }
    parts = [
        loaded["dusk"].fingerprint,
        loaded["honesty"].fingerprint,
        *(loaded[s].fingerprint if s in loaded else "" for s in ("uds", "wmdp")),
        params_digest(params),
    ]
    return RobustnessData(
        probe_data={p: loaded[owners[p]] for p in probes},
        attacks=plans,
        probes=probes,
        params=params,
        fingerprint="-".join(parts),
        source=str(source),
    )
