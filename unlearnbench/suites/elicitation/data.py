"""Elicitation data (docs/suites/elicitation.md): the same facts asked many
ways, each probe tagged with its family.

Sources, picked by `--data-dir elicitation=...`:
- a folder with `forget.jsonl` (required) and `neighbour.jsonl` (optional,
  facts that must be kept): one probe per line, `{family, question, answer}`,
  optionally `id`, `cluster` (the person or document: probes of one cluster
  are not independent evidence), `fact` (probes asking the same fact share
  it), `system` (a system prompt), `shots` (earlier turns, a list of
  [question, answer] pairs), `choices` (a list of options that contains the
  answer: the probe is scored by log-likelihood, not generated) and
  `answer_prefix` (text the reply starts with, after the chat template);
- a folder holding such an `elicitation/` folder (the fixture zoo's data);
- RWKU's layout: a folder of target folders (`1_Stephen_King/`, ...), each
  with `forget_level1.json` (fill in the blank), `forget_level2.json`
  (questions), `forget_level3.json` (adversarial probes, by `type`) and
  `neighbor_level1.json` / `neighbor_level2.json` (JSON lists of `{query,
  answer}`); the target is each probe's cluster. Prompts are built as RWKU's
  evaluation builds them (its instruction line, the chat template, then
  "Answer:"), and replies are scored by ROUGE-L recall, its measure.

Parameters (`suite.json` in the folder, then `--suite-option
elicitation.KEY=VALUE`): `max_new_tokens`,
`max_items` (per family and set; 0 = all), `scoring` (`contains`: the reply
contains the normalised answer, a 0/1 score; `rouge_recall`: ROUGE-L recall
of the answer's words, RWKU's; `auto`: RWKU's for its layout, else
`contains`), `samples` and `temperature` (the `sampled` family: each
canonical probe's best of that many seeded draws at that temperature; 0
samples: none).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from unlearnbench.data.jsonl import (
    COUNT,
    COUNT_OR_ALL,
    Range,
    fingerprint_files,
    json_objects,
    merge_params,
    params_digest,
    read_json_list,
    suite_folder,
    suite_params,
)
from unlearnbench.data.records import record_cluster
from unlearnbench.errors import DataError

# The ways of asking a data file names (docs/suites/elicitation.md), in report order.
ASKED = (
    "canonical",
    "paraphrase",
    "cloze",
    "choice",
    "verify",
    "reverse",
    "one_hop",
    "few_shot",
    "reminder",
    "role_play",
    "cross_lingual",
    "adversarial",
)
# Every family a run reports: those, and the canonical probes' best of `samples` seeded draws.
FAMILIES = (*ASKED, "sampled")
SETS = ("forget", "neighbour")
SCORINGS = ("auto", "contains", "rouge_recall")
DEFAULT_PARAMS = {"max_new_tokens": 32, "max_items": 0, "scoring": "auto", "samples": 4, "temperature": 1.0}
PARAM_RANGES = {
    "max_new_tokens": COUNT,
    "max_items": COUNT_OR_ALL,
    "samples": Range(0, meaning="0 = no sampling"),
    "temperature": Range(0, low_open=True),
}

# RWKU's files (set, family) and its evaluation's instruction lines (its eval_forget.py / eval_neighbor.py).
RWKU_FILES = {
    "forget_level1.json": ("forget", "cloze"),
    "forget_level2.json": ("forget", "paraphrase"),
    "forget_level3.json": ("forget", None),
    "neighbor_level1.json": ("neighbour", "cloze"),
    "neighbor_level2.json": ("neighbour", "paraphrase"),
}
RWKU_BLANK = "Please complete the blank in the following question.\nQuestion: {query}\n"
RWKU_BRIEF = "Please briefly answer the following question.\nQuestion: {query}\n"
RWKU_ANSWER_PREFIX = "Answer:"
# RWKU's adversarial probe types (`type` of forget_level3), by the words that name them, -> our family.
RWKU_TYPES = (
    ("synonym", "paraphrase"),
    ("reverse", "reverse"),
    ("multiple", "choice"),
    ("choice", "choice"),
    ("context", "few_shot"),
    ("background", "reminder"),
    ("hint", "reminder"),
    ("role", "role_play"),
    ("lingual", "cross_lingual"),
    ("language", "cross_lingual"),
)


@dataclass(frozen=True)
class Probe:
    id: str
    family: str
    question: str
    answer: str
    cluster: str | None = None  # the person or document asked about: None, its own cluster
    fact: str | None = None  # probes asking the same fact share it
    system: str | None = None
    shots: tuple[tuple[str, str], ...] = ()
    choices: tuple[str, ...] = ()  # scored by log-likelihood among these; empty: generated
    answer_prefix: str = ""  # what the reply starts with, after the chat template


@dataclass(frozen=True)
class ElicitationData:
    sets: dict[str, list[Probe]]  # forget (non-empty), neighbour (possibly empty)
    params: dict  # with "scoring" resolved (never "auto")
    fingerprint: str
    source: str
    layout: str  # "probes" | "rwku"

    @property
    def clusters(self) -> dict[str, str]:
        return {p.id: p.cluster for probes in self.sets.values() for p in probes if p.cluster is not None}

    def families(self, name: str) -> dict[str, list[Probe]]:
        """The set's probes by family, in FAMILIES order (families without probes left out)."""
        return {family: probes for family, probes in by_family(self.sets.get(name, [])).items() if probes}


def _optional_string(record: dict, key: str, path: Path | str, line: int) -> str | None:
    return None if record.get(key) is None else _string(record, key, path, line)


def _string(record: dict, key: str, path: Path | str, line: int) -> str:
    value = record.get(key)
    if not isinstance(value, str) or not value.strip():
        raise DataError(path, f"field '{key}' {'missing' if key not in record else 'empty or not a string'}", line=line)
    return value


def parse_probe(record: object, path: Path | str, line: int, default_id: str) -> Probe:
    """A probe of our format, or a DataError naming `path` and `line`."""
    if not isinstance(record, dict):
        raise DataError(path, "expected a JSON object", line=line)
    family = _string(record, "family", path, line)
    if family not in ASKED:
        raise DataError(path, f"unknown family {family!r} (known: {', '.join(ASKED)})", line=line)
    question = _string(record, "question", path, line)
    answer = _string(record, "answer", path, line)
    shots = record.get("shots", [])
    if not (
        isinstance(shots, list)
        and all(isinstance(s, list) and len(s) == 2 and all(isinstance(t, str) for t in s) for s in shots)
    ):
        raise DataError(path, "field 'shots' must be a list of [question, answer] pairs of strings", line=line)
    choices = record.get("choices", [])
    if choices:
        if not (
            isinstance(choices, list) and len(choices) >= 2 and all(isinstance(c, str) and c.strip() for c in choices)
        ):
            raise DataError(path, "field 'choices' must be a list of at least 2 non-empty strings", line=line)
        if answer not in choices:
            raise DataError(path, "field 'choices' does not contain the answer", line=line)
    return Probe(
        str(record.get("id", default_id)),
        family,
        question,
        answer,
        record_cluster(record),
        None if record.get("fact") is None else str(record["fact"]),
        _optional_string(record, "system", path, line),
        tuple(tuple(s) for s in shots),
        tuple(choices),
        record.get("answer_prefix") or "",
    )


def _read_probes(path: Path, name: str) -> list[Probe]:
    probes: list[Probe] = []
    seen: dict[str, int] = {}
    for number, record in json_objects(path):
        probe = parse_probe(record, path, number, f"{name}-{number}")
        if probe.id in seen:
            raise DataError(path, f"duplicate id '{probe.id}' (first on line {seen[probe.id]})", line=number)
        seen[probe.id] = number
        probes.append(probe)
    if not probes:
        raise DataError(path, "no probes")
    return probes


def rwku_family(kind: object, path: Path, index: int) -> str:
    """Our family of an RWKU adversarial probe, from the words of its `type`
    (prefix injection, affirmative suffix and the like: `adversarial`)."""
    if not isinstance(kind, str) or not kind.strip():
        raise DataError(path, f"probe {index}: field 'type' missing or not a string (adversarial probes name theirs)")
    words = kind.lower()
    return next((family for word, family in RWKU_TYPES if word in words), "adversarial")


def _rwku(root: Path) -> tuple[dict[str, list[Probe]], list[Path]]:
    targets = sorted(p for p in root.iterdir() if p.is_dir() and (p / "forget_level1.json").is_file())
    sets: dict[str, list[Probe]] = {name: [] for name in SETS}
    files = []
    for target in targets:
        for file, (name, family) in RWKU_FILES.items():
            path = target / file
            if not path.is_file():
                continue
            files.append(path)
            for index, row in enumerate(read_json_list(path, "probes")):
                if not isinstance(row, dict):
                    raise DataError(path, f"probe {index}: expected a JSON object")
                for key in ("query", "answer"):
                    if not isinstance(row.get(key), str) or not row[key].strip():
                        raise DataError(path, f"probe {index}: field '{key}' missing, empty or not a string")
                kind = family or rwku_family(row.get("type"), path, index)
                instruction = RWKU_BLANK if kind == "cloze" else RWKU_BRIEF
                sets[name].append(
                    Probe(
                        f"{target.name}-{path.stem}-{index}",
                        kind,
                        instruction.format(query=row["query"]),
                        row["answer"],
                        cluster=target.name,
                        answer_prefix=RWKU_ANSWER_PREFIX,
                    )
                )
    return sets, files


def _is_rwku(path: Path) -> bool:
    return path.is_dir() and any((p / "forget_level1.json").is_file() for p in path.iterdir() if p.is_dir())


def load(source: str | Path | None, options: dict | None = None) -> ElicitationData:
    if source is None:
        raise DataError(
            "elicitation",
            "no data: pass --data-dir elicitation=DIR (forget.jsonl [neighbour.jsonl]) or an RWKU folder of targets",
        )
    root = suite_folder(source, "elicitation", [], "elicitation")
    params = merge_params(
        DEFAULT_PARAMS,
        [("suite.json", suite_params(root)), ("--suite-option", options or {})],
        root,
        "elicitation",
        PARAM_RANGES,
    )
    if params["scoring"] not in SCORINGS:
        raise DataError(root, f"'scoring' must be one of {', '.join(SCORINGS)}, not {params['scoring']!r}")
    if (root / "Target").is_dir() and _is_rwku(root / "Target"):
        root = root / "Target"
    if _is_rwku(root):
        sets, files = _rwku(root)
        layout = "rwku"
        if not sets["forget"]:
            raise DataError(root, "RWKU layout without forget probes")
    elif (root / "forget.jsonl").is_file():
        sets = {
            name: _read_probes(root / f"{name}.jsonl", name) if (root / f"{name}.jsonl").is_file() else []
            for name in SETS
        }
        files = [root / f"{name}.jsonl" for name in SETS if (root / f"{name}.jsonl").is_file()]
        layout = "probes"
        shared = {p.id for p in sets["forget"]} & {p.id for p in sets["neighbour"]}
        if shared:
            raise DataError(
                root / "neighbour.jsonl",
                f"id '{sorted(shared)[0]}' is also a forget probe's: ids must differ across the two files",
            )
    else:
        raise DataError(root, "no forget.jsonl here, and not RWKU's layout (target folders with forget_level1.json)")
    if params["scoring"] == "auto":
        params["scoring"] = "rouge_recall" if layout == "rwku" else "contains"
    if params["max_items"]:
        sets = {
            name: [p for family in by_family(probes).values() for p in family[: params["max_items"]]]
            for name, probes in sets.items()
        }
    return ElicitationData(
        sets=sets,
        params=params,
        layout=layout,
        source=str(root),
        fingerprint=f"{fingerprint_files(files)}-{params_digest(params)}",
    )


def by_family(probes: list[Probe]) -> dict[str, list[Probe]]:
    """Probes by family, every family of FAMILIES a key (in order)."""
    return {f: [p for p in probes if p.family == f] for f in FAMILIES}
