"""Evaluation while training: `UnlearnbenchCallback`, a transformers
`TrainerCallback` that runs unlearnbench suites on the model being trained,
every N steps, in the training process (docs/during-training.md).

The model is evaluated as it is in memory: no copy of its weights, no reload
from disk. It is put in eval mode for the evaluation and back in the mode it
was in after; the evaluation runs under inference mode, so no gradient, no
optimizer state and no parameter is touched. The reference models load once,
and their results are cached (on disk, as in any run) for the whole training
run. Each evaluation is one step of a series (report/verdicts.py): its
metrics go to the trainer's own `log` under `unlearnbench/<suite>/<metric>`
(TensorBoard, W&B and `state.log_history` receive them as they receive the
loss), and a report is written per evaluation, whose series holds every step
evaluated so far and draws the run's unlearning curve.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path

from transformers import TrainerCallback

from unlearnbench.cache import DEFAULT_CACHE_DIR
from unlearnbench.errors import UnlearnbenchError
from unlearnbench.models.checkpoint import CheckpointSpec
from unlearnbench.options import BenchOptions
from unlearnbench.records import RecordedError, SentOnce, check_record
from unlearnbench.report.schema import add_record, new_report, write_outputs
from unlearnbench.report.verdicts import looks_level, passes_at
from unlearnbench.session import Bench
from unlearnbench.suites import SUITES, default_file

STOP_WHEN = (None, "pass")


class UnlearnbenchCallback(TrainerCallback):
    """Evaluate `suites` on the model under training every `every_steps`
    optimizer steps (and at the end of training, if the last step was not
    one of them).

    `full_model` / `retain_model`: the reference models (paths, as
    `--full-model` / `--retain-model` take them); `data_dirs`: {suite: DIR}
    as `--data-dir SUITE=DIR` (a suite without one has only its built-in
    data, as `smoke` does, or stops training at its start with one line);
    `suite_options`: {suite: {key: value}} as `--suite-option SUITE.KEY=VALUE`
    (`{"dusk": {"max_items": 32}}` evaluates each set's first 32 items);
    `thresholds`: {suite: YAML} for a suite's gate (default: its packaged
    gate); `stop_when="pass"` stops training at the first
    evaluation whose every check passes at the level of its look, alpha /
    (k (k+1)) for the k-th evaluation: over any number of evaluations of a
    model on the bound, the chance of stopping on a false pass stays at most
    alpha. `tokenizer` is needed only where
    the trainer is not given one (`processing_class`)."""

    def __init__(
        self,
        suites: Sequence[str],
        every_steps: int,
        *,
        full_model: str | None = None,
        retain_model: str | None = None,
        data_dirs: Mapping[str, str] | None = None,
        suite_options: Mapping[str, Mapping[str, object]] | None = None,
        thresholds: Mapping[str, str] | None = None,
        stop_when: str | None = None,
        name: str | None = None,
        tokenizer=None,
        cache_dir: str | Path | None = None,
        device: str = "auto",
        seed: int = 0,
        alpha: float = 0.05,
    ):
        unknown = [s for s in suites if s not in SUITES]
        if unknown or not suites:
            raise UnlearnbenchError(
                f"UnlearnbenchCallback: unknown suite(s) {', '.join(unknown) or '(none given)'} "
                f"(known: {', '.join(SUITES)})"
            )
        if not isinstance(every_steps, int) or isinstance(every_steps, bool) or every_steps < 1:
            raise UnlearnbenchError(
                f"UnlearnbenchCallback: every_steps must be a positive integer, not {every_steps!r}"
            )
        if stop_when not in STOP_WHEN:
            raise UnlearnbenchError(f"UnlearnbenchCallback: stop_when must be None or 'pass', not {stop_when!r}")
        self.suites, self.every_steps, self.stop_when = list(suites), every_steps, stop_when
        self.name, self.tokenizer = name, tokenizer
        gates = {
            s: Path(thresholds[s]) if thresholds and s in thresholds else default_file(s, f"thresholds/{s}.yaml")
            for s in self.suites
        }
        missing = [s for s, path in gates.items() if path is None]
        if missing:
            raise UnlearnbenchError(
                f"UnlearnbenchCallback: no gate for {', '.join(missing)}: pass thresholds={{suite: path/to/gate.yaml}}"
            )
        self._gates = gates
        self._options = dict(
            full_model=full_model,
            retain_model=retain_model,
            data_dirs=dict(data_dirs or {}),
            suite_option=[
                f"{suite}.{key}={value}"
                for suite, values in (suite_options or {}).items()
                for key, value in values.items()
            ],
            cache_dir=Path(cache_dir) if cache_dir else DEFAULT_CACHE_DIR,
            device=device,
            seed=seed,
            alpha=alpha,
        )
        self.bench: Bench | None = None
        self.report: dict | None = None
        self.reports: list[Path] = []  # every report written, in step order
        self.evaluated_steps: list[int] = []
        self._sent = SentOnce()
        self._trainer = None

    # ------------------------------------------------------------------ hooks
    def on_train_begin(self, args, state, control, **kwargs):
        """The bench, the gates and the data, checked before the first step: a bad path fails at once."""
        if self.bench is not None:
            return
        self.name = self.name or Path(args.output_dir).name or "training"
        o = self._options
        spec = self._spec(0)
        options = BenchOptions.from_values(
            model=[spec],  # a named model: the references are the ones given here, never the zoo's
            full_model=f"full={o['full_model']}" if o["full_model"] else None,
            retain_model=f"retain={o['retain_model']}" if o["retain_model"] else None,
            data_dir=[
                directory if suite == "*" else f"{suite}={directory}" for suite, directory in o["data_dirs"].items()
            ],
            suite_option=o["suite_option"],
            cache_dir=o["cache_dir"],
            device=o["device"],
            seed=o["seed"],
            alpha=o["alpha"],
        )
        self.bench = Bench(options)
        self.bench.validate_checkpoints()  # the references' files (the model under training is a series step)
        self.bench.prepare_suites(self.suites, self._gates, build_zoo=False)
        self._trainer = _calling_trainer()
        self._run_id = datetime.now().strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)
        self._report_dir = Path(args.output_dir) / "unlearnbench"

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if state.global_step % self.every_steps == 0:
            self._evaluate(args, state, control, model, kwargs)

    def on_train_end(self, args, state, control, model=None, **kwargs):
        if state.global_step not in self.evaluated_steps and state.global_step > 0:
            self._evaluate(args, state, control, model, kwargs)

    # ------------------------------------------------------------- evaluation
    def _spec(self, step: int) -> CheckpointSpec:
        return CheckpointSpec(
            name=f"{self.name}-step-{step}", source=f"training:{self.name}/step-{step}", series=self.name, step=step
        )

    def _evaluate(self, args, state, control, model, hook_kwargs) -> None:
        from unlearnbench.models.handle import ModelHandle

        assert self.bench is not None, "on_train_begin prepares the bench"

        tokenizer = self.tokenizer or hook_kwargs.get("processing_class") or hook_kwargs.get("tokenizer")
        if tokenizer is None or not hasattr(tokenizer, "apply_chat_template"):
            raise UnlearnbenchError(
                "UnlearnbenchCallback: the trainer has no tokenizer (processing_class); pass "
                "UnlearnbenchCallback(..., tokenizer=...)"
            )
        step = state.global_step
        spec = self._spec(step)
        # A PEFT model's adapter layers live inside its base model's own modules: the base runs the adapted model,
        # and its decoder blocks are the ones activation patching drives.
        target = model.get_base_model() if hasattr(model, "get_base_model") else model
        was_training = model.training
        started = time.perf_counter()
        handle = ModelHandle(
            target,
            _own_copy(tokenizer),
            name=spec.name,
            source=spec.source,
            fingerprint=f"training-{self._run_id}-{step}",
            detach=lambda: None,
        )  # never freed here
        self.bench.attach(spec, handle)
        try:
            records = [self._record(spec, suite, check) for suite in self.suites for check in self.bench.gates[suite]]
        finally:
            self.bench.release(spec)  # the finite-logits hook comes off; the weights are the trainer's
            model.train(was_training)
        report = self._write_report(records, args, step, time.perf_counter() - started)
        self.evaluated_steps.append(step)
        logs = {
            f"unlearnbench/{r['suite']}/{name}": metric["value"]
            for r in records
            for name, metric in (r.get("metrics") or {}).items()
            if isinstance(metric.get("value"), (int, float))
        }
        verdict = report["assessment"]["verdicts"][spec.name]
        # This step passes for the run only at the level of its look (report/verdicts.py: a selection among steps).
        level = looks_level(self.bench.options.rule.alpha, len(self.evaluated_steps))
        selected = verdict["verdict"] == "pass" and passes_at(
            [r["verdict"] for r in records if r.get("verdict")], level
        )
        logs["unlearnbench/verdict_pass"] = float(verdict["verdict"] == "pass")
        logs["unlearnbench/verdict_pass_at_look_level"] = float(selected)
        logs["unlearnbench/checks_failed"] = float(verdict["failed"] + verdict["errors"])
        if self._trainer is not None:
            # Its log history and every logging callback (TensorBoard, W&B, ...). Trainer.log clears the flag that
            # has the Trainer log its loss after this hook: kept, so the loss of this step is logged as ever.
            should_log = control.should_log
            self._trainer.log(logs)
            control.should_log = self._trainer.control.should_log = should_log
        else:  # a training loop of its own, not a Trainer: its state's log history, as Trainer.log keeps it
            state.log_history.append({**logs, "step": step})
        if self.stop_when == "pass" and selected:
            control.should_training_stop = True

    def _record(self, spec: CheckpointSpec, suite: str, check: str) -> dict:
        try:
            record, _ = check_record(self.bench, spec, suite, check, self._sent)
        except RecordedError as exc:
            if not exc.expected:
                assert exc.__cause__ is not None  # RecordedError is raised from what broke
                raise exc.__cause__ from None
            record = exc.record
        return record

    def _write_report(self, records: list[dict], args, step: int, seconds: float) -> dict:
        """This evaluation's report: the run's every step so far, so its curve grows with the training."""
        assert self.bench is not None, "on_train_begin prepares the bench"
        if self.report is None:
            o = self._options
            self.report = new_report(
                {
                    "id": self._run_id,
                    "directory": str(self._report_dir.resolve()),
                    "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                    "command": ["UnlearnbenchCallback", *self.suites],
                    "cwd": str(Path.cwd()),
                    "options": {
                        "every_steps": self.every_steps,
                        "stop_when": self.stop_when,
                        "full_model": o["full_model"],
                        "retain_model": o["retain_model"],
                        "data_dirs": o["data_dirs"],
                        "device": o["device"],
                        "output_dir": args.output_dir,
                    },
                    "seed": o["seed"],
                    "decision": self.bench.options.rule.to_dict() | {"text": self.bench.options.rule.describe()},
                    "anchors": {},
                }
            )
        for record in records:
            add_record(self.report, record)
        self.report["run"]["duration_s"] = round(self.report["run"].get("duration_s", 0.0) + seconds, 3)
        directory = self._report_dir / f"step-{step}"
        directory.mkdir(parents=True, exist_ok=True)
        self.reports.append(write_outputs(self.report, directory).json)
        return self.report


def _own_copy(tokenizer):
    """The tokenizer as the evaluation may change it (a pad token set where it has none), the trainer's untouched."""
    import copy

    return copy.deepcopy(tokenizer)


def _calling_trainer():
    """The transformers Trainer whose callback handler is calling this hook:
    callbacks are handed the model, the optimizer and the data loaders, never
    the Trainer, whose `log` is what reaches every logging integration."""
    import sys

    from transformers import Trainer

    frame = sys._getframe(1)
    while frame is not None:
        candidate = frame.f_locals.get("self")
        if isinstance(candidate, Trainer):
            return candidate
        frame = frame.f_back
    return None
