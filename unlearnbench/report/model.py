"""The run report as typed values: `Report.read(path)` upgrades an older
schema in one place (`upgrade`), checks every part against its type
(outcomes and codes are enums, numbers are numbers) and gives a value that
mypy checks its readers against; `Report.to_dict()` is the document again,
field for field (fields this model does not name are kept as they were).

Schema `unlearnbench.report` version 3; what versions 1 and 2 lacked is
what `upgrade` adds (report/schema.py describes every field)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from unlearnbench.outcome import Code, Outcome

SCHEMA = "unlearnbench.report"
SCHEMA_VERSION = 3
READABLE_VERSIONS = (1, 2, 3)


class _Part(BaseModel):
    """A part of the report: its named fields typed, any other field kept as written."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)


class CheckResult(_Part):
    """One check's verdict on one checkpoint (thresholds.Verdict.to_dict), or the error that stopped it."""

    check: str
    outcome: Outcome
    reason: str = ""
    code: Code | None = None
    suite: str | None = None
    metric: str | None = None
    direction: str | None = None
    rule: str | None = None  # the decision rule that judged it, with its alpha and correction
    alpha: float | None = None
    correction: str | None = None
    strict_ci: bool | None = None
    value: float | None = None
    ci: list[float | None] | None = None
    bound: float | None = None
    relative_to: str | None = None
    reference_value: float | None = None
    margin: float | None = None
    difference: float | None = None
    decision_ci: list[float | None] | None = None
    decided_by: str | None = None
    lean: str | None = None
    p_value: float | None = None
    p_adjusted: float | None = None
    n: int | None = None
    worker: str | None = None


class MetricValue(_Part):
    """One metric on one checkpoint (metrics.core.MetricResult.to_dict, or an Unavailable's); its name is its
    key in the suite's `metrics`, and repeated here when the run wrote it."""

    name: str | None = None
    value: float | None = None
    n: int | None = None
    ci: list[float | None] | None = None
    higher_is_better: bool | None = None
    unavailable: str | None = None
    per_item: dict[str, Any] | None = None
    details: dict[str, Any] | None = None
    params: dict[str, Any] | None = None
    clusters: dict[str, str] | None = None


class SuiteResult(_Part):
    data: dict[str, Any] = Field(default_factory=dict)
    metrics: dict[str, MetricValue] = Field(default_factory=dict)
    checks: dict[str, CheckResult] = Field(default_factory=dict)
    timings: dict[str, Any] = Field(default_factory=dict)


class Lost(_Part):
    """A checkpoint whose xdist worker died: why, and the tests that never reported."""

    reason: str
    tests: list[str] = Field(default_factory=list)


class CheckpointResult(_Part):
    info: dict[str, Any] = Field(default_factory=dict)
    suites: dict[str, SuiteResult] = Field(default_factory=dict)
    lost: Lost | None = None


class DecisionRule(_Part):
    """How the run decided its verdicts (rule.DecisionRule.to_dict, with its text)."""

    rule: str | None = None
    alpha: float | None = None
    power: float | None = None
    correction: str | None = None
    strict_ci: bool = False
    text: str = ""


class RunInfo(_Part):
    id: str = ""
    directory: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    duration_s: float | None = None
    command: list[str] | str | None = None
    cwd: str | None = None
    seed: int | None = None
    decision: DecisionRule = Field(default_factory=DecisionRule)
    anchors: dict[str, str] = Field(default_factory=dict)  # checkpoint name -> the reference role it plays
    thresholds_files: dict[str, str] = Field(default_factory=dict)
    reference_code: dict[str, str] = Field(default_factory=dict)
    preflight: dict[str, dict[str, Any]] = Field(default_factory=dict)
    cache: dict[str, int] = Field(default_factory=dict)
    exit_status: int | None = None


class Summary(_Part):
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    inconclusive: int = 0
    errors: int = 0


class Report(_Part):
    schema_name: str = Field(SCHEMA, alias="schema")
    schema_version: int = SCHEMA_VERSION
    run: RunInfo = Field(default_factory=RunInfo)
    environment: dict[str, Any] = Field(default_factory=dict)
    references: dict[str, dict[str, Any] | None] = Field(default_factory=dict)
    checkpoints: dict[str, CheckpointResult] = Field(default_factory=dict)
    summary: Summary = Field(default_factory=Summary)
    assessment: dict[str, Any] | None = None
    reference_values: dict[str, dict[str, dict[str, float | None]]] | None = None
    regressions: list[dict[str, Any]] | None = None
    non_finite: list[dict[str, Any]] | None = None
    merged_from: list[dict[str, Any]] | None = None

    @classmethod
    def read(cls, path: Path | str) -> Report:
        """The report at `path`, upgraded to this schema version and checked; a ValueError naming the file
        and what is wrong otherwise."""
        try:
            raw = json.loads(Path(path).read_text())
        except FileNotFoundError:
            raise ValueError(f"{path}: file not found") from None
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: invalid JSON ({exc.msg}, line {exc.lineno})") from None
        return cls.of(raw, str(path))

    @classmethod
    def of(cls, raw: Any, where: str = "report") -> Report:
        """`raw` (a report's JSON document) upgraded and checked."""
        try:
            return cls.model_validate(upgrade(raw, where))
        except ValidationError as exc:
            first = exc.errors()[0]
            at = ".".join(str(part) for part in first["loc"])
            raise ValueError(f"{where}: {at}: {first['msg']} ({exc.error_count()} problem(s))") from None

    def checks(self) -> Iterator[tuple[str, str, CheckResult]]:
        """(checkpoint, suite, check) for every check of the run."""
        for name, checkpoint in self.checkpoints.items():
            for suite, result in checkpoint.suites.items():
                for check in result.checks.values():
                    yield name, suite, check


def upgrade(raw: Any, where: str = "report") -> dict[str, Any]:
    """A report document of any readable version as this version writes it (a new dict; `raw` is left as
    it was): the one place older schemas are handled.

    - version 1 had `leaderboard` where version 2 has `assessment` (both are recomputed when a report is
      read, report/verdicts.py) and no `run.anchors` (the anchors are then found by fingerprint);
    - versions 1 and 2 had `run.strict_ci` instead of `run.decision`, and verdicts without their decision
      fields (p-values, decision interval, lean): those stay absent."""
    if not isinstance(raw, dict) or raw.get("schema") != SCHEMA:
        raise ValueError(f"{where}: not an unlearnbench report")
    version = raw.get("schema_version")
    if version not in READABLE_VERSIONS:
        raise ValueError(
            f"{where}: report schema version {version}, expected one of {', '.join(map(str, READABLE_VERSIONS))}"
        )
    report: dict[str, Any] = json.loads(json.dumps(raw))
    report.pop("leaderboard", None)
    if version < 3:
        run = report.setdefault("run", {})
        strict = bool(run.pop("strict_ci", False))
        run.setdefault(
            "decision", {"strict_ci": strict, "text": "strict CI" if strict else "not recorded (older report)"}
        )
        report["upgraded_from"] = version
        report["schema_version"] = SCHEMA_VERSION
    return report
