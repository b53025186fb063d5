"""`Gate`: what a suite test calls (the `gate` fixture, or a YAML check's
item): judge a check of the suite on the test's checkpoint, send the verdict
and metrics to the report, then pass, skip or fail the test."""

from __future__ import annotations

import json
import os

import pytest

from unlearnbench.outcome import Outcome
from unlearnbench.run_state import RECORD_KEY, RunState


class Gate:
    def __init__(self, state: RunState, suite: str, checkpoint, node: pytest.Item):
        self.state = state
        self.suite = suite
        self.checkpoint = checkpoint
        self.node = node

    def check(self, name: str | None = None):
        """Judge check `name` (default: the test's name without `test_`),
        record the verdict for the report, then skip, fail or pass the test."""
        from unlearnbench.records import RecordedError, check_record

        name = name or getattr(self.node, "originalname", self.node.name).removeprefix("test_")
        try:
            record, verdict = check_record(
                self.state.bench,
                self.checkpoint,
                self.suite,
                name,
                self.state.sent,
                worker=os.environ.get("PYTEST_XDIST_WORKER", "main"),
                items_limit=self.state.run_options.report_items,
            )
        except RecordedError as exc:
            self._send(exc.record)
            if not exc.expected or self.state.run_options.long_tracebacks:
                assert exc.__cause__ is not None  # RecordedError is raised from what broke
                raise exc.__cause__ from None
            record, verdict = exc.record, None
        if verdict is None:
            # A broken checkpoint, model or input: one line, not a traceback
            # through our internals (--tb=long shows it). Failed outside the
            # except block, so no chained exception is printed either.
            pytest.fail(record["error"], pytrace=False)
        self._send(record)
        if verdict.outcome is Outcome.SKIP:
            pytest.skip(verdict.reason)
        if verdict.outcome is Outcome.INCONCLUSIVE:  # never a pass; --strict-ci made it a failure already
            message = f"{self.checkpoint.name} {self.suite}.{name}: {verdict.reason}"
            if self.state.run_options.fail_inconclusive:
                pytest.fail(message + "; --fail-inconclusive fails it", pytrace=False)
            pytest.skip(message)
        if verdict.outcome is Outcome.FAIL:
            pytest.fail(
                f"{self.checkpoint.name} {self.suite}.{name}: {verdict.reason}\n  rationale: {verdict.rationale}",
                pytrace=False,
            )
        return verdict

    def no_regression(self):
        """Compare this checkpoint's metrics with --baseline under the
        --fail-on-regression rules; skip without a baseline."""
        state = self.state
        if state.baseline is None:
            pytest.skip("no --baseline given")
        from unlearnbench.engine.roster import REFERENCE_ROLES
        from unlearnbench.report.baseline import baseline_checkpoint, regressions

        source = str(state.run_options.baseline)
        run = state.bench.run(self.checkpoint, self.suite)
        base = baseline_checkpoint(state.baseline, self.checkpoint.name, source)
        base_metrics = base["suites"].get(self.suite, {}).get("metrics")
        if not base_metrics:
            pytest.skip(f"baseline {source} has no {self.suite} results")
        references = {}
        for role in {getattr(m, "ideal", None) for m in run.metrics.values()} & set(REFERENCE_ROLES):
            reference = state.bench.reference_run(role, self.suite)
            if reference is not None:
                references[role] = {k: m.to_dict() for k, m in reference.metrics.items()}
        rows = regressions(
            {k: m.to_dict() for k, m in run.metrics.items()},
            base_metrics,
            self.suite,
            state.run_options.regression_rules,
            references,
        )
        if not rows:
            pytest.skip(f"no --fail-on-regression rule names a {self.suite} metric")
        bad = [r for r in rows if r["regressed"]]
        self._send(
            {
                "suite": self.suite,
                "checkpoint": {"name": self.checkpoint.name},
                "regressions": [r | {"checkpoint": self.checkpoint.name, "suite": self.suite} for r in bad],
            }
        )
        if bad:
            pytest.fail(
                "; ".join(
                    f"{r['metric']} = {r['value']:.4g}, baseline {r['baseline']:.4g}: worse by "
                    f"{r['worse_by']:.4g} > {r['allowed']:.4g}"
                    + (f" (distance to its ideal {r['ideal']:.4g})" if "ideal" in r else "")
                    for r in bad
                ),
                pytrace=False,
            )

    def _send(self, record: dict) -> None:
        self.node.user_properties.append((RECORD_KEY, json.dumps(record)))
