"""Which checkpoints each suite evaluates and which reference models it reads."""

from __future__ import annotations

from unlearnbench.models.checkpoint import CheckpointSpec
from unlearnbench.options import BenchOptions
from unlearnbench.suites import SUITES, sweep_checkpoints, zoo_checkpoints

REFERENCE_ROLES = ("full", "retain")


class Roster:
    def __init__(self, options: BenchOptions):
        self.options = options

    def checkpoints(self, suite: str) -> list[CheckpointSpec]:
        return sweep_checkpoints(suite, self.options.models, self.options.shard, self.options.zoo_extra)

    def reference_spec(self, role: str, suite: str) -> CheckpointSpec | None:
        """--full-model / --retain-model; on the default zoo, the suite's zoo references."""
        spec = getattr(self.options, role)
        if spec is None and not self.options.models:
            zoo_name = dict(SUITES[suite].default_references).get(role)
            spec = zoo_checkpoints([zoo_name])[0] if zoo_name else None
        return spec

    def references(self, suites) -> list[CheckpointSpec]:
        """Every reference model of `suites` (one entry per suite and role)."""
        return [ref for suite in suites for role in REFERENCE_ROLES if (ref := self.reference_spec(role, suite))]

    def roles_of(self, spec: CheckpointSpec, suite: str) -> tuple[str, ...]:
        """The reference roles (full, retain) whose model `spec` is in this suite's run."""
        return tuple(
            role
            for role in REFERENCE_ROLES
            if (ref := self.reference_spec(role, suite)) is not None and ref.source == spec.source
        )

    def zoo_names(self, suites) -> list[str]:
        """The fixture-zoo recipes `suites` evaluate or read as references."""
        return [
            spec.zoo
            for suite in suites
            for spec in [*self.checkpoints(suite), *(self.reference_spec(r, suite) for r in REFERENCE_ROLES)]
            if spec is not None and spec.zoo
        ]
