"""Errors a user can act on: each names the file and the problem in one line."""

from __future__ import annotations


class UnlearnbenchError(Exception):
    """Base class: the message is meant to be shown to the user as it is."""


class CheckpointError(UnlearnbenchError):
    def __init__(self, path: object, problem: str):
        self.path = str(path)
        self.problem = problem
        super().__init__(f"checkpoint {self.path}: {problem}")


class ThresholdsError(UnlearnbenchError):
    def __init__(self, path: object, problem: str, check: str | None = None):
        self.path = str(path)
        self.check = check
        self.problem = problem
        where = f" check '{check}'" if check else ""
        super().__init__(f"thresholds {self.path}{where}: {problem}")


class DataError(UnlearnbenchError):
    def __init__(self, path: object, problem: str, line: int | None = None):
        self.path = str(path)
        self.line = line
        self.problem = problem
        where = f":{line}" if line is not None else ""
        super().__init__(f"data {self.path}{where}: {problem}")


class NonFiniteOutputError(CheckpointError):
    """The model computed NaN or inf: an error of that checkpoint (its weights),
    never a number that reaches a verdict."""


class MissingCapability(UnlearnbenchError):
    """The model's backend cannot do what a metric needs (an endpoint has no
    weights to patch, no full next-token distribution, or no tokenizer): the
    metrics that need it are unavailable with this reason, the others run."""
