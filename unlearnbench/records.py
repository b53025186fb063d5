"""What one judged check sends to the report (report/schema.add_record reads
it): the verdict, and the first time per checkpoint and suite its metrics,
data and timings; once per suite its preflight, and for a training run's
steps the reference models' values its curve is read against. Free of
pytest, so that a pytest item (gate.py) and a training callback
(callbacks.py) build the same records."""

from __future__ import annotations

from dataclasses import dataclass, field

from unlearnbench.errors import UnlearnbenchError
from unlearnbench.outcome import Outcome
from unlearnbench.report.schema import cap_items
from unlearnbench.suites import SUITES


@dataclass
class SentOnce:
    """What a process has already sent to its report, so that each travels once."""

    metrics: set[tuple[str, str]] = field(default_factory=set)  # (checkpoint, suite)
    preflights: set[str] = field(default_factory=set)  # suites
    reference_values: set[str] = field(default_factory=set)  # suites


def identity(spec) -> dict:
    """The checkpoint's name, and its series and step where it is a step of a training run."""
    series = {"series": spec.series, "step": spec.step} if spec.series is not None else {}
    return {"name": spec.name, **series}


def check_record(
    bench, spec, suite: str, name: str, sent: SentOnce, *, worker: str = "main", items_limit: int | None = None
):
    """(record, verdict) of check `name` of `suite` on checkpoint `spec`.
    A check that cannot be judged raises RecordedError, its record holding
    the error: a broken checkpoint, model or input (an UnlearnbenchError,
    `expected`: one line for the user), or a bug (anything else)."""
    record = {
        "suite": suite,
        "check": name,
        "checkpoint": identity(spec),
        "worker": worker,
        "thresholds_file": str(bench.gates[suite][name].source) if name in bench.gates[suite] else None,
    }
    try:
        verdict, run = bench.judge(spec, suite, name)
    except UnlearnbenchError as exc:
        record["error"] = str(exc)
        raise RecordedError(record, expected=True) from exc
    except Exception as exc:
        record["error"] = f"{type(exc).__name__}: {exc}"
        raise RecordedError(record, expected=False) from exc
    record["verdict"] = verdict.to_dict()
    if run is not None:  # None: skipped without evaluating (its reference model is not given)
        record["checkpoint"] = run.checkpoint | identity(spec)
    key = (spec.name, suite)
    if run is not None and key not in sent.metrics:
        sent.metrics.add(key)
        record["metrics"] = {
            k: cap_items(reported(m), items_limit) if items_limit else reported(m) for k, m in run.metrics.items()
        }
        # The suite's code version travels with its data: a leaderboard never ranks results of two versions
        # together (report/leaderboard.py). Added here, not in the result cache, so cached runs carry it too.
        record["data"] = run.data | {"suite_version": SUITES[suite].version}
        record["timings"] = {"evaluate_s": round(run.seconds, 3), "from_cache": run.cached}
    if run is not None and suite not in sent.preflights:
        sent.preflights.add(suite)
        record["preflight"] = bench.powers.get(suite, [])
    if run is not None and spec.series is not None and suite not in sent.reference_values:
        sent.reference_values.add(suite)
        record["reference_values"] = bench.reference_values(suite)
    if verdict.relative_to and verdict.outcome is not Outcome.SKIP:
        reference = bench.reference_run(verdict.relative_to, suite)
        record["references"] = {verdict.relative_to: reference.checkpoint}
    return record, verdict


class RecordedError(Exception):
    """A check that could not be judged, its record (with the error) made for
    the caller to send; the cause is the original exception."""

    def __init__(self, record: dict, *, expected: bool):
        super().__init__(record["error"])
        self.record, self.expected = record, expected


def reported(metric) -> dict:
    """A metric as the report holds it: without its bootstrap replicates (the
    verdicts carry the intervals decided on; the result cache keeps them)."""
    return metric.to_dict(replicates=False)
