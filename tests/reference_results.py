"""Reference results kept across test runs, content-addressed like the zoo.

A test that compares our code with an independent implementation (OpenUnlearning's
code path, a naive one, lm-eval's own task) on SmolLM2 spends about half of its
time on the independent side, in float64 for the OpenUnlearning path. That
side's result is a function of its own code, its inputs, the model files and
the libraries it runs on, so it is computed once per machine and read back
while none of those change; our side is always computed.

The key is a sha256 over
- the source files of the reference code (`code`: functions or modules; the
  whole file each lives in, so an edit anywhere in a test module recomputes),
- the inputs (`inputs`, pickled: the data rows, templates, token counts),
- the content digests of every file of each model folder (`models`),
- the versions of Python and of the libraries a reference runs on.

A result is read back only under its whole key: there is nothing to
invalidate by hand. UNLEARNBENCH_TEST_RECOMPUTE_REFERENCES=1 recomputes every
reference (and rewrites it); deleting the store (`test-references` beside the
zoo store) does too.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import inspect
import os
import pickle
import platform
from pathlib import Path
from typing import Callable, Sequence, TypeVar

T = TypeVar("T")

RECOMPUTE = "UNLEARNBENCH_TEST_RECOMPUTE_REFERENCES"
LARGE_FILE_BYTES = 64 << 20
LIBRARIES = ("torch", "transformers", "tokenizers", "safetensors", "numpy", "scipy", "scikit-learn", "rouge-score",
             "nltk", "python-Levenshtein", "lm_eval", "datasets")


def library_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in LIBRARIES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


class ReferenceResults:
    """`get(name, compute, code=..., inputs=..., models=...)`: `compute()`'s
    result, read from `root` when one was stored under the same key."""

    def __init__(self, root: Path, fingerprint_memo: Path):
        self.root, self.fingerprint_memo = root, fingerprint_memo
        self.recompute = os.environ.get(RECOMPUTE, "") not in ("", "0")

    def key(self, name: str, *, code: Sequence[object], inputs: object, models: Sequence[Path]) -> str:
        from unlearnbench.models.checkpoint import fingerprint

        digest = hashlib.sha256(name.encode())
        for source in sorted({inspect.getsourcefile(obj) for obj in code}):
            digest.update(hashlib.sha256(Path(source).read_bytes()).digest())
        digest.update(pickle.dumps(inputs, protocol=5))
        for folder in models:
            files = [p for p in Path(folder).iterdir() if p.is_file()]
            # Weights' digests are remembered by (path, size, mtime); small files are hashed each time.
            large = tuple(p for p in files if p.stat().st_size >= LARGE_FILE_BYTES)
            small = tuple(p for p in files if p.stat().st_size < LARGE_FILE_BYTES)
            digest.update(fingerprint(large, self.fingerprint_memo).encode() + fingerprint(small).encode())
        digest.update(repr(sorted(library_versions().items())).encode())
        return digest.hexdigest()[:24]

    def get(self, name: str, compute: Callable[[], T], *, code: Sequence[object], inputs: object,
            models: Sequence[Path] = ()) -> T:
        path = self.root / f"{name}-{self.key(name, code=code, inputs=inputs, models=models)}.pickle"
        if path.is_file() and not self.recompute:
            return pickle.loads(path.read_bytes())
        from unlearnbench.atomic import atomic_write_bytes

        result = compute()
        atomic_write_bytes(path, pickle.dumps(result, protocol=5))  # a concurrent worker reads all of it or none
        return result
