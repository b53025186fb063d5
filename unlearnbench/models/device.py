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


def share_cpu_threads() -> None:
    """Under xdist, give each worker its share of the cores for torch's
    intra-op threads. Left at the default, every worker starts one thread per
    core; on 2 cores and 2 workers the spinning OpenMP threads fight and a
    sweep ran 11x slower (346 s vs 31 s serial)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    if workers > 1:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // workers))


def resolve_device(spec: str) -> torch.device:
    """`auto` -> a GPU when there is one (worker i gets GPU i mod count), else CPU."""
    if spec == "cpu" or (spec == "auto" and not torch.cuda.is_available()):
        share_cpu_threads()
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


DEVICE_MAP_STRATEGIES = ("auto", "balanced", "balanced_low_0", "sequential")


def parse_device_map(text: str) -> str | dict:
    """`--device-map`: one of accelerate's strategies (auto, balanced,
    balanced_low_0, sequential) or a JSON file {module name: device} (an
    explicit map: "cpu", "disk", a GPU index or "cuda:N"). ValueError names
    the problem."""
    if text in DEVICE_MAP_STRATEGIES:
        return text
    import json
    from pathlib import Path

    path = Path(text)
    if not path.is_file():
        raise ValueError(
            f"--device-map {text!r}: expected {', '.join(DEVICE_MAP_STRATEGIES)} or a JSON file "
            "{module: device}, and no such file exists"
        )
    try:
        mapping = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"--device-map {text}: not JSON ({exc})") from None
    if (
        not isinstance(mapping, dict)
        or not mapping
        or not all(
            isinstance(k, str)
            and (isinstance(v, int) or (isinstance(v, str) and re.fullmatch(r"cpu|disk|cuda:\d+", v)))
            for k, v in mapping.items()
        )
    ):
        raise ValueError(
            f'--device-map {text}: expected a JSON object {{module name: "cpu" | "disk" | GPU index | "cuda:N"}}}}'
        )
    return mapping


def device_map_kind(device_map: str | dict) -> str:
    """'cuda' when the map puts any module on a GPU, else 'cpu'."""
    if isinstance(device_map, str):
        return "cuda" if torch.cuda.is_available() else "cpu"
    return "cuda" if any(v not in ("cpu", "disk") for v in device_map.values()) else "cpu"


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
