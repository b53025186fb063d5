"""ConceptGuard data (docs/suites/conceptguard.md): paired harmful / benign uses of dual-use concepts.

One JSON object per line:

    {"id": ..., "concept": ..., "harmful_text": ..., "benign_text": ...,
     "harmful_query": ..., "benign_query": ...}

D_f = harmful texts, D_r = benign texts; each query's reference answer is its
paired text. `--data-dir conceptguard=FILE.jsonl`, or a folder holding
`pairs.jsonl` or `conceptguard/pairs.jsonl` (the fixture zoo's data folder).

Converting the public ConceptGuard release: write one line per (concept,
harmful example, benign example) with the fields above; keep the concept
label identical across a concept's lines (it is the grouping key of Sep_c)
and the ids unique.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from unlearnbench.data.jsonl import COUNT, fingerprint_files, merge_params, params_digest, read_records
from unlearnbench.errors import DataError, UnlearnbenchError
from unlearnbench.suites.conceptguard import DEFAULT_PARAMS

FIELDS = ("id", "concept", "harmful_text", "benign_text", "harmful_query", "benign_query")
PARAM_RANGES = {"prefix_tokens": COUNT, "max_new_tokens": COUNT, "reference_tokens": COUNT}


@dataclass(frozen=True)
class ConceptPair:
    id: str
    concept: str
    harmful_text: str
    benign_text: str
    harmful_query: str
    benign_query: str


@dataclass(frozen=True)
class ConceptGuardData:
    pairs: list[ConceptPair]
    params: dict
    fingerprint: str
    source: str

    @property
    def concepts(self) -> list[str]:
        return sorted({p.concept for p in self.pairs})

    @property
    def clusters(self) -> dict[str, str]:
        """Each scored item (a pair's harmful or benign side) -> its concept."""
        return {f"{p.id}:{side}": p.concept for p in self.pairs for side in ("harmful", "benign")}


def load(source: str | Path | None, options: dict | None = None) -> ConceptGuardData:
    if source is None:
        raise DataError(
            "conceptguard",
            "no data: pass --data-dir conceptguard=FILE.jsonl (paired schema: " + ", ".join(FIELDS) + ")",
        )
    path = Path(source)
    params = merge_params(DEFAULT_PARAMS, [("--suite-option", options or {})], path, "ConceptGuard", PARAM_RANGES)
    check_judge(params["judge"])
    if path.is_dir():
        for candidate in (path / "pairs.jsonl", path / "conceptguard" / "pairs.jsonl"):
            if candidate.is_file():
                path = candidate
                break
        else:
            raise DataError(path, "no pairs.jsonl (or conceptguard/pairs.jsonl) in this folder")
    pairs = [ConceptPair(**{k: record[k] for k in FIELDS}) for record in read_records(path, FIELDS)]
    digest = fingerprint_files([path]) + "-" + params_digest(params)
    return ConceptGuardData(pairs=pairs, params=params, fingerprint=digest, source=str(path))


def check_judge(spec: str) -> None:
    """Reject a judge spec that cannot work, before any model runs."""
    if spec == "reference":
        return
    kind, _, target = spec.partition(":")
    if kind == "openai" and target.startswith(("http://", "https://")):
        from unlearnbench.judge_endpoint import OpenAIJudge

        OpenAIJudge(target)  # refuses to send OPENAI_API_KEY over plain http to another host
        return
    if kind == "hf" and target:
        from unlearnbench.models.checkpoint import judge_source, resolve

        resolve(judge_source(target))  # CheckpointError naming the path when it is not a usable checkpoint
        return
    raise UnlearnbenchError(
        f"--judge {spec!r}: expected reference, hf:PATH (a local checkpoint) or openai:http(s)://HOST[:PORT]/v1"
    )
