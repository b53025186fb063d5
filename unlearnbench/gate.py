"""`Gate`: what a suite test calls (the `gate` fixture, or a YAML check's
item): judge a check of the suite on the test's checkpoint, send the verdict
and metrics to the report, then pass, skip or fail the test."""

from __future__ import annotations

import json
import os

import pytest

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
        from unlearnbench.errors import UnlearnbenchError
        from unlearnbench.report.schema import cap_items

        name = name or self.node.originalname.removeprefix("test_")
        bench = self.state.bench
        record = {
            "suite": self.suite,
            "check": name,
            "checkpoint": self._identity(),
            "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
            "thresholds_file": str(bench.gates[self.suite][name].source) if name in bench.gates[self.suite] else None,
        }
        try:
            verdict, run = bench.judge(self.checkpoint, self.suite, name)
        except UnlearnbenchError as exc:
            record["error"] = str(exc)
            self._send(record)
            if self.state.config.getoption("tbstyle") == "long":
                raise
            verdict = None
        except Exception as exc:
            record["error"] = f"{type(exc).__name__}: {exc}"
            self._send(record)
            raise
        if verdict is None:
            # A broken checkpoint, model or input: one line, not a traceback
            # through our internals (--tb=long shows it). Failed outside the
            # except block, so no chained exception is printed either.
            pytest.fail(record["error"], pytrace=False)
        record["verdict"] = verdict.to_dict()
        if run is not None:  # None: skipped without evaluating (its reference model is not given)
            record["checkpoint"] = run.checkpoint | self._identity()
        key = (self.checkpoint.name, self.suite)
        if run is not None and key not in self.state.sent_metrics:  # metrics travel once per checkpoint and suite
            self.state.sent_metrics.add(key)
            limit = self.state.config.getoption("report_items")
            record["metrics"] = {k: cap_items(reported(m), limit) if limit else reported(m)
                                 for k, m in run.metrics.items()}
            record["data"] = run.data
            record["timings"] = {"evaluate_s": round(run.seconds, 3), "from_cache": run.cached}
        if run is not None and self.suite not in self.state.sent_preflights:  # once per suite
            self.state.sent_preflights.add(self.suite)
            record["preflight"] = bench.powers.get(self.suite, [])
        if run is not None and self.checkpoint.series is not None and self.suite not in self.state.sent_reference_values:
            self.state.sent_reference_values.add(self.suite)  # once per suite: a training run's curve reads them
            record["reference_values"] = bench.reference_values(self.suite)
        if verdict.relative_to and verdict.outcome not in ("skip", "error"):
            reference = bench.reference_run(verdict.relative_to, self.suite)
            record["references"] = {verdict.relative_to: reference.checkpoint}
        self._send(record)
        if verdict.outcome == "skip":
            pytest.skip(verdict.reason)
        if verdict.outcome == "inconclusive":  # never a pass; --strict-ci made it a failure already
            message = f"{self.checkpoint.name} {self.suite}.{name}: {verdict.reason}"
            if self.state.config.getoption("fail_inconclusive"):
                pytest.fail(message + "; --fail-inconclusive fails it", pytrace=False)
            pytest.skip(message)
        if verdict.outcome == "fail":
            pytest.fail(f"{self.checkpoint.name} {self.suite}.{name}: {verdict.reason}\n"
                        f"  rationale: {verdict.rationale}", pytrace=False)
        return verdict

    def no_regression(self):
        """Compare this checkpoint's metrics with --baseline under the
        --fail-on-regression rules; skip without a baseline."""
        state = self.state
        if state.baseline is None:
            pytest.skip("no --baseline given")
        from unlearnbench.report.baseline import baseline_checkpoint, regressions
        from unlearnbench.session import REFERENCE_ROLES

        source = self.state.config.getoption("baseline")
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
        rows = regressions({k: m.to_dict() for k, m in run.metrics.items()}, base_metrics, self.suite,
                           state.regression_rules, references)
        if not rows:
            pytest.skip(f"no --fail-on-regression rule names a {self.suite} metric")
        bad = [r for r in rows if r["regressed"]]
        self._send({"suite": self.suite, "checkpoint": {"name": self.checkpoint.name},
                    "regressions": [r | {"checkpoint": self.checkpoint.name, "suite": self.suite} for r in bad]})
        if bad:
            pytest.fail("; ".join(f"{r['metric']} = {r['value']:.4g}, baseline {r['baseline']:.4g}: worse by "
                                  f"{r['worse_by']:.4g} > {r['allowed']:.4g}"
                                  + (f" (distance to its ideal {r['ideal']:.4g})" if "ideal" in r else "")
                                  for r in bad), pytrace=False)

    def _identity(self) -> dict:
        """The checkpoint's name, and its series and step where it is a step of a training run."""
        spec = self.checkpoint
        series = {"series": spec.series, "step": spec.step} if spec.series is not None else {}
        return {"name": spec.name, **series}

    def _send(self, record: dict) -> None:
        self.node.user_properties.append((RECORD_KEY, json.dumps(record)))


def reported(metric) -> dict:
    """A metric as the report holds it: without its bootstrap replicates (the
    verdicts carry the intervals decided on; the result cache keeps them)."""
    out = metric.to_dict()
    out.pop("replicates", None)
    return out
