#!/usr/bin/env bash
# One check for a CUDA machine: every suite on SmolLM2 in float32 and bfloat16,
# float32 values against this commit's CPU values (benchmarks/gpu_check_cpu.json),
# per-suite times and peak GPU memory. Options: see benchmarks/gpu_check.py.
#   bash benchmarks/gpu_check.sh                      (CUDA; exit 1 names a value that differs)
#   bash benchmarks/gpu_check.sh --device cpu --write (here: record the CPU values)
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
[ -x "$python" ] || python=python3
exec "$python" benchmarks/gpu_check.py "$@"
