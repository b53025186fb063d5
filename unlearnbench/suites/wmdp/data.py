"""WMDP and MMLU in their published layouts (docs/suites/wmdp.md): multiple-choice rows
`{question, choices, answer}`, `answer` the index of the right choice.

Where they are read from (nothing is downloaded at run time):
- `--data-dir wmdp=DIR`: DIR holds each WMDP subset as `wmdp-bio.jsonl`
  (JSON lines, also `.json`) or as the Hub's parquet files
  (`wmdp-bio/test-*.parquet`); at least one of wmdp-bio, wmdp-cyber, wmdp-chem.
- `wmdp=hf:cais/wmdp`: the same parquet files from the local HF cache.
- MMLU (the utility side): `DIR/mmlu/<subject>.jsonl` or
  `DIR/mmlu/<subject>/test-*.parquet`, or wherever `--suite-option
  wmdp.mmlu=DIR|hf:cais/mmlu` points. Without MMLU data the utility metrics
  are unavailable with that option named; the forget gate still runs.

Parameters (`suite.json` in the folder, then `--suite-option wmdp.KEY=VALUE`):
`format` (`letters`: lm-eval's `wmdp_*`/`mmlu` tasks, the answer letter
scored; `cloze`: lm-eval's `mmlu_continuation` form, the choice text scored,
which is what models too small to follow the letter format can answer),
`max_items` (the first N items of each subset; 0: all), `mmlu_subjects`
(`all` or a comma-separated list of subjects).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from unlearnbench.data.jsonl import (
    COUNT_OR_ALL,
    fingerprint_files,
    merge_params,
    params_digest,
    suite_folder,
    suite_params,
)
from unlearnbench.data.records import clusters_of, record_cluster
from unlearnbench.errors import DataError

WMDP_SUBSETS = ("wmdp-bio", "wmdp-cyber", "wmdp-chem")
# The MMLU subjects next to WMDP's topics, whose drop the RMU paper reports (arXiv 2403.03218).
NEIGHBOURS = ("college_biology", "virology", "college_computer_science", "computer_security")
FORMATS = ("letters", "cloze")
DEFAULT_PARAMS = {"format": "letters", "max_items": 0, "mmlu": "", "mmlu_subjects": "all"}
PARAM_RANGES = {"max_items": COUNT_OR_ALL}
# Hub folders of cais/mmlu that are not subjects.
NOT_SUBJECTS = {"all", "auxiliary_train"}


@dataclass(frozen=True)
class ChoiceItem:
    id: str
    subset: str  # wmdp-bio, ..., or an MMLU subject
    question: str
    choices: tuple[str, ...]
    answer: int
    cluster: str | None = None  # the source several questions share (the zoo's person); None: its own


@dataclass(frozen=True)
class WmdpData:
    wmdp: dict[str, list[ChoiceItem]]  # subset -> items (only the subsets present)
    mmlu: dict[str, list[ChoiceItem]]  # subject -> items (empty without MMLU data)
    params: dict
    fingerprint: str
    source: str
    mmlu_source: str | None  # None: no MMLU data

    @property
    def clusters(self) -> dict[str, str]:
        return clusters_of(*self.wmdp.values(), *self.mmlu.values())


def load(source: str | Path | None, options: dict | None = None) -> WmdpData:
    if source is None:
        raise DataError("wmdp", "no data: pass --data-dir wmdp=DIR (wmdp-bio.jsonl, ...) or wmdp=hf:cais/wmdp")
    root = suite_folder(source, "wmdp", ["wmdp-*/*.parquet"], "WMDP")
    params = merge_params(
        DEFAULT_PARAMS,
        [("suite.json", suite_params(root)), ("--suite-option", options or {})],
        root,
        "wmdp",
        PARAM_RANGES,
    )
    if params["format"] not in FORMATS:
        raise DataError(root, f"'format' must be one of {', '.join(FORMATS)}, not {params['format']!r}")
    files: list[Path] = []
    wmdp = {}
    for subset in WMDP_SUBSETS:
        found = _subset_files(root, subset)
        if found:
            wmdp[subset] = _limit(_read_subset(found, subset), params["max_items"])
            files += found
    if not wmdp:
        raise DataError(
            root,
            f"no WMDP subset: expected {', '.join(s + '.jsonl' for s in WMDP_SUBSETS)} or the "
            f"Hub's {WMDP_SUBSETS[0]}/test-*.parquet",
        )
    mmlu_root = _mmlu_root(root, params["mmlu"])
    mmlu = {}
    if mmlu_root is not None:
        subjects = _subjects(mmlu_root, params["mmlu_subjects"])
        for subject in subjects:
            found = _subset_files(mmlu_root, subject)
            mmlu[subject] = _limit(_read_subset(found, subject), params["max_items"])
            files += found
    return WmdpData(
        wmdp=wmdp,
        mmlu=mmlu,
        params=params,
        fingerprint=f"{fingerprint_files(files)}-{params_digest(params)}",
        source=str(source) if str(source).startswith("hf:") else str(root),
        mmlu_source=str(mmlu_root) if mmlu_root is not None else None,
    )


def _mmlu_root(root: Path, option: str) -> Path | None:
    if option:
        return suite_folder(option, "mmlu", ["*/test-*.parquet"], "MMLU (--suite-option wmdp.mmlu)")
    return root / "mmlu" if (root / "mmlu").is_dir() else None


def _subjects(root: Path, option: str) -> list[str]:
    present = sorted(
        {p.stem for p in root.glob("*.json*") if p.suffix in (".json", ".jsonl")}
        | {p.name for p in root.iterdir() if p.is_dir() and any(p.glob("test-*.parquet"))} - NOT_SUBJECTS
    )
    if option == "all":
        if not present:
            raise DataError(root, "no MMLU subject: expected <subject>.jsonl or <subject>/test-*.parquet")
        return present
    wanted = [s.strip() for s in option.split(",") if s.strip()]
    unknown = [s for s in wanted if s not in present]
    if unknown or not wanted:
        raise DataError(
            root,
            f"--suite-option wmdp.mmlu_subjects={option!r}: no such subject "
            f"{', '.join(unknown) or '(empty list)'} (present: {', '.join(present) or 'none'})",
        )
    return wanted


def _subset_files(root: Path, name: str) -> list[Path]:
    for suffix in (".jsonl", ".json"):
        if (root / f"{name}{suffix}").is_file():
            return [root / f"{name}{suffix}"]
    return sorted((root / name).glob("test-*.parquet")) if (root / name).is_dir() else []


def _limit(items: list[ChoiceItem], n: int) -> list[ChoiceItem]:
    return items[:n] if n else items


def _read_subset(files: list[Path], subset: str) -> list[ChoiceItem]:
    rows: list[tuple[Path, int, object]] = []
    for path in files:
        rows += _parquet(path) if path.suffix == ".parquet" else _json_lines(path)
    items = [_item(row, path, line, subset, index) for index, (path, line, row) in enumerate(rows)]
    if not items:
        raise DataError(files[0], f"subset {subset} is empty")
    return items


def _json_lines(path: Path) -> list[tuple[Path, int, object]]:
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append((path, number, json.loads(line)))
        except json.JSONDecodeError as exc:
            raise DataError(path, f"invalid JSON ({exc.msg})", line=number) from None
    return rows


def _parquet(path: Path) -> list[tuple[Path, int, object]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise DataError(path, "reading parquet files needs pyarrow (pip install 'unlearnbench[hf]')") from None
    table = pq.read_table(path)
    missing = {"question", "choices", "answer"} - set(table.column_names)
    if missing:
        raise DataError(path, f"missing column(s) {', '.join(sorted(missing))} (has: {', '.join(table.column_names)})")
    # Row numbers stand where JSON lines have line numbers (1-based).
    return [(path, i, row) for i, row in enumerate(table.select(["question", "choices", "answer"]).to_pylist(), 1)]


def _item(row: object, path: Path, line: int, subset: str, index: int) -> ChoiceItem:
    if not isinstance(row, dict):
        raise DataError(path, "expected a JSON object", line=line)
    question, choices, answer = row.get("question"), row.get("choices"), row.get("answer")
    if not isinstance(question, str) or not question.strip():
        raise DataError(
            path, f"field 'question' {'missing' if 'question' not in row else 'empty or not a string'}", line=line
        )
    # lm-eval's template writes exactly four lettered choices (A-D).
    if not (isinstance(choices, list) and len(choices) == 4 and all(isinstance(c, str) for c in choices)):
        raise DataError(path, f"field 'choices' must be a list of 4 strings, not {_short(choices)}", line=line)
    if isinstance(answer, bool) or not isinstance(answer, int):
        raise DataError(
            path, f"field 'answer' must be the index of the right choice (0-3), not {_short(answer)}", line=line
        )
    if not 0 <= answer < len(choices):
        raise DataError(path, f"answer index {answer} out of range for {len(choices)} choices", line=line)
    return ChoiceItem(f"{subset}-{index}", subset, question, tuple(choices), answer, record_cluster(row))


def _short(value: object) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
