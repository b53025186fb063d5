"""The scoring path's working memory does not grow with the number of items.

MUSE's and DUSK's membership scores (Min-K%++) read every token's log-prob
and the mean and variance of log p over the vocabulary. Each measurement
runs in a fresh process on SmolLM2 (float32, CPU, 49k vocabulary): the peak
resident memory is reset after the model is loaded and warmed up, and read
after scoring. Whole [batch, length, vocab] logits (with their log-softmax
and probabilities beside them) took 75 MB a 128-token text, so 8 texts
took 0.6 GB and 16 the CPU budget's 1 GiB; reduced in chunks of scored
positions, what a batch holds beyond them is its activations. The texts
are the zoo's MUSE PrivLeak texts, run together and cut into 128 tokens.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

TEXT_TOKENS = 128
# What doubling the items may add to the peak: a quarter of one logits chunk
# (scoring.LOGITS_CHUNK_BYTES is 64 MiB); the rows' activations at this
# width take about 4 MiB a text of 128 tokens.
GROWTH_TOLERANCE_MIB = 48

MEASURE = r"""
import json, sys
from pathlib import Path

from unlearnbench.models.handle import ModelHandle


def kib(field):
    return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith(field))


model_dir, texts_file, n, tokens = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
handle = ModelHandle.load(model_dir, device="cpu", dtype="float32")
stream = handle.encode("\n\n".join(item["text"] for item in json.loads(Path(texts_file).read_text())),
                       add_special_tokens=False)
ids = [stream[k * tokens:(k + 1) * tokens] for k in range(n)]
assert len(ids[-1]) == tokens, f"{len(stream)} tokens of text"
handle.token_logprobs(ids[:1], [1], vocab_stats=True)  # warm-up: the allocator's arenas, the head probe
with open("/proc/self/clear_refs", "w") as out:
    out.write("5")  # resets the peak (VmHWM) to the current resident set
before = kib("VmRSS")
scores = handle.token_logprobs(ids, [1] * n, vocab_stats=True)
assert all(len(s.logprobs) == tokens - 1 and s.vocab_var is not None for s in scores)
print(json.dumps({"peak_over_loaded_mib": (kib("VmHWM") - before) / 1024}))
"""


def _working_set_mib(smollm2_dir, texts_file, items: int) -> float:
    result = subprocess.run([sys.executable, "-c", MEASURE, str(smollm2_dir), str(texts_file), str(items),
                             str(TEXT_TOKENS)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])["peak_over_loaded_mib"]


@pytest.mark.real_model
def test_scoring_working_memory_does_not_grow_when_the_items_double(smollm2_dir, cache_dir):
    from pathlib import Path

    if not Path("/proc/self/clear_refs").exists():
        pytest.skip("resetting the peak resident set needs Linux's /proc/self/clear_refs")
    from unlearnbench.fixtures import zoo

    texts = zoo.data_dir(cache_dir) / "muse" / "privleak" / "forget.json"
    eight, sixteen = (_working_set_mib(smollm2_dir, texts, n) for n in (8, 16))
    assert sixteen - eight < GROWTH_TOLERANCE_MIB, (eight, sixteen)
    assert sixteen < 256, (eight, sixteen)  # far below the whole batch's logits (1.2 GB)
