"""MUSE data in its own layout (docs/suites/muse.md): the muse-bench/MUSE-News and
MUSE-Books splits OpenUnlearning evaluates, read from a local folder (or the
zoo's data folder, which holds a synthetic set under muse/) or
`hf:muse-bench/MUSE-News` / `hf:muse-bench/MUSE-Books` (the local HF cache;
a download only where the environment allows it).

    verbmem/forget            {prompt, gt}: forget-text openings and their continuations
    knowmem/forget_qa         {question, answer} about the forget texts
    knowmem/forget_qa_icl     the in-context examples for forget_qa
    knowmem/retain_qa         {question, answer} about the retain texts (utility)
    knowmem/retain_qa_icl     the in-context examples for retain_qa
    privleak/forget           {text}: members (trained on, to be forgotten)
    privleak/retain           {text}: members that stay (`retain2` on the Hub)
    privleak/holdout          {text}: never trained on

Each split is the Hub's `<split>-*.parquet`, `<split>.json` (a JSON list of
objects, or of strings for privleak) or `<split>.jsonl`, in that order: the
Hub repositories hold both parquet and older JSON files, and the parquet
files are what `datasets.load_dataset` (so OpenUnlearning) reads. `max_items`
keeps the first N items of each split (0: all). A `suite.json` in the folder
sets parameters for its data (--suite-option muse.KEY=VALUE overrides them).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from unlearnbench.data.jsonl import (
    COUNT,
    COUNT_OR_ALL,
    PROPORTION,
    Range,
    fingerprint_files,
    merge_params,
    params_digest,
    parquet_rows,
    suite_folder,
    suite_params,
)
from unlearnbench.data.openunlearning import AUTO, convention_params
from unlearnbench.data.records import QAItem, VerbatimItem, clusters_of, record_cluster
from unlearnbench.errors import DataError

# OpenUnlearning's MUSE settings: 128 new tokens for VerbMem, 32 for KnowMem,
# every ICL example, texts cut at 2048 tokens, k = 0.4. `icl_shots` -1 means all.
# privleak scores with Min-K%++ (docs/suites/muse.md); convention=reference computes it as
# OpenUnlearning's configuration does (data/openunlearning.py).
DEFAULT_PARAMS = {
    "max_items": 0,
    "verbmem_max_new_tokens": 128,
    "knowmem_max_new_tokens": 32,
    "icl_shots": -1,
    "privleak_max_tokens": 2048,
    "mink_k": 0.4,
    "privleak_score": "minkpp",
    "convention": "spec",
    "reference_system_prompt": AUTO,
}
PARAM_RANGES = {
    "max_items": COUNT_OR_ALL,
    "verbmem_max_new_tokens": COUNT,
    "knowmem_max_new_tokens": COUNT,
    "icl_shots": Range(-1, meaning="-1 = every ICL example, 0 = zero-shot"),
    "privleak_max_tokens": COUNT,
    "mink_k": PROPORTION,
}
# (folder, split): the fields each record needs, and the Hub's other names for the split.
SPLITS = {
    ("verbmem", "forget"): (("prompt", "gt"), ()),
    ("knowmem", "forget_qa"): (("question", "answer"), ()),
    ("knowmem", "forget_qa_icl"): (("question", "answer"), ()),
    ("knowmem", "retain_qa"): (("question", "answer"), ()),
    ("knowmem", "retain_qa_icl"): (("question", "answer"), ()),
    ("privleak", "forget"): (("text",), ()),
    ("privleak", "retain"): (("text",), ("retain2",)),
    ("privleak", "holdout"): (("text",), ()),
}


@dataclass(frozen=True)
class MuseData:
    verbmem: list[VerbatimItem]
    knowmem: dict[str, list[QAItem]]  # forget_qa, forget_qa_icl, retain_qa, retain_qa_icl
    privleak: dict[str, list[str]]  # forget, retain, holdout
    params: dict
    fingerprint: str
    source: str

    @property
    def clusters(self) -> dict[str, str]:
        return clusters_of(self.verbmem, *self.knowmem.values())

    def icl(self, split: str) -> list[QAItem]:
        """The in-context examples for `split` (forget_qa or retain_qa)."""
        examples = self.knowmem[f"{split}_icl"]
        shots = self.params["icl_shots"]
        return examples if shots < 0 else examples[:shots]


def _records(path: Path, fields: tuple[str, ...]) -> list[dict]:
    """A JSON list (of objects, or of strings when the split has one field) or JSON lines."""
    text = path.read_text(encoding="utf-8")
    try:
        loaded = json.loads(text)
        rows, lines = (loaded if isinstance(loaded, list) else [loaded]), None
    except json.JSONDecodeError:
        rows, lines = [], []
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise DataError(path, f"invalid JSON ({exc.msg})", line=number) from None
                lines.append(number)
    if not rows:
        raise DataError(path, "no records")
    out = []
    for i, row in enumerate(rows):
        where = {"line": lines[i]} if lines else {}
        if isinstance(row, str) and len(fields) == 1:
            row = {fields[0]: row}
        if not isinstance(row, dict):
            raise DataError(path, f"item {i}: expected a JSON object with {', '.join(fields)}", **where)
        for name in fields:
            if not isinstance(row.get(name), str) or not row[name].strip():
                raise DataError(path, f"item {i}: field '{name}' missing, empty or not a string", **where)
        out.append(row)
    return out


def _split(root: Path, folder: str, split: str, where: str) -> tuple[list[dict], list[Path]]:
    fields, aliases = SPLITS[(folder, split)]
    for name in (split, *aliases):
        parquet = sorted((root / folder).glob(f"{name}-*.parquet"))
        if parquet:
            return parquet_rows(root / folder, f"{name}-*.parquet", fields, where), parquet
        for suffix in (".json", ".jsonl"):
            path = root / folder / f"{name}{suffix}"
            if path.is_file():
                return _records(path, fields), [path]
    raise DataError(
        root / folder / f"{split}.json",
        "file not found (the MUSE layout: verbmem/forget, knowmem/{forget,retain}_qa[_icl], "
        "privleak/{forget,retain,holdout}; .json, .jsonl or the Hub's parquet)",
    )


def load(source: str | Path | None, options: dict | None = None) -> MuseData:
    if source is None:
        raise DataError("muse", "no data: pass --data-dir muse=DIR (the MUSE layout) or muse=hf:muse-bench/MUSE-News")
    where = str(source)
    root = suite_folder(source, "muse", ["verbmem/*", "knowmem/*", "privleak/*"], "MUSE")
    params = merge_params(
        DEFAULT_PARAMS,
        [("suite.json", suite_params(root)), ("--suite-option", options or {})],
        root,
        "MUSE",
        PARAM_RANGES,
    )
    params = convention_params(params, options or {}, root, "muse")
    rows, paths = {}, []
    for folder, split in SPLITS:
        rows[(folder, split)], files = _split(root, folder, split, where)
        paths += files
    keep = params["max_items"] or None

    def first(folder: str, split: str) -> list[dict]:
        # The ICL examples are a prompt, not a sample: max_items leaves them whole.
        return rows[(folder, split)] if split.endswith("_icl") else rows[(folder, split)][:keep]

    verbmem = [
        VerbatimItem(f"verbmem-{i}", r["prompt"], r["gt"], record_cluster(r))
        for i, r in enumerate(first("verbmem", "forget"))
    ]
    knowmem = {
        split: [
            QAItem(f"{split}-{i}", r["question"], r["answer"], record_cluster(r))
            for i, r in enumerate(first(folder, split))
        ]
        for folder, split in SPLITS
        if folder == "knowmem"
    }
    privleak = {split: [r["text"] for r in first(folder, split)] for folder, split in SPLITS if folder == "privleak"}
    return MuseData(
        verbmem=verbmem,
        knowmem=knowmem,
        privleak=privleak,
        params=params,
        fingerprint=f"{fingerprint_files(paths)}-{params_digest(params)}",
        source=where,
    )
