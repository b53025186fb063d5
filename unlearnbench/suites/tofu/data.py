"""TOFU data in its own layout (docs/suites/tofu.md): the JSON-lines files of
locuslab/TOFU, read from a local folder (or the zoo's data folder, which
holds a synthetic set under tofu/) or `hf:locuslab/TOFU` (the local HF
cache; a download only where the environment allows it).

- `forget10_perturbed`: question, answer, paraphrased_answer, perturbed_answer
  (a list): the forget set, with what the truth ratio compares;
- `retain_perturbed`: the same fields, for the retain set;
- `real_authors_perturbed`, `world_facts_perturbed`: question, answer,
  perturbed_answer (the options the probability is normalised over);
- `holdout10`: question, answer (never trained on: privleak's non-members).

`forget_split=forget05` (with `holdout05`) or `forget01` picks the smaller
splits; `max_items` keeps the first N items of each set (0: all). A
`suite.json` in the folder sets parameters for its data (--suite-option
tofu.KEY=VALUE overrides them).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from unlearnbench.data.jsonl import (
    COUNT,
    COUNT_OR_ALL,
    PROPORTION,
    fingerprint_files,
    hf_snapshot,
    merge_params,
    params_digest,
    read_records,
    suite_params,
)
from unlearnbench.data.openunlearning import AUTO, convention_params
from unlearnbench.errors import DataError

# OpenUnlearning's generation default is 200 new tokens; a folder's suite.json may set its own (the zoo's
# short answers need 32). privleak scores answers with Min-K%++ (docs/suites/tofu.md); convention=reference
# computes it as OpenUnlearning's configuration does (data/openunlearning.py).
DEFAULT_PARAMS = {
    "forget_split": "forget10",
    "max_items": 0,
    "max_new_tokens": 200,
    "mink_k": 0.2,
    "privleak_score": "minkpp",
    "convention": "spec",
    "reference_system_prompt": AUTO,
}
PARAM_RANGES = {"max_items": COUNT_OR_ALL, "max_new_tokens": COUNT, "mink_k": PROPORTION}
FORGET_SPLITS = ("forget01", "forget05", "forget10")
SETS = ("forget", "retain", "real_authors", "world_facts", "holdout")


@dataclass(frozen=True)
class TofuItem:
    id: str
    question: str
    answer: str
    paraphrased: str | None  # forget and retain sets
    perturbed: tuple[str, ...]  # empty for the holdout set
    cluster: str  # the author it asks about (docs/suites/tofu.md)


@dataclass(frozen=True)
class TofuData:
    sets: dict[str, list[TofuItem]]
    params: dict
    fingerprint: str
    source: str

    @property
    def clusters(self) -> dict[str, str]:
        return {item.id: item.cluster for items in self.sets.values() for item in items}


# TOFU's files list 20 questions per fictitious author, author after author:
# without a `cluster` field, an item of those sets is in the cluster of its
# index // 20; real authors and world facts are one cluster per question.
QUESTIONS_PER_AUTHOR = 20
AUTHOR_SETS = ("forget", "retain", "holdout")


def _files(split: str) -> dict[str, str]:
    return {
        "forget": f"{split}_perturbed",
        "retain": "retain_perturbed",
        "real_authors": "real_authors_perturbed",
        "world_facts": "world_facts_perturbed",
        "holdout": split.replace("forget", "holdout"),
    }


def _read(path: Path, name: str, strings: tuple[str, ...], lists: tuple[str, ...]) -> list[TofuItem]:
    rows = read_records(path, strings, id_field="", lists=lists)

    def cluster(i: int, row: dict) -> str:
        if row.get("cluster") is not None:
            return f"{name}:{row['cluster']}"
        return f"{name}:author-{i // QUESTIONS_PER_AUTHOR}" if name in AUTHOR_SETS else f"{name}-{i}"

    return [
        TofuItem(
            f"{name}-{i}",
            row["question"],
            row["answer"],
            row.get("paraphrased_answer"),
            tuple(row.get("perturbed_answer") or ()),
            cluster(i, row),
        )
        for i, row in enumerate(rows)
    ]


def load(source: str | Path | None, options: dict | None = None) -> TofuData:
    if source is None:
        raise DataError("tofu", "no data: pass --data-dir tofu=DIR (the locuslab/TOFU files) or tofu=hf:locuslab/TOFU")
    root = hf_snapshot(str(source)[3:], ["*.json"]) if str(source).startswith("hf:") else Path(source)
    if (root / "tofu").is_dir():
        root = root / "tofu"  # the zoo's data folder holds several suites
    params = merge_params(
        DEFAULT_PARAMS,
        [("suite.json", suite_params(root)), ("--suite-option", options or {})],
        root,
        "TOFU",
        PARAM_RANGES,
    )
    if params["forget_split"] not in FORGET_SPLITS:
        raise DataError(
            root,
            f"--suite-option tofu.forget_split={params['forget_split']!r}: expected one of {', '.join(FORGET_SPLITS)}",
        )
    params = convention_params(params, options or {}, root, "tofu")
    qa, perturbed = ("question", "answer"), ("perturbed_answer",)
    fields = {
        "forget": (qa + ("paraphrased_answer",), perturbed),
        "retain": (qa + ("paraphrased_answer",), perturbed),
        "real_authors": (qa, perturbed),
        "world_facts": (qa, perturbed),
        "holdout": (qa, ()),
    }
    sets, paths = {}, []
    for name, stem in _files(params["forget_split"]).items():
        path = next((p for p in (root / f"{stem}.json", root / f"{stem}.jsonl") if p.is_file()), None)
        if path is None:
            raise DataError(
                root / f"{stem}.json",
                "file not found (the TOFU layout: forget10_perturbed, "
                "retain_perturbed, real_authors_perturbed, "
                "world_facts_perturbed, holdout10)",
            )
        items = _read(path, name, *fields[name])
        sets[name] = items[: params["max_items"]] if params["max_items"] else items
        paths.append(path)
    return TofuData(
        sets=sets, params=params, fingerprint=f"{fingerprint_files(paths)}-{params_digest(params)}", source=str(root)
    )
