"""Honesty data (docs/suites/honesty.md): forget, retain and (optional) unknown QA sets.

Sources, picked by `--data-dir honesty=...`:
- a folder with `forget.jsonl` (required), `retain.jsonl` and `unknown.jsonl`
  (optional): one `{question, answer}` object per line, optionally `id`,
  `kind` (the question's kind, for MCQ distractors) and `choices` (a list
  of 4 options that contains the answer: used as the MCQ options as given);
- a single such JSONL file: the forget set alone;
- a folder holding such a `honesty/` folder (the fixture zoo's data folder);
- a DUSK layout: forget = SpecificForgetQA, retain = GeneralQA +
  SpecificRetainQA, unknown = HoldoutQA.jsonl when present (questions about
  people no model saw);
- `hf:ID_OR_PATH`: the DUSK HF dataset, mapped the same way;
- a UDS item file (a JSON list with `entity`, e.g. the TOFU items): the
  forget set, with the entity as the gold answer (TOFU answers are whole
  sentences; the entity is what a leak reveals).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from unlearnbench.data.jsonl import COUNT, COUNT_OR_ALL, fingerprint_files, merge_params, params_digest, read_records
from unlearnbench.data.records import clusters_of, record_cluster
from unlearnbench.errors import DataError

SETS = ("forget", "retain", "unknown")
N_CHOICES = 4  # gold + 3 distractors; the IDK / control option is the 5th
# docs/suites/honesty.md defaults; `--suite-option honesty.KEY=VALUE` overrides them.
DEFAULT_PARAMS = {
    "max_new_tokens": 64,  # first turn
    "followup_max_new_tokens": 16,  # the Yes/No second turn
    "max_items": 0,  # per set; 0 = all
}
PARAM_RANGES = {"max_new_tokens": COUNT, "followup_max_new_tokens": COUNT, "max_items": COUNT_OR_ALL}


@dataclass(frozen=True)
class HonestyItem:
    id: str
    question: str
    answer: str
    kind: str = ""  # explicit kind from the data; inferred for MCQ when empty
    choices: tuple[str, ...] = ()  # user-given MCQ options (contain the answer)
    cluster: str | None = None  # the person or source it asks about: None, its own cluster


@dataclass(frozen=True)
class HonestyData:
    sets: dict[str, list[HonestyItem]]  # forget (non-empty), retain, unknown (possibly empty)
    params: dict
    fingerprint: str
    source: str

    @property
    def clusters(self) -> dict[str, str]:
        return clusters_of(*self.sets.values())


def _items_jsonl(path: Path, prefix: str) -> list[HonestyItem]:
    records = read_records(path, ["question", "answer"], id_field="")
    items: list[HonestyItem] = []
    seen: dict[str, int] = {}
    for number, record in enumerate(records, start=1):
        item_id = str(record.get("id", f"{prefix}-{number - 1}"))
        if item_id in seen:
            raise DataError(path, f"duplicate id '{item_id}' (first in record {seen[item_id]})", line=number)
        seen[item_id] = number
        kind = record.get("kind", "")
        if not isinstance(kind, str):
            raise DataError(path, "field 'kind' must be a string", line=number)
        choices = record.get("choices", ())
        if choices:
            if (
                not isinstance(choices, list)
                or len(choices) != N_CHOICES
                or not all(isinstance(c, str) and c.strip() for c in choices)
            ):
                raise DataError(path, f"field 'choices' must be a list of {N_CHOICES} non-empty strings", line=number)
            if record["answer"] not in choices:
                raise DataError(path, "field 'choices' does not contain the answer", line=number)
            if len(set(choices)) != N_CHOICES:
                raise DataError(path, "field 'choices' has repeated options", line=number)
        items.append(
            HonestyItem(item_id, record["question"], record["answer"], kind, tuple(choices), record_cluster(record))
        )
    return items


def _from_qa(items, prefix: str) -> list[HonestyItem]:
    return [HonestyItem(f"{prefix}-{i}", q.question, q.answer, cluster=q.cluster) for i, q in enumerate(items)]


def _from_dusk(source: str, options: dict) -> tuple[dict[str, list[HonestyItem]], str]:
    """The DUSK questions (read by the DUSK suite's loader) as honesty sets."""
    from unlearnbench.suites import SUITES

    data: Any = SUITES["dusk"].load_data(source, {})  # DUSK's data: its type lives in the DUSK suite
    sets = {
        "forget": _from_qa(data.qa["unique_forget"], "forget"),
        "retain": _from_qa(data.qa["shared"], "shared") + _from_qa(data.qa["unique_retain"], "retain"),
        "unknown": [],
    }
    holdout = Path(data.source) / "eval" / "HoldoutQA.jsonl"
    if not data.source.startswith("hf:") and holdout.is_file():
        sets["unknown"] = _items_jsonl(holdout, "unknown")
    return sets, data.fingerprint + ("-" + fingerprint_files([holdout]) if sets["unknown"] else "")


def _uds_items(path: Path) -> list[Any]:
    """UDS's items, as the UDS suite's loader reads them (their type lives in that suite)."""
    from unlearnbench.suites import SUITES

    data: Any = SUITES["uds"].load_data(path, {})
    return list(data.items)


def _from_uds(path: Path) -> list[HonestyItem]:
    """The forget questions of a UDS items file, read by the UDS suite's loader."""
    return [HonestyItem(f"forget-{item.id}", item.question, item.entity) for item in _uds_items(path)]


def _is_dusk_layout(path: Path) -> bool:
    return (path / "eval" / "SpecificForgetQA.jsonl").is_file() or (path / "dusk" / "eval").is_dir()


def load(source: str | Path | None, options: dict | None = None) -> HonestyData:
    if source is None:
        raise DataError(
            "honesty",
            "no data: pass --data-dir honesty=DIR (forget.jsonl [retain.jsonl unknown.jsonl] "
            "or a DUSK layout), honesty=FILE.jsonl or honesty=hf:AI-ISL/DUSK",
        )
    params = merge_params(DEFAULT_PARAMS, [("--suite-option", options or {})], source, "honesty", PARAM_RANGES)
    text = str(source)
    path = Path(text)
    if path.is_dir() and (path / "honesty" / "forget.jsonl").is_file():  # the fixture zoo's data folder
        path = path / "honesty"
    if text.startswith("hf:") or (path.is_dir() and _is_dusk_layout(path)):
        sets, digest = _from_dusk(text, options or {})
    elif path.is_dir() and (path / "forget.jsonl").is_file():
        files: list[Path] = []
        sets = {}
        for name in SETS:
            file = path / f"{name}.jsonl"
            sets[name] = _items_jsonl(file, name) if file.is_file() else []
            files += [file] if file.is_file() else []
        digest = fingerprint_files(files)
    elif path.is_dir():
        raise DataError(path, "no forget.jsonl here, and not a DUSK layout")
    elif path.suffix == ".jsonl":
        sets, digest = {"forget": _items_jsonl(path, "forget"), "retain": [], "unknown": []}, fingerprint_files([path])
    elif path.suffix == ".json":
        sets, digest = {"forget": _from_uds(path), "retain": [], "unknown": []}, fingerprint_files([path])
    else:
        raise DataError(path, "not found, or not a honesty folder, a QA .jsonl file, a UDS .json file or a DUSK layout")
    if params["max_items"]:
        sets = {name: items[: params["max_items"]] for name, items in sets.items()}
    digest += "-" + params_digest(params)
    return HonestyData(sets=sets, params=params, fingerprint=digest, source=text)
