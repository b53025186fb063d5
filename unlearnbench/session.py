"""`Bench`: one evaluation session, the façade the pytest plugin, the CLI,
the training callback and a notebook drive (nothing here imports pytest).
Each job is a part of `unlearnbench.engine`: `roster` (which checkpoints and
references), `models`, `store` (data), `results` (metrics, computed once, and
what failed) and `judging` (gates, power, Holm, verdicts)."""

from __future__ import annotations

from pathlib import Path

from unlearnbench.cache import DiskCache
from unlearnbench.contracts import SuiteData
from unlearnbench.engine.data import SuiteDataStore
from unlearnbench.engine.judging import Judging
from unlearnbench.engine.models import ModelPool
from unlearnbench.engine.results import Results, SuiteRun
from unlearnbench.engine.roster import REFERENCE_ROLES, Roster
from unlearnbench.errors import UnlearnbenchError
from unlearnbench.models.checkpoint import CheckpointSpec
from unlearnbench.models.interface import LanguageModel
from unlearnbench.options import BenchOptions
from unlearnbench.suites import SUITES
from unlearnbench.thresholds import Check, Verdict

__all__ = ["REFERENCE_ROLES", "Bench", "BenchOptions", "SuiteRun"]


class Bench:
    def __init__(self, options: BenchOptions):
        self.options = options
        self.cache = DiskCache(options.cache_dir, secret=options.cache_secret)
        self.gates: dict[str, dict[str, Check]] = {}
        self.roster = Roster(options)
        self.models = ModelPool(options)
        self.store = SuiteDataStore(options, self.cache, self.gates)
        self.results = Results(options, self.cache, self.roster, self.models, self.store)
        self.judging = Judging(options, self.gates, self.roster, self.results)

    def prepare_suites(self, suites: list[str], thresholds_files: dict[str, Path], *, build_zoo: bool = True) -> None:
        """Load and validate every collected suite's gate and data, before any model
        runs; then build the fixture-zoo checkpoints the run needs (cached) and
        run each suite's preflight hook, whose refusals fail that suite's checks
        of a checkpoint in one line. `build_zoo=False` (pytest --collect-only)
        stops before the zoo: listing tests never trains a model."""
        self.judging.load_gates(suites, thresholds_files)
        for suite in suites:
            if self.checkpoints(suite):  # a suite with nothing to run (utility on the zoo) reads no data
                self.store.data(suite)
        if not build_zoo:
            return
        self.models.build_zoo(self.roster.zoo_names(suites))
        for suite in suites:
            preflight = SUITES[suite].hook("preflight")
            if preflight is not None:
                for name, problem in preflight(self, suite).items():
                    self.results.refuse(name, suite, problem)

    def validate_checkpoints(self) -> None:
        self.models.validate()

    def checkpoints(self, suite: str) -> list[CheckpointSpec]:
        return self.roster.checkpoints(suite)

    def reference_spec(self, role: str, suite: str) -> CheckpointSpec | None:
        return self.roster.reference_spec(role, suite)

    def session_reference(self, role: str) -> LanguageModel | None:
        """The reference model of the run, whichever collected suite asks."""
        specs = {spec.source: spec for suite in self.gates if (spec := self.reference_spec(role, suite))}
        if len(specs) > 1:
            raise UnlearnbenchError(f"collected suites default to different {role} models: {', '.join(specs)}")
        return self.handle(next(iter(specs.values()))) if specs else None

    def spec_path(self, spec: CheckpointSpec) -> str:
        return self.models.spec_path(spec)

    def attach(self, spec: CheckpointSpec, handle: LanguageModel) -> None:
        self.models.attach(spec, handle)

    def handle(self, spec: CheckpointSpec) -> LanguageModel:
        return self.models.handle(spec)

    def release(self, spec: CheckpointSpec) -> None:
        """Free a checkpoint's model after its last test (reference models stay):
        a sweep holds the references and one checkpoint per process. Its
        results stay; a later test of it would load it again."""
        self.models.release(spec, pinned=self.roster.references(self.gates))

    def data(self, suite: str) -> SuiteData:
        return self.store.data(suite)

    def run(self, spec: CheckpointSpec, suite: str) -> SuiteRun:
        return self.results.run(spec, suite)

    def reference_run(self, role: str, suite: str) -> SuiteRun | None:
        return self.results.reference_run(role, suite)

    def reference_values(self, suite: str) -> dict[str, dict[str, float]]:
        return self.results.reference_values(suite)

    def judge(self, spec: CheckpointSpec, suite: str, check_name: str) -> tuple[Verdict, SuiteRun | None]:
        return self.judging.judge(spec, suite, check_name)

    def power(self, suite: str) -> list[dict]:
        return self.judging.power(suite)

    @property
    def powers(self) -> dict[str, list[dict]]:
        return self.judging.powers
