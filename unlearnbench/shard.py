"""`--shard I/N`: a deterministic split of a sweep's checkpoints (not of its
tests), so any scheduler can run one shard per job (Slurm job arrays, CI
matrices, Kubernetes indexed jobs) and `unlearnbench merge` joins the reports.

Checkpoint k of the run's ordered list (`suites.run_order`: the `--model`
entries, then each `--model-dir`'s sorted discoveries; on the default zoo,
the suites' zoo checkpoints, --zoo-extra recipes included, in registry
order) belongs to shard k mod N: every checkpoint is in
exactly one shard, and shard sizes differ by at most one.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from dataclasses import dataclass

SHARD = re.compile(r"^(\d+)/(\d+)$")


@dataclass(frozen=True)
class Shard:
    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        """argparse `type=`: 'I/N' with 0 <= I < N (Slurm's $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT
        for an array 0..N-1)."""
        found = SHARD.match(text.strip())
        if not found:
            raise argparse.ArgumentTypeError(f"--shard {text!r}: expected I/N with 0 <= I < N, e.g. 0/4")
        if int(found.group(2)) < 1:
            raise argparse.ArgumentTypeError(f"--shard {text}: expected I/N with N >= 1")
        index, count = int(found.group(1)), int(found.group(2))
        if index >= count:
            raise argparse.ArgumentTypeError(f"--shard {text}: the shard index must be in 0..{count - 1}")
        return cls(index, count)

    def select(self, names: Sequence[str]) -> list[str]:
        """The names of this shard, in their order."""
        unique = list(dict.fromkeys(names))
        return [name for k, name in enumerate(unique) if k % self.count == self.index]

    @classmethod
    def of(cls, name: str, order: Sequence[str]) -> Shard:
        """The one-checkpoint shard holding `name` when `order` is split into
        len(order) shards (what `unlearnbench sweep --ray` runs per task)."""
        return cls(list(order).index(name), len(order))

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"
