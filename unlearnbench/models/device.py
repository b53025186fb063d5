"""Device and dtype choice, including one GPU per pytest-xdist worker."""

from __future__ import annotations

import os
import re

import torch

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def xdist_worker_index() -> int | None:
    """0 for worker gw0, 1 for gw1, ...; None outside pytest-xdist workers."""
    match = re.fullmatch(r"gw(\d+)", os.environ.get("PYTEST_XDIST_WORKER", ""))
    return int(match.group(1)) if match else None


def resolve_device(spec: str) -> torch.device:
    """`auto` -> a GPU when there is one (worker i gets GPU i mod count), else CPU."""
    if spec == "cpu":
        return torch.device("cpu")
    if spec == "auto" and not torch.cuda.is_available():
        return torch.device("cpu")
    if spec in ("auto", "cuda"):
        if not torch.cuda.is_available():
            raise RuntimeError("--device cuda was asked for, but torch sees no CUDA device")
        worker = xdist_worker_index()
        index = worker % torch.cuda.device_count() if worker is not None else 0
        return torch.device("cuda", index)
    if re.fullmatch(r"cuda:\d+", spec):
        if not torch.cuda.is_available() or int(spec.split(":")[1]) >= torch.cuda.device_count():
            raise RuntimeError(f"--device {spec}: no such CUDA device")
        return torch.device(spec)
    raise ValueError(f"--device must be auto, cpu, cuda or cuda:N, not {spec!r}")


def resolve_dtype(spec: str, device: torch.device, checkpoint_dtype: torch.dtype | None) -> torch.dtype:
    """`auto`: float32 on CPU (half precision is slow there); on a GPU the
    checkpoint's own half dtype when it has one, else bfloat16 where supported."""
    if spec != "auto":
        if spec not in DTYPES:
            raise ValueError(f"--dtype must be auto, {', '.join(DTYPES)}, not {spec!r}")
        return DTYPES[spec]
    if device.type != "cuda":
        return torch.float32
    if checkpoint_dtype in (torch.bfloat16, torch.float16):
        return checkpoint_dtype
    return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
