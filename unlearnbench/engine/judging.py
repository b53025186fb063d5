"""The run's gates and their verdicts: each check's power from the reference
models (once per suite), its decision on a checkpoint's run, and Holm's
correction across every tested check of the checkpoint."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from unlearnbench import progress
from unlearnbench.engine.results import Results, SuiteRun
from unlearnbench.engine.roster import Roster
from unlearnbench.errors import UnlearnbenchError
from unlearnbench.evidence import holm_adjusted
from unlearnbench.metrics.core import MetricResult, Unavailable, seeded
from unlearnbench.models.checkpoint import CheckpointSpec
from unlearnbench.options import BenchOptions
from unlearnbench.outcome import Code, Outcome
from unlearnbench.suites import SUITES
from unlearnbench.thresholds import Check, Verdict, apply_overrides, load_suite_thresholds, power_line

Metrics = Mapping[str, MetricResult | Unavailable]  # a suite's metrics on one model


class Judging:
    def __init__(self, options: BenchOptions, gates: dict[str, dict[str, Check]], roster: Roster, results: Results):
        self.options, self.roster, self.results = options, roster, results
        self.gates = gates  # suite -> check name -> check: the run's, filled by load_gates
        self.powers: dict[str, list[dict[str, Any]]] = {}  # suite -> its checks' power (Check.power), once per suite
        self._holm: dict[str, dict[tuple[str, str], float]] = {}  # checkpoint -> {(suite, check): Holm-adjusted p}

    def load_gates(self, suites: list[str], thresholds_files: dict[str, Path]) -> None:
        """Each suite's gate from its YAML, with the run's --thresholds overrides."""
        for suite in suites:
            if suite not in SUITES:
                raise UnlearnbenchError(f"unknown suite '{suite}' (known: {', '.join(SUITES)})")
            spec = SUITES[suite]
            self.gates[suite] = load_suite_thresholds(
                thresholds_files[suite], suite, spec.known_metrics, spec.scale_of, spec.kind_of
            )
        if self.options.thresholds_override:
            known = {name: spec.known_metrics for name, spec in SUITES.items()}
            apply_overrides(self.options.thresholds_override, self.gates, known)

    def judge(self, spec: CheckpointSpec, suite: str, check_name: str) -> tuple[Verdict, SuiteRun | None]:
        """(verdict, SuiteRun) of one check on one checkpoint; under --correction
        holm the check is decided within its family, every enabled check of the
        suite on this checkpoint."""
        check = self.gates[suite].get(check_name)
        if check is None:
            raise UnlearnbenchError(
                f"suite {suite} has no check '{check_name}' in its thresholds (it has: {', '.join(self.gates[suite])})"
            )
        if (
            check.relative_to
            and check.or_bound is None
            and self.roster.reference_spec(check.relative_to, suite) is None
        ):
            return check.judge({}, None, rule=self.options.rule), None  # skipped, naming the missing option
        # The references first: their runs, and the preflight they allow, come before the candidate's.
        reference, others = self._judge_inputs(check, suite)
        self.power(suite)
        run = self.results.run(spec, suite)
        rule = self.options.rule
        roles = self.roster.roles_of(spec, suite)
        if check.relative_to in roles and check.or_bound is None:  # with an or_bound it may be judged absolutely
            return check.on_its_reference(check.relative_to, rule), run
        against = SUITES[suite].measured_against.get(check.metric)
        if against in roles:  # PL, RD, forget quality: the model against itself, 0 by construction
            return check.on_its_reference(against, rule, f"which {check.metric} measures it against"), run
        with seeded(self.options.seed):  # the decision's bootstrap resamples are the metrics' own
            verdict = check.judge(run.metrics, reference, others=others, rule=rule)
            if rule.correction == "holm" and verdict.outcome is Outcome.FAIL and verdict.code is Code.DECIDED:
                adjusted = self._holm_adjusted(spec, suite)
                verdict = check.judge(
                    run.metrics, reference, others=others, rule=rule, p_adjusted=adjusted[(suite, check.name)]
                )
        return verdict, run

    def _holm_adjusted(self, spec: CheckpointSpec, asking: str) -> dict[tuple[str, str], float]:
        """Holm-adjusted p-values of every tested check of the checkpoint in
        the run, all suites together (its family: a checkpoint's FAIL is
        controlled at alpha across all of its checks), keyed (suite, check);
        computed once per checkpoint. A suite that cannot evaluate on it
        (its checks fail with their own reason) adds nothing to the family;
        one that does not run on it (smoke on an unlearned model) is not in
        it; `asking`, the suite of the check being judged, always is (a
        training run's step is no listed checkpoint of any suite)."""
        cached = self._holm.get(spec.name)
        if cached is None or not any(suite == asking for suite, _ in cached):  # a suite evaluated since
            family = {}
            for suite, gate in self.gates.items():
                if (
                    suite != asking
                    and spec.name not in {s.name for s in self.roster.checkpoints(suite)}
                    and not self.results.has_run(spec, suite)
                ):
                    continue
                try:
                    run = self.results.run(spec, suite)
                except UnlearnbenchError:
                    continue
                roles = self.roster.roles_of(spec, suite)
                against = SUITES[suite].measured_against
                for check in gate.values():
                    if (
                        not check.enabled
                        or (check.relative_to in roles and check.or_bound is None)
                        or against.get(check.metric) in roles
                        or (
                            check.relative_to
                            and check.or_bound is None
                            and self.roster.reference_spec(check.relative_to, suite) is None
                        )
                    ):
                        continue
                    try:
                        reference, others = self._judge_inputs(check, suite)
                    except UnlearnbenchError:
                        continue
                    judged = check.judge(run.metrics, reference, others=others, rule=self.options.rule)
                    if _tested(judged) and judged.p_value is not None:
                        family[(suite, check.name)] = judged.p_value
            self._holm[spec.name] = holm_adjusted(family, self.options.rule.alpha)
        return self._holm[spec.name]

    def power(self, suite: str) -> list[dict[str, Any]]:
        """Each check's power from the suite's reference models (Check.power),
        computed once, its underpowered checks printed as they are found."""
        if suite not in self.powers:
            roles = {role for check in self.gates[suite].values() for role in check.reference_roles}
            references = {}
            for role in sorted(roles):
                try:
                    run = self.results.reference_run(role, suite)
                except UnlearnbenchError:  # a broken reference fails the checks relative to it, with its reason
                    run = None
                references[role] = run.metrics if run else None
            with seeded(self.options.seed):
                found = [p for check in self.gates[suite].values() if (p := check.power(references, self.options.rule))]
            self.powers[suite] = found
            for power in found:
                if power["underpowered"]:
                    progress.note(power_line(power))
        return self.powers[suite]

    def _judge_inputs(self, check: Check, suite: str) -> tuple[Metrics | None, dict[str, Metrics | None]]:
        """(reference metrics, other reference models' metrics) a check's judgement reads."""
        reference = self.results.reference_run(check.relative_to, suite) if check.relative_to else None
        others: dict[str, Metrics | None] = {}
        for role in check.reference_roles:
            if role != check.relative_to and (reference is not None or role == "full"):
                other = self.results.reference_run(role, suite)
                others[role] = other.metrics if other else None
        return reference.metrics if reference else None, others


def _tested(verdict: Verdict) -> bool:
    """Whether the interval rule tested this verdict (a member of its Holm family)."""
    return verdict.p_value is not None and (verdict.decided_by == "interval" or verdict.underpowered)
