"""UDS items (docs/suites/uds.md): question, answer, prefix, entity.

Sources, picked by `--data-dir uds=...`:
- a JSON list of {question, answer, prefix, entity} (the real
  `../shared/data/uds/tofu_forget10_filtered.json`, or the zoo's
  `uds/forget_items.json`); `idx` is used as the item id when present;
- a folder holding `uds/forget_items.json` (the zoo's data folder);
- a DUSK-layout folder: its SpecificForgetQA becomes items with
  entity = answer and prefix = "" (any QA set converts the same way).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from unlearnbench.data.jsonl import COUNT_OR_ALL, Range, fingerprint_files, merge_params, read_json_list, read_records
from unlearnbench.errors import DataError
from unlearnbench.suites.uds import DEFAULT_PARAMS

# "spec": docs/suites/uds.md (pre-norm block outputs, the reference text as written, the
# entity as given). "reference": gnueaj/unlearning-depth-score compute_uds.py.
CONVENTIONS = ("spec", "reference")
# The code `convention=reference` reproduces, and is tested against (docs/suites/uds.md).
REFERENCE_CODE = "gnueaj/unlearning-depth-score@fc31639"
PARAM_RANGES = {"tau": Range(0), "max_items": COUNT_OR_ALL}


@dataclass(frozen=True)
class UDSItem:
    id: str
    question: str
    answer: str
    prefix: str
    entity: str

    @property
    def prompt(self) -> str:
        return f"Question: {self.question}\nAnswer: {self.prefix}"

    @property
    def reference(self) -> str:
        """The rest of the answer after the prefix: what is teacher-forced."""
        return self.answer[len(self.prefix) :] if self.answer.startswith(self.prefix) else self.answer


@dataclass(frozen=True)
class UDSData:
    items: list[UDSItem]
    params: dict
    fingerprint: str
    source: str


def from_qa(rows: list[dict], prefix: str = "qa") -> list[UDSItem]:
    """Any QA set as UDS items: the whole answer is the entity."""
    return [UDSItem(f"{prefix}-{i}", r["question"], r["answer"], "", r["answer"]) for i, r in enumerate(rows)]


def _items_json(path: Path) -> list[UDSItem]:
    rows = read_json_list(path, "{question, answer, prefix, entity} objects")
    items = []
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise DataError(path, f"item {i}: expected an object")
        for key in ("question", "answer", "entity"):
            if not isinstance(row.get(key), str) or not row[key].strip():
                raise DataError(path, f"item {i}: field '{key}' missing or empty")
        if not isinstance(row.get("prefix", ""), str):
            raise DataError(path, f"item {i}: field 'prefix' must be a string")
        items.append(
            UDSItem(str(row.get("idx", i)), row["question"], row["answer"], row.get("prefix", ""), row["entity"])
        )
    return items


def load(source: str | Path | None, options: dict | None = None) -> UDSData:
    if source is None:
        raise DataError("uds", "no data: pass --data-dir uds=FILE.json (UDS items) or uds=DIR (DUSK layout)")
    path = Path(source)
    params = merge_params(DEFAULT_PARAMS, [("--suite-option", options or {})], path, "UDS", PARAM_RANGES)
    if params["convention"] not in CONVENTIONS:
        raise DataError(
            path, f"--suite-option uds.convention={params['convention']}: expected one of {', '.join(CONVENTIONS)}"
        )
    if params["convention"] == "reference":
        params["reference_code"] = REFERENCE_CODE
    if path.is_dir() and (path / "uds" / "forget_items.json").is_file():
        path = path / "uds" / "forget_items.json"
    if path.is_file():
        items, files = _items_json(path), [path]
    elif (path / "eval" / "SpecificForgetQA.jsonl").is_file() or (path / "dusk" / "eval").is_dir():
        qa_path = path / "eval" / "SpecificForgetQA.jsonl"
        if not qa_path.is_file():
            qa_path = path / "dusk" / "eval" / "SpecificForgetQA.jsonl"
        items, files = from_qa(read_records(qa_path, ["question", "answer"], id_field=""), "forget"), [qa_path]
    else:
        raise DataError(path, "not a UDS item file, a folder with uds/forget_items.json, or a DUSK layout")
    if params["max_items"]:
        items = items[: params["max_items"]]
    digest = fingerprint_files(files) + f"-n{len(items)}"
    return UDSData(items=items, params=params, fingerprint=digest, source=str(path))
