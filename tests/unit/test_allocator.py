"""The fixed mmap threshold (unlearnbench/models/allocator.py): freed tensors
go back to the system. Each case runs in a fresh process, since the setting
and the allocator's state are per process."""

from __future__ import annotations

import subprocess
import sys

import pytest

# Free a 16 MiB block (glibc raises its threshold to 16 MiB), then allocate
# 48 tensors of 8 MiB with a small one after each, free the big ones and
# print how much of them the process still holds.
PATTERN = """
import sys
import numpy as np
from unlearnbench.models.allocator import return_freed_memory

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096

applied = return_freed_memory() if sys.argv[1] == "fixed" else False
block = np.ones(16 << 20, np.uint8)
del block
before = rss()
big, small = [], []
for _ in range(48):
    big.append(np.ones(8 << 20, np.uint8))
    small.append(np.ones(4096, np.uint8))
del big
print(applied, (rss() - before) >> 20)
"""


def _held_mib(mode: str) -> tuple[bool, int]:
    out = subprocess.run([sys.executable, "-c", PATTERN, mode], capture_output=True, text=True, check=True)
    applied, held = out.stdout.split()
    return applied == "True", int(held)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc: Linux only")
def test_freed_tensors_go_back_to_the_system_with_the_fixed_threshold():
    adaptive_applied, adaptive_held = _held_mib("adaptive")
    applied, held = _held_mib("fixed")
    assert not adaptive_applied and applied
    assert adaptive_held > 300, "the adaptive threshold no longer keeps freed blocks: the pattern needs revisiting"
    assert held < 50, f"{held} MiB of 384 freed MiB still held"


@pytest.mark.parametrize("threshold, applied", [(0, True), (1 << 40, False)])
def test_the_loader_fixes_the_threshold_only_for_a_large_model_on_the_cpu(random_llama_dir, monkeypatch, threshold,
                                                                          applied):
    from unlearnbench.models import loading

    calls = []
    monkeypatch.setattr(loading, "RETURN_FREED_MEMORY_FROM", threshold)
    monkeypatch.setattr(loading, "return_freed_memory", lambda: calls.append(True))
    loading.load_weights(str(random_llama_dir), device="cpu")
    assert bool(calls) == applied
