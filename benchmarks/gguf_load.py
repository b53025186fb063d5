"""Loading SmolLM2-135M-Instruct from its GGUF file (Q4_1) with ModelHandle,
in a new Python process per measurement (as a run does), CPU, float32:
seconds in the preflight check (`resolve`), in the load itself, and how many
times the file's header (metadata and tensor table) is parsed.

    python benchmarks/gguf_load.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

MEASURE = """
import json, time
import gguf
parses = []
parse = gguf.GGUFReader.__init__
def counted(self, *args, **kwargs):
    parses.append(1)
    parse(self, *args, **kwargs)
gguf.GGUFReader.__init__ = counted
import torch
torch.set_num_threads(1)
from unlearnbench.models.checkpoint import resolve
from unlearnbench.models.handle import ModelHandle
from unlearnbench.models.offline import smollm2_gguf
path = str(smollm2_gguf())
started = time.perf_counter()
resolve(path)
checked = time.perf_counter()
ModelHandle.load(path, device="cpu")
done = time.perf_counter()
print(json.dumps({"resolve": checked - started, "load": done - checked, "parses": len(parses)}))
"""


def measure() -> dict:
    out = subprocess.run([sys.executable, "-c", MEASURE], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    runs = [measure() for _ in range(args.repeat)]
    for key in ("resolve", "load"):
        times = [r[key] for r in runs]
        print(f"{key:8s} median {statistics.median(times):6.2f} s  (runs: {', '.join(f'{t:.2f}' for t in times)})")
    print(f"header parses per load (check + load): {runs[0]['parses']}")


if __name__ == "__main__":
    main()
