"""The C allocator's hold on freed tensors (docs/speed.md, "Memory").

glibc's malloc serves a block of at least its mmap threshold with a mapping
of its own, returned to the system when the block is freed. The threshold
adapts: freeing such a block raises it to the block's size (up to 32 MiB),
so from then on blocks of that size come from the heap and its per-thread
arenas, where a freed block returns to the system only when nothing lives
above it. A run that frees and allocates tensors of changing sizes (batches
of different lengths, one model after another) then keeps gigabytes it no
longer uses: the same DUSK run on a model of Llama-3.2-1B's width peaked at
10.8 GB of RSS with the adaptive threshold and 3.1 GB with a fixed one.
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys

# glibc's own starting threshold. It costs page faults: every activation
# of 128 KiB or more is mapped and faulted in anew (the zoo's main job took
# 324 s against 193 s, and 269 s at 4 MiB), so the loader applies it only
# for large models (loading.RETURN_FREED_MEMORY_FROM), where the same DUSK
# run took 566 s against 474 s.
MMAP_THRESHOLD_BYTES = 128 << 10
_M_MMAP_THRESHOLD = -3  # mallopt's parameter number (malloc.h)


@functools.cache
def return_freed_memory() -> bool:
    """Fix glibc's mmap threshold at MMAP_THRESHOLD_BYTES for this process,
    so that every freed tensor of that size or more goes back to the system.
    Once per process (it stays for the process's life); a no-op (False) off
    glibc or where the user set MALLOC_MMAP_THRESHOLD_ themselves."""
    if not sys.platform.startswith("linux") or "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):  # musl, or no C library by that name
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1
