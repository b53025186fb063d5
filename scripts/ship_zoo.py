"""Train every zoo recipe that ships with the package (`zoo.SHIPPED`: all
that the main job and the tests evaluate) from scratch and write them to
`unlearnbench/fixtures/shipped/` with their `SHA256SUMS`, or check that the shipped ones
are what their recipes train on this machine, byte for byte.

    python scripts/ship_zoo.py           # train and (re)write unlearnbench/fixtures/shipped/
    python scripts/ship_zoo.py --check   # train into a scratch folder; exit 1 naming any file that differs

Training is deterministic on one CPU (fixed seeds, deterministic kernels, one
thread), not across instruction sets: `--check` holds on the machine that
shipped the zoo. Elsewhere, `unlearnbench zoo build --from-scratch` compares
a fresh build with the shipped one by the values and verdicts it produces
(docs/zoo.md). Run this script again whenever a recipe, the corpus or
ZOO_CODE_VERSION changes (the tests say so when a shipped folder no longer
matches its recipe's hash).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

from unlearnbench.cli import print_built
from unlearnbench.fixtures import zoo

COMPARED = ("model.safetensors", "config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
            "chat_template.jinja")


def content(path: Path) -> bytes | None:
    """The file's bytes (None if absent); a JSON file without its `transformers_version`
    stamp, which names the release that wrote it, not anything trained."""
    if not path.is_file():
        return None
    if path.suffix != ".json":
        return path.read_bytes()
    loaded = json.loads(path.read_text())
    loaded.pop("transformers_version", None)
    return json.dumps(loaded, sort_keys=True).encode()


def differences(trained: Path, shipped: Path) -> list[str]:
    """The files (and the loss curve) of `shipped` that differ from `trained`."""
    found = [name for name in COMPARED if content(trained / name) != content(shipped / name)]
    curves = [json.loads((folder / "manifest.json").read_text())["loss_curve"] for folder in (trained, shipped)]
    return found + (["manifest.json: loss_curve"] if curves[0] != curves[1] else [])


def write_sums() -> None:
    lines = [f"{zoo.sha256(path)}  {path.parent.name}/{path.name}"
             for path in sorted(zoo.SHIPPED_DIR.glob("*/*"))]
    zoo.SHIPPED_SUMS.write_text("\n".join(lines) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="compare with the shipped folders instead of writing")
    parser.add_argument("--cache", type=Path, default=None,
                        help="train into this cache folder and keep it: what an earlier run of this script (or "
                             "`unlearnbench zoo build --from-scratch`, <cache>/from-scratch) trained there is reused")
    args = parser.parse_args()
    scratch = args.cache or Path(tempfile.mkdtemp(prefix="ship-zoo-"))
    try:
        folders = zoo.build_many(zoo.SHIPPED, scratch, from_scratch=True, on_built=print_built)
        if args.check:
            status = 0
            for name, folder in folders.items():
                shipped = zoo.SHIPPED_DIR / folder.name
                problems = differences(folder, shipped) if shipped.is_dir() else [f"{shipped} is missing"]
                print(f"{name}: {'the same' if not problems else 'DIFFERS: ' + ', '.join(problems)}")
                status |= bool(problems)
            return status
        zoo.SHIPPED_DIR.mkdir(exist_ok=True)
        for stale in zoo.SHIPPED_DIR.iterdir():
            if stale.is_dir() and stale.name not in {folder.name for folder in folders.values()}:
                shutil.rmtree(stale)
        for name, folder in folders.items():
            target = zoo.SHIPPED_DIR / folder.name
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(folder, target)
            for path in target.iterdir():
                path.chmod(0o644)
            print(f"{name}: {target}")
        write_sums()
        return 0
    finally:
        if args.cache is None:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
