"""Where a checkpoint lives and whether it is whole, decided without torch.

Everything here is cheap (stat calls, small header reads) so the plugin can
reject a bad `--model` before any model is loaded.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path

from unlearnbench.errors import CheckpointError

WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer.model",
    "vocab.json",
    "merges.txt",
    "tokenizer_config.json",
    "special_tokens_map.json",
)
# Beyond the tokenizer, what changes how a model is asked or where it stops:
# the chat template in each of its homes (transformers >= 4.43 writes
# chat_template.jinja; older, chat_template.json or tokenizer_config.json;
# extra named templates in additional_chat_templates/), added tokens, and the
# generation config's EOS ids.
PROMPTING_FILES = ("chat_template.jinja", "chat_template.json", "added_tokens.json", "generation_config.json")
EXTRA_TEMPLATES = "additional_chat_templates"


def prompting_files(directory: Path) -> list[Path]:
    """The files of `directory` that decide what the model is asked and where
    it stops (tokenizer, chat templates, generation config): all fingerprinted."""
    names = [directory / f for f in (*TOKENIZER_FILES, *PROMPTING_FILES) if (directory / f).is_file()]
    return names + sorted((directory / EXTRA_TEMPLATES).glob("*.jinja"))


# A tokenizer needs at least one of these to be loadable at all.
TOKENIZER_VOCAB_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json")
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
HUB_PREFIX = "hf:"  # a Hub model is always named hf:ORG/NAME: a missing local path never becomes a download


@dataclass(frozen=True)
class CheckpointSpec:
    """A checkpoint as the user named it: `--model NAME=PATH` or `--model PATH`.

    `zoo` names a fixture-zoo recipe instead of a path; its directory is
    built (or found in the cache) only when the model is first loaded.
    """

    name: str
    source: str
    zoo: str | None = None
    # A step of a training run (`checkpoint-<step>/` folders of one run, found by --model-dir):
    # ranked as one candidate with its run's other steps, drawn as its unlearning curve.
    series: str | None = None
    step: int | None = None

    @classmethod
    def parse(cls, arg: str) -> CheckpointSpec:
        """`NAME=PATH` only where NAME is a plain name (no '/') and the whole
        argument is not itself an existing path: `/data/lr=3e-4/ckpt` is a path."""
        name, source = split_name(arg)
        source = source.strip()
        if not source:
            raise CheckpointError(arg, "empty path (use --model PATH or --model NAME=PATH)")
        if not name and "#" in source and ":" in source.split("#")[0]:
            name = source.rsplit("#", 1)[1].replace("/", "-")  # an endpoint model (backend:URL#SERVED-NAME)
        if not name:
            path = Path(source.removeprefix(HUB_PREFIX))
            name = path.stem if path.suffix == ".gguf" else path.name or source
        return cls(name=name.strip(), source=source)


PLAIN_NAME = re.compile(r"^[A-Za-z0-9_][\w.+-]*$")


def split_name(arg: str) -> tuple[str, str]:
    """('NAME', 'VALUE') for a `NAME=VALUE` option argument, else ('', arg)."""
    name, sep, value = arg.partition("=")
    if sep and PLAIN_NAME.match(name) and not Path(arg).expanduser().exists():
        return name, value
    return "", arg


def is_checkpoint_folder(folder: Path) -> bool:
    """A folder that is one checkpoint: a config.json, or a PEFT adapter's config."""
    return (folder / "config.json").is_file() or (folder / ADAPTER_CONFIG).is_file()


# A Hugging Face Trainer's checkpoint folder: `output_dir/checkpoint-<global step>/`.
TRAINER_STEP = re.compile(r"^checkpoint-(\d+)$")


def _trainer_step(folder: Path) -> int:
    """The step of a Trainer checkpoint folder (`checkpoint-<step>`)."""
    found = TRAINER_STEP.match(folder.name)
    assert found is not None, folder
    return int(found[1])


def discover(directory: Path | str) -> list[CheckpointSpec]:
    """Every checkpoint below `directory` (`--model-dir`): folders holding a
    config.json or a PEFT adapter (not searched further) and .gguf files,
    named by their path relative to `directory` ("/" becomes "-"), in sorted
    order. A folder's `checkpoint-<step>/` subfolders (a Trainer's output
    folder) are the steps of one series named after that folder, in step
    order; each is a step even without its weights, so that a step saved
    incompletely fails its own checks instead of vanishing from the curve."""
    root = Path(directory)
    if not root.is_dir():
        raise CheckpointError(root, "--model-dir: not a directory")
    found: list[Path] = []

    def walk(folder: Path) -> None:
        if is_checkpoint_folder(folder) and folder != root:
            found.append(folder)
            return
        children = [c for c in folder.iterdir() if not c.name.startswith(".")]
        steps = sorted(
            (c for c in children if c.is_dir() and TRAINER_STEP.match(c.name)),
            key=_trainer_step,
        )
        found.extend(steps)
        for child in sorted(children):
            if child in steps:
                continue
            if child.is_dir():
                walk(child)
            elif child.suffix == ".gguf":
                found.append(child)

    if is_checkpoint_folder(root):
        found.append(root)
    else:
        walk(root)
    if not found:
        raise CheckpointError(
            root,
            "--model-dir: no checkpoint (a folder with config.json or adapter_config.json, "
            "a checkpoint-<step> folder, or a .gguf file) below it",
        )
    specs = []
    for path in found:
        relative = path.relative_to(root).with_suffix("") if path.suffix == ".gguf" else path.relative_to(root)
        step = TRAINER_STEP.match(path.name) if path.is_dir() and path != root else None
        if step:
            series = "-".join(relative.parts[:-1]) or root.name
            specs.append(
                CheckpointSpec(name=f"{series}-{path.name}", source=str(path), series=series, step=int(step.group(1)))
            )
        else:
            specs.append(CheckpointSpec(name="-".join(relative.parts) or root.name, source=str(path)))
    return specs


@dataclass(frozen=True)
class ResolvedCheckpoint:
    """A validated checkpoint on disk: an HF directory, a single GGUF file,
    or a PEFT adapter folder over its (resolved) base."""

    kind: str  # "hf", "gguf" or "adapter"
    directory: Path
    gguf_file: str | None
    files: tuple[Path, ...] = field(
        default=()
    )  # the files the fingerprint covers (an adapter's: its own and its base's)
    base: ResolvedCheckpoint | None = None  # an adapter's base model

    @property
    def display(self) -> str:
        return str(self.directory / self.gguf_file) if self.gguf_file else str(self.directory)

    @property
    def adapter_base(self) -> ResolvedCheckpoint:
        """An adapter's base model, resolved with it."""
        assert self.base is not None, "an adapter is resolved with its base"
        return self.base

    @property
    def weights_directory(self) -> Path:
        """Where the model's config and weights are: an adapter's are its base's."""
        return self.adapter_base.directory if self.kind == "adapter" else self.directory

    @property
    def tokenizer_directory(self) -> Path:
        """An adapter's tokenizer is its own where it saved one, else its base's."""
        if self.kind == "adapter" and not any((self.directory / f).is_file() for f in TOKENIZER_VOCAB_FILES):
            return self.adapter_base.directory
        return self.directory


def resolve(source: str, *, base_model: str | None = None) -> ResolvedCheckpoint:
    """Validate a local path, or resolve `hf:ORG/NAME` (from the local HF cache
    when offline). `base_model` (--base-model) is the base of a PEFT adapter
    instead of the one its adapter_config.json names."""
    if source.startswith(HUB_PREFIX):
        repo_id = source.removeprefix(HUB_PREFIX)
        if not HUB_ID.match(repo_id):
            raise CheckpointError(source, "expected hf:ORG/NAME for a Hugging Face Hub model")
        return _resolve_local(_hub_snapshot(repo_id), base_model)
    path = Path(source).expanduser()
    if path.exists():
        return _resolve_local(path, base_model)
    hint = f" (a Hugging Face Hub model is named hf:ORG/NAME, e.g. hf:{source})" if HUB_ID.match(source) else ""
    raise CheckpointError(source, f"no such file or directory{hint}")


def judge_source(target: str) -> str:
    """`--judge hf:TARGET` names a local checkpoint or a Hub model in one
    prefix: a path stays a path; ORG/NAME that is not a local path is the Hub id."""
    if Path(target).expanduser().exists() or not HUB_ID.match(target) or target.startswith((".", "/", "~")):
        return target  # a path (a missing one is reported as such by resolve)
    return HUB_PREFIX + target


def _hub_snapshot(repo_id: str) -> Path:
    """Resolve a Hub id to a local snapshot directory.

    Downloads only when the environment allows it; with HF_HUB_OFFLINE=1 (as in
    tests and CI) only an already-cached snapshot is accepted.
    """
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(repo_id, allow_patterns=["*.json", "*.safetensors", "*.model", "*.txt"]))
    except Exception as exc:  # noqa: BLE001 - any hub failure becomes one clear message
        raise CheckpointError(
            repo_id, f"not a local path, and not resolvable as a Hugging Face Hub id ({type(exc).__name__}: {exc})"
        ) from None


ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")


def _resolve_adapter(path: Path, base_model: str | None) -> ResolvedCheckpoint:
    """A PEFT output folder: its adapter files, over the base model its
    adapter_config.json names (a local folder, or a Hub id from the local
    cache, resolved like any --model value), or over `base_model`."""
    config = path / ADAPTER_CONFIG
    try:
        settings = json.loads(config.read_text())
        base_source = settings["base_model_name_or_path"]
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as exc:
        raise CheckpointError(config, f"not a PEFT adapter config with base_model_name_or_path ({exc})") from None
    weights = [path / n for n in ADAPTER_WEIGHTS if (path / n).is_file()]
    if not weights:
        raise CheckpointError(
            path, f"an adapter folder without adapter weights (expected one of {', '.join(ADAPTER_WEIGHTS)})"
        )
    if weights[0].suffix == ".safetensors":
        check_safetensors(weights[0])
    if base_model is not None:
        base = resolve(base_model)
    elif isinstance(base_source, str) and Path(base_source).expanduser().exists():
        base = _resolve_local(Path(base_source).expanduser())
    elif isinstance(base_source, str) and HUB_ID.match(base_source):
        try:
            base = resolve(HUB_PREFIX + base_source)
        except CheckpointError as exc:
            raise CheckpointError(
                config,
                f"names its base model {base_source!r}, which is not in the local Hugging "
                f"Face cache ({exc.problem}); pass --base-model PATH",
            ) from None
    else:
        raise CheckpointError(
            config,
            f"names its base model {base_source!r}, which is neither a local folder nor a "
            f"Hugging Face Hub id; pass --base-model PATH",
        )
    if base.kind != "hf":
        raise CheckpointError(config, f"its base model {base.display} is not a Hugging Face checkpoint directory")
    own = [config, weights[0], *prompting_files(path)]
    return ResolvedCheckpoint("adapter", path.resolve(), None, (*(p.resolve() for p in own), *base.files), base)


def _resolve_local(path: Path, base_model: str | None = None) -> ResolvedCheckpoint:
    if (path / ADAPTER_CONFIG).is_file() and not (path / "config.json").is_file():
        return _resolve_adapter(path, base_model)
    if path.is_file():
        if path.suffix != ".gguf":
            raise CheckpointError(
                path, "a file checkpoint must be a .gguf file; otherwise pass the checkpoint directory"
            )
        _check_gguf(path)
        return ResolvedCheckpoint("gguf", path.parent.resolve(), path.name, (path.resolve(),))
    config = path / "config.json"
    if not config.is_file():
        ggufs = sorted(path.glob("*.gguf"))
        if len(ggufs) == 1:
            return _resolve_local(ggufs[0])
        raise CheckpointError(path, "no config.json: not a Hugging Face checkpoint directory")
    try:
        model_type = json.loads(config.read_text()).get("model_type")
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError) as exc:
        raise CheckpointError(config, f"config.json is not valid JSON ({exc})") from None
    if not model_type:
        raise CheckpointError(config, "config.json has no model_type")
    weights = _weight_files(path)
    tokenizer = prompting_files(path)
    if not any(p.name in TOKENIZER_VOCAB_FILES for p in tokenizer):
        raise CheckpointError(path, f"no tokenizer files (expected one of {', '.join(TOKENIZER_VOCAB_FILES)})")
    files = (config, *weights, *tokenizer)
    return ResolvedCheckpoint("hf", path.resolve(), None, tuple(p.resolve() for p in files))


def _weight_files(directory: Path) -> list[Path]:
    for index_name in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
        index = directory / index_name
        if index.is_file():
            try:
                shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
            except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
                raise CheckpointError(index, f"unreadable weight index ({exc})") from None
            paths = [directory / s for s in shards]
            missing = [p.name for p in paths if not p.is_file()]
            if missing:
                raise CheckpointError(index, f"missing weight shards: {', '.join(missing)}")
            for p in paths:
                if p.suffix == ".safetensors":
                    check_safetensors(p)
            return [index, *paths]
    single = directory / "model.safetensors"
    if single.is_file():
        check_safetensors(single)
        return [single]
    legacy = directory / "pytorch_model.bin"
    if legacy.is_file():
        return [legacy]
    raise CheckpointError(directory, f"no weight files (expected one of {', '.join(WEIGHT_FILES)})")


def check_safetensors(path: Path) -> None:
    """Reject a truncated or garbled safetensors file from its header alone."""
    size = path.stat().st_size
    with path.open("rb") as fh:
        head = fh.read(8)
        if len(head) < 8:
            raise CheckpointError(path, f"truncated safetensors file ({size} bytes, no header)")
        (header_len,) = struct.unpack("<Q", head)
        if header_len > size - 8:
            raise CheckpointError(
                path,
                f"truncated safetensors file or corrupt header (header claims {header_len} bytes, file has {size})",
            )
        try:
            header = json.loads(fh.read(header_len))
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise CheckpointError(path, "corrupt safetensors header (not JSON)") from None
    ends = [t["data_offsets"][1] for k, t in header.items() if k != "__metadata__"]
    expected = 8 + header_len + max(ends, default=0)
    if size < expected:
        raise CheckpointError(path, f"truncated safetensors file: {size} bytes, header needs {expected}")


# GGUF files this process has parsed whole, by (path, size, mtime): a run
# resolves each checkpoint for its preflight, its fingerprint and its load,
# and the parse takes seconds (the metadata holds the whole vocabulary).
_GGUF_CHECKED: set[tuple[str, int, int]] = set()


def _check_gguf(path: Path) -> None:
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key in _GGUF_CHECKED:
        return
    with path.open("rb") as fh:
        if fh.read(4) != b"GGUF":
            raise CheckpointError(path, "not a GGUF file (bad magic bytes)")
    try:
        from gguf import GGUFReader
    except ImportError:
        raise CheckpointError(path, "loading a GGUF file needs gguf: pip install 'unlearnbench[gguf]'") from None
    try:
        GGUFReader(str(path))  # parses every tensor descriptor; fails on truncation
    except Exception as exc:  # noqa: BLE001 - the reader raises assorted errors on bad files
        raise CheckpointError(path, f"corrupt GGUF file ({type(exc).__name__}: {exc})") from None
    _GGUF_CHECKED.add(key)


def fingerprint(files: tuple[Path, ...], memo_path: Path | None = None, secret: bytes | None = None) -> str:
    """sha256 over (name, content digest) of config, weights and tokenizer files.

    Content digests of large weight files are remembered in `memo_path`, keyed
    by (path, size, mtime), so a sweep does not re-hash gigabytes every run.
    With the cache's `secret`, memo entries are signed and an entry that does
    not verify is hashed again: a shared memo cannot map new weights to an old
    checkpoint's digest (and so to its cached results).
    """
    memo = _read_memo(memo_path, secret)
    outer = hashlib.sha256()
    new: dict[str, str] = {}
    for path in sorted(files, key=lambda p: p.name):
        st = path.stat()
        key = f"{path}|{st.st_size}|{st.st_mtime_ns}"
        digest = memo.get(key)
        if digest is None:
            with path.open("rb") as fh:
                digest = hashlib.file_digest(fh, "sha256").hexdigest()
            new[key] = _memo_value(key, digest, secret)
        outer.update(f"{path.name}:{digest}\n".encode())
    if new and memo_path is not None:
        from unlearnbench.atomic import atomic_write_text
        from unlearnbench.cache import file_lock

        # Read-merge-write under the lock: concurrent workers add, never overwrite, each other's digests.
        with file_lock(memo_path.with_suffix(".lock")):
            atomic_write_text(memo_path, json.dumps(_read_memo(memo_path, raw=True) | new, sort_keys=True))
    return outer.hexdigest()[:16]


def _memo_value(key: str, digest: str, secret: bytes | None) -> str:
    """A memo entry: the digest, and under a secret its tag (`digest:tag`)."""
    if secret is None:
        return digest
    from unlearnbench.cache import payload_tag

    return f"{digest}:{payload_tag(f'{key}={digest}'.encode(), secret)}"


def _read_memo(memo_path: Path | None, secret: bytes | None = None, *, raw: bool = False) -> dict[str, str]:
    """key -> digest of the memo's entries (under `secret`, the verified ones
    only); `raw`: the stored values as they are, for merging."""
    if memo_path is None or not memo_path.is_file():
        return {}
    try:
        memo = json.loads(memo_path.read_text())
    except (json.JSONDecodeError, OSError):
        return {}
    if not isinstance(memo, dict):
        return {}
    if raw:
        return memo
    if secret is None:
        return {key: str(value).partition(":")[0] for key, value in memo.items()}
    return {
        key: digest
        for key, value in memo.items()
        if hmac.compare_digest(str(value), _memo_value(key, digest := str(value).partition(":")[0], secret))
    }


def tokenizer_signature(source: str) -> str | None:
    """A digest of how a checkpoint directory tokenizes (vocabulary, merges,
    normalizer and pre-tokenizer of its fast tokenizer), read from its
    tokenizer files without any weights; None for GGUF files and sources this
    cannot read (their tokenizers are compared after loading)."""
    directory = Path(source).expanduser()
    if not directory.is_dir():
        return None
    try:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(directory))
        spec = json.loads(tokenizer.backend_tokenizer.to_str())
    except Exception:  # noqa: BLE001 - unreadable here: left to the loader's own one-line error
        return None
    how = {key: spec.get(key) for key in ("normalizer", "pre_tokenizer", "model")}
    return hashlib.sha256(json.dumps(how, sort_keys=True).encode()).hexdigest()


# The Hugging Face backend's checks (backends.py), cheap: no torch.
def check_source(source: str, *, name: str, settings) -> None:
    resolve(source, base_model=settings.base_model)


def source_fingerprint(source: str, *, name: str, settings) -> str:
    return fingerprint(
        resolve(source, base_model=settings.base_model).files, settings.fingerprint_memo, settings.cache_secret
    )
