#!/usr/bin/env bash
# One check for a CUDA machine: every suite on SmolLM2 in float32 and bfloat16,
# float32 values against this commit's CPU values (benchmarks/gpu_check_cpu.json),
# per-suite times and peak GPU memory; then, on CUDA, the Llama-3.2-1B shape at
# its full depth in bfloat16 and float32 (benchmarks/scale.py: peak GPU memory,
# seconds and tokens per suite, the figures docs/speed.md's scale table
# extrapolates). Options: see benchmarks/gpu_check.py.
#   bash benchmarks/gpu_check.sh                      (CUDA; exit 1 names a value that differs)
#   bash benchmarks/gpu_check.sh --device cpu --write (here: record the CPU values)
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
[ -x "$python" ] || python=python3
status=0
"$python" benchmarks/gpu_check.py "$@" || status=$?
if [[ " $* " != *" --device cpu"* ]]; then
  for dtype in bfloat16 float32; do
    "$python" benchmarks/scale.py --shapes llama-3.2-1b --layers 16 --device cuda --dtype "$dtype" \
      --suites tofu muse dusk wmdp --max-items 32 || status=1
  done
fi
exit $status
