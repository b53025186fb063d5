"""Heavy libraries only some runs need are extras (pyproject.toml): bitsandbytes
for the quantization attacks (`unlearnbench[quant]`), gguf for checkpoints given
as .gguf files (`unlearnbench[gguf]`). Without one, the run that needs it
stops before any model loads with one line naming the extra to install."""

from __future__ import annotations

import importlib.util
import sys
import tomllib
from pathlib import Path

import pytest

from unlearnbench.errors import CheckpointError, DataError

ROOT = Path(__file__).resolve().parents[2]


def test_the_heavy_libraries_are_extras_and_the_tests_install_them():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    required = {dep.split(">")[0].split("=")[0] for dep in project["dependencies"]}
    extras = project["optional-dependencies"]
    assert not {"bitsandbytes", "gguf"} & required
    assert extras["quant"] == ["bitsandbytes>=0.45"] and extras["gguf"] == ["gguf>=0.10"]
    assert set(extras["quant"] + extras["gguf"]) <= set(extras["dev"])


def test_without_bitsandbytes_the_robustness_data_names_the_extra(monkeypatch, cache_dir):
    from unlearnbench.fixtures import zoo
    from unlearnbench.suites.robustness import data

    source = zoo.data_dir(cache_dir)

    found = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "bitsandbytes" else found(name, *a))
    with pytest.raises(DataError) as raised:
        data.load(source, {"attacks": "quant4,relearn"})
    message = str(raised.value)
    assert "attack 'quant4' needs bitsandbytes: pip install 'unlearnbench[quant]'" in message
    assert "--suite-option robustness.attacks=relearn" in message and "\n" not in message
    assert data.load(source, {"attacks": "relearn"}).attacks.keys() == {"relearn"}  # without them it runs


def test_without_gguf_a_gguf_checkpoint_names_the_extra(tmp_path, monkeypatch):
    from unlearnbench.models.checkpoint import resolve

    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF" + bytes(60))
    monkeypatch.setitem(sys.modules, "gguf", None)  # `from gguf import ...` raises ImportError
    with pytest.raises(CheckpointError, match=r"model.gguf: loading a GGUF file needs gguf: pip install 'unlearnbench\[gguf\]'$"):
        resolve(str(model))
