"""The fixture zoo is deterministic and really trained."""

from __future__ import annotations

import json

from unlearnbench.fixtures import zoo
from unlearnbench.models.checkpoint import fingerprint, resolve


def test_two_builds_give_identical_weights(smoke_lm_dir, tmp_path):
    rebuilt = zoo.build("smoke-lm", tmp_path)
    assert rebuilt.name == smoke_lm_dir.name  # same recipe hash
    assert fingerprint(resolve(str(rebuilt)).files) == fingerprint(resolve(str(smoke_lm_dir)).files)


def test_manifest_records_a_real_training_run(smoke_lm_dir, smoke_untrained_dir):
    manifest = json.loads((smoke_lm_dir / "manifest.json").read_text())
    curve = manifest["loss_curve"]
    assert len(curve) == manifest["recipe"]["steps"] == 300
    assert curve[-1] < 0.2 < 5.0 < curve[0]
    assert json.loads((smoke_untrained_dir / "manifest.json").read_text())["loss_curve"] == []


def test_cached_build_is_reused(smoke_lm_dir, cache_dir):
    mtime = (smoke_lm_dir / "model.safetensors").stat().st_mtime_ns
    assert zoo.build("smoke-lm", cache_dir) == smoke_lm_dir
    assert (smoke_lm_dir / "model.safetensors").stat().st_mtime_ns == mtime
