"""Third-party libraries imported without their side effects at import time.

On CPUs with AVX512-BF16, bitsandbytes' CPU backend asks the Hugging Face Hub,
as it is imported, for an optional 4-bit matrix-product kernel (through the
`kernels` package): a network call at run time, and a warning in the middle of
a run when it fails. peft imports bitsandbytes whenever it is installed, and
sentence-transformers imports peft (through transformers' trainer utilities).
We use bitsandbytes only to quantize and dequantize weights, which do not need
that kernel, so it is imported here with `kernels` out of reach, before either.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
from types import ModuleType


def bitsandbytes() -> ModuleType:
    """`bitsandbytes.functional`, imported without the hub kernel lookup."""
    if "bitsandbytes.functional" not in sys.modules:
        kernels = sys.modules.get("kernels")
        cpu_ops = logging.getLogger("bitsandbytes.backends.cpu.ops")
        level = cpu_ops.level
        sys.modules["kernels"] = None  # type: ignore[assignment]  # `from kernels import ...` raises ImportError, which bitsandbytes handles
        cpu_ops.setLevel(logging.ERROR)  # its warning that the kernel did not load
        try:
            import bitsandbytes.functional  # noqa: F401
        finally:
            cpu_ops.setLevel(level)
            if kernels is None:
                del sys.modules["kernels"]
            else:
                sys.modules["kernels"] = kernels
    return sys.modules["bitsandbytes.functional"]


def _bitsandbytes_first() -> None:
    if "bitsandbytes.functional" not in sys.modules and importlib.util.find_spec("bitsandbytes") is not None:
        bitsandbytes()


def peft() -> ModuleType:
    """`peft`, with bitsandbytes (which it imports when installed) imported as above first."""
    _bitsandbytes_first()
    import peft

    return peft


def sentence_transformers() -> ModuleType:
    """`sentence_transformers`, with bitsandbytes (which it reaches through peft) imported as above first."""
    _bitsandbytes_first()
    import sentence_transformers

    return sentence_transformers
