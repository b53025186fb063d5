"""Bad checkpoints are rejected with one clear message, before any model loads."""

from __future__ import annotations

import json
import shutil

import pytest

from unlearnbench.errors import CheckpointError
from unlearnbench.models.checkpoint import CheckpointSpec, fingerprint, resolve


def copy_checkpoint(src, dst):
    shutil.copytree(src, dst)
    return dst


def test_spec_names_from_path_or_explicit_name():
    assert CheckpointSpec.parse("runs/ga-step500") == CheckpointSpec("ga-step500", "runs/ga-step500")
    assert CheckpointSpec.parse("ga=runs/x/") == CheckpointSpec("ga", "runs/x/")
    assert CheckpointSpec.parse("/m/SmolLM2.Q4_1.gguf").name == "SmolLM2.Q4_1"
    with pytest.raises(CheckpointError, match="empty path"):
        CheckpointSpec.parse("name=")


def test_missing_path(tmp_path):
    with pytest.raises(CheckpointError, match=r"nope: no such file or directory"):
        resolve(str(tmp_path / "nope"))


def test_unresolvable_hub_id_offline():
    with pytest.raises(CheckpointError, match="not a local path, and not resolvable as a Hugging Face Hub id"):
        resolve("hf:unlearnbench-tests/does-not-exist")


def test_directory_without_config(tmp_path):
    with pytest.raises(CheckpointError, match="no config.json"):
        resolve(str(tmp_path))


def test_directory_without_weights(smoke_lm_dir, tmp_path):
    ckpt = copy_checkpoint(smoke_lm_dir, tmp_path / "ckpt")
    (ckpt / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match=r"ckpt: no weight files \(expected one of model.safetensors"):
        resolve(str(ckpt))


def test_directory_without_tokenizer(smoke_lm_dir, tmp_path):
    ckpt = copy_checkpoint(smoke_lm_dir, tmp_path / "ckpt")
    (ckpt / "tokenizer.json").unlink()
    with pytest.raises(CheckpointError, match="no tokenizer files"):
        resolve(str(ckpt))


def test_truncated_safetensors(smoke_lm_dir, tmp_path):
    ckpt = copy_checkpoint(smoke_lm_dir, tmp_path / "ckpt")
    weights = ckpt / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError) as info:
        resolve(str(ckpt))
    assert str(info.value) == (
        f"checkpoint {weights}: truncated safetensors file: {len(data) // 2} bytes, header needs {len(data)}"
    )


def test_garbled_safetensors_header(smoke_lm_dir, tmp_path):
    ckpt = copy_checkpoint(smoke_lm_dir, tmp_path / "ckpt")
    (ckpt / "model.safetensors").write_bytes(b"\xff" * 64)
    with pytest.raises(CheckpointError, match="corrupt header"):
        resolve(str(ckpt))


def test_invalid_config_json(smoke_lm_dir, tmp_path):
    ckpt = copy_checkpoint(smoke_lm_dir, tmp_path / "ckpt")
    (ckpt / "config.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="config.json is not valid JSON"):
        resolve(str(ckpt))


def test_missing_shard_in_index(smoke_lm_dir, tmp_path):
    ckpt = copy_checkpoint(smoke_lm_dir, tmp_path / "ckpt")
    (ckpt / "model.safetensors").rename(ckpt / "model-00001-of-00002.safetensors")
    index = {"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}
    (ckpt / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(CheckpointError, match="missing weight shards: model-00002-of-00002.safetensors"):
        resolve(str(ckpt))


def test_non_gguf_file(tmp_path):
    bogus = tmp_path / "model.bin"
    bogus.write_bytes(b"1234")
    with pytest.raises(CheckpointError, match="must be a .gguf file"):
        resolve(str(bogus))
    fake = tmp_path / "model.gguf"
    fake.write_bytes(b"NOPE" * 10)
    with pytest.raises(CheckpointError, match="bad magic bytes"):
        resolve(str(fake))


@pytest.mark.real_model
def test_truncated_gguf(smollm2_path, tmp_path):
    truncated = tmp_path / "smol.gguf"
    with smollm2_path.open("rb") as fh:
        truncated.write_bytes(fh.read(2_000_000))
    with pytest.raises(CheckpointError, match=r"smol.gguf: corrupt GGUF file"):
        resolve(str(truncated))


def write_tiny_gguf(path, rows=4):
    import numpy as np
    from gguf import GGUFWriter

    writer = GGUFWriter(str(path), "llama")
    writer.add_string("general.name", "tiny")
    writer.add_tensor("token_embd.weight", np.zeros((rows, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def test_a_gguf_file_is_checked_once_until_it_changes(tmp_path, gguf_parses):
    """A run resolves a checkpoint for its preflight, its fingerprint and its
    load: an unchanged GGUF file is parsed by the check once, and a file
    rewritten in place (here truncated) is checked again and refused."""
    import os

    model = tmp_path / "tiny.gguf"
    write_tiny_gguf(model)
    for _ in range(3):
        assert resolve(str(model)).gguf_file == "tiny.gguf"
    assert len(gguf_parses) == 1
    model.write_bytes(model.read_bytes()[:-20])
    os.utime(model, ns=(1, 1))  # a changed size or mtime is a changed file
    with pytest.raises(CheckpointError, match=r"tiny.gguf: corrupt GGUF file"):
        resolve(str(model))
    assert len(gguf_parses) == 2


def test_tokenizer_mismatch_is_caught_before_weights_load(smoke_lm_dir, tmp_path):
    from unlearnbench.models.handle import ModelHandle

    ckpt = copy_checkpoint(smoke_lm_dir, tmp_path / "ckpt")
    config = json.loads((ckpt / "config.json").read_text())
    config["vocab_size"] = 100
    (ckpt / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=r"tokenizer mismatch: tokenizer has \d+ tokens, model embeds only 100"):
        ModelHandle.load(str(ckpt), device="cpu")


def test_fingerprint_tracks_content_and_memoises(smoke_lm_dir, tmp_path):
    ckpt = copy_checkpoint(smoke_lm_dir, tmp_path / "ckpt")
    memo = tmp_path / "memo.json"
    first = fingerprint(resolve(str(ckpt)).files, memo)
    assert first == fingerprint(resolve(str(smoke_lm_dir)).files)  # same content, other place
    assert len(json.loads(memo.read_text())) == len(resolve(str(ckpt)).files)
    weights = ckpt / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    assert fingerprint(resolve(str(ckpt)).files, memo) != first


def test_a_gguf_load_that_fails_leaves_gguf_as_it_was(tmp_path):
    """The load swaps gguf's reader and name table for memoised ones; a load
    that fails (a GGUF with no tokenizer or config in its metadata) is one
    line naming the file, and gguf is put back."""
    import gguf

    from unlearnbench.models.loading import load_weights

    model = tmp_path / "tiny.gguf"
    write_tiny_gguf(model)
    reader, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    with pytest.raises(CheckpointError, match=r"tiny.gguf: cannot load tokenizer/config"):
        load_weights(str(model), device="cpu")
    assert (gguf.GGUFReader, gguf.get_tensor_name_map) == (reader, name_map)
