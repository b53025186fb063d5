"""Each suite's evaluation of one checkpoint against its floor: the
unavoidable model work of what it scored and generated, done once, batched.

    python benchmarks/floor.py                                  # the zoo's npo, every zoo suite
    python benchmarks/floor.py --model DIR --full-model F --retain-model R --data-dir D --suites dusk tofu

How it measures, per suite, on this machine:
1. `pytest suites/...` once with the checkpoint, which fills a fresh result
   cache with the reference models' work (as in a sweep).
2. Again with two nudged copies of the checkpoint (the same model under
   fingerprints of their own, so their results are not in the cache), with a
   plugin that records what the suite asked of the second: every scored
   sequence (teacher-forced scores, next-token scores, activation-patched
   spans) and every generation (prompt tokens, new tokens produced). The
   second copy's `timings.evaluate_s` in the report is the real time: what
   each further checkpoint of a sweep costs. The first copy pays what a
   process pays once (imports, loading a sentence embedder or judge), shown
   apart as the first checkpoint's time.
3. The floor, in this process, on the same model, device and batch size:
   one forward pass over every recorded scored sequence (sorted by length,
   batched; a context several sequences share is run once, then each one's
   rest, as the scorer does), one greedy generation of every recorded new token (KV cache,
   finished rows dropped), and for activation patching one capture pass plus,
   per patched layer, the layers from it up (a forward of half the model on
   average). Nothing else: no tokenization, no metric code, no I/O.

Prints per suite the first checkpoint's time, the real time (the next
checkpoint's) and real / floor. It is a measurement, never a test assertion.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ZOO_SUITES = ("smoke", "dusk", "honesty", "conceptguard", "tofu", "muse", "wmdp", "uds", "elicitation")
CANDIDATE = "candidate"
FIRST = "first"  # evaluated before the candidate in the same process: it pays the one-time costs
RECORDER = '''
import collections, json, os

from unlearnbench.engine import results as results_module
from unlearnbench.models import handle as handle_module

CURRENT = {"suite": None}
LOG = {}
_load = handle_module.ModelHandle.load.__func__


def _record(kind, handle, method):
    depth = [0]

    def wrapped(*args, **kwargs):
        depth[0] += 1
        try:
            out = method(*args, **kwargs)
        finally:
            depth[0] -= 1
        if depth[0] == 0 and CURRENT["suite"]:  # what the suite asked, not the handle's own inner calls
            LOG.setdefault(CURRENT["suite"], []).append(_request(kind, handle, args, kwargs, out))
        return out
    return wrapped


def _ids(handle, text):
    return handle.encode_prompt(text)


def _once_each(sequences, starts):
    """The lengths a forward must run over to score `sequences` from `starts`: a context (all
    but its last token) that several share once, then each one's rest; the others whole."""
    contexts = [tuple(s[: k - 1]) for s, k in zip(sequences, starts)]
    sharers = collections.Counter(contexts)
    shared = {c for c, n in sharers.items() if c and n > 1}
    return [len(c) for c in shared] + [len(s) - (len(c) if c in shared else 0) for s, c in zip(sequences, contexts)]


def _request(kind, handle, args, kwargs, out):
    if kind == "token_logprobs":
        return {"kind": "score", "lengths": _once_each(args[0], args[1])}
    if kind == "score_continuations":
        pairs = handle.encode_pairs(args[0], args[1])
        return {"kind": "score", "lengths": _once_each([ids for ids, _ in pairs], [k for _, k in pairs])}
    if kind == "next_token":
        return {"kind": "score", "lengths": [len(_ids(handle, p)) for p in args[0]]}
    if kind == "generate":
        prefix = kwargs.get("prefix", "")
        return {"kind": "generate", "prompts": [len(_ids(handle, prefix + p)) for p in args[0]],
                "new": [max(1, len(handle.encode(g, add_special_tokens=False))) for g in out]}
    if kind == "span_scores":
        patched = kwargs.get("patch_source") is not None
        return {"kind": "patch" if patched else "score", "lengths": [len(s) for s in args[0]]}
    raise ValueError(kind)


def _counted_load(cls, *args, **kwargs):
    handle = _load(cls, *args, **kwargs)
    candidate = os.environ["FLOOR_CANDIDATE"]
    if handle.name == candidate:
        for kind in ("token_logprobs", "score_continuations", "next_token", "generate", "span_scores"):
            setattr(handle, kind, _record(kind, handle, getattr(handle, kind)))
    else:  # UDS patches the full model with the candidate's activations: that work is the candidate's
        patch = _record("span_scores", handle, handle.span_scores)
        setattr(handle, "span_scores", lambda *a, **k: patch(*a, **k) if getattr(k.get("patch_source"), "name", None)
                == candidate else _unrecorded(handle, a, k))
    return handle


def _unrecorded(handle, args, kwargs):
    return type(handle).span_scores(handle, *args, **kwargs)


handle_module.ModelHandle.load = classmethod(_counted_load)


_evaluate = results_module.Results._evaluate


def _evaluating(self, handle, suite):
    # The suite being evaluated, not the test running: a check's judgement may evaluate the checkpoint's
    # other suites first (its Holm family spans them all).
    outer, CURRENT["suite"] = CURRENT["suite"], suite
    import torch

    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    try:
        return _evaluate(self, handle, suite)
    finally:
        CURRENT["suite"] = outer
        if torch.cuda.is_available() and handle.name == os.environ["FLOOR_CANDIDATE"]:
            peak = max(LOG.get("_cuda_peak_bytes", {}).get(suite, 0), torch.cuda.max_memory_allocated())
            LOG.setdefault("_cuda_peak_bytes", {})[suite] = peak


results_module.Results._evaluate = _evaluating


def pytest_sessionfinish(session):
    with open(os.environ["FLOOR_LOG"], "w") as out:
        json.dump(LOG, out)
'''


def pytest_run(suites: list[str], models: dict[str, Path], args, work: Path, *, record: bool,
               extra: tuple[str, ...] = (), folder_name: str | None = None) -> dict:
    """One `pytest suites/...` process on `models` (`record`: with the recorder):
    its report, the recorded requests per suite, its peak RSS and wall seconds.
    `extra`: more pytest arguments (--dtype, --suite-option ...)."""
    folder = work / (folder_name or ("timed" if record else "warm"))
    (folder / "plugin").mkdir(parents=True, exist_ok=True)
    (folder / "plugin" / "floor_recorder.py").write_text(RECORDER)
    env = {**os.environ, "FLOOR_LOG": str(folder / "requests.json"), "FLOOR_CANDIDATE": CANDIDATE,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(folder / "plugin"), os.environ.get("PYTHONPATH")]))}
    command = [sys.executable, "-m", "pytest", *(f"suites/{s}" for s in suites),
               *(f"--model={name}={path}" for name, path in models.items()),
               f"--device={args.device}", f"--cache-dir={work / 'cache'}", f"--report-dir={folder / 'reports'}",
               "-p", "no:cacheprovider", "-q", "--no-progress", *(["-p", "floor_recorder"] if record else [])]
    command += [f"--full-model={args.full_model}", f"--retain-model={args.retain_model}"]
    command += [f"--data-dir={s}={args.data_dir}" for s in suites if s != "smoke"]
    command += list(extra)
    started = time.perf_counter()
    with open(folder / "stdout.txt", "w") as stdout, open(folder / "stderr.txt", "w") as stderr:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=stdout, stderr=stderr)
        _, status, usage = os.wait4(process.pid, 0)  # this child's own peak RSS, not the largest child's so far
        process.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    report_file = folder / "reports" / "latest" / "report.json"
    if process.returncode not in (0, 1) or not report_file.is_file():
        output = (folder / "stdout.txt").read_text()[-3000:] + (folder / "stderr.txt").read_text()[-3000:]
        sys.exit(f"floor: pytest ended with exit status {process.returncode}:\n{output}")
    report = json.loads(report_file.read_text())
    return {"report": report, "requests": json.loads((folder / "requests.json").read_text()) if record else {},
            "peak_rss_mib": usage.ru_maxrss / 1024, "wall_s": wall}


def _batches(items: list, size_of):
    """`items` (longest first) in batches of `size_of(first item)`: the suite's own batch size for that length."""
    start = 0
    while start < len(items):
        size = max(1, size_of(items[start]))
        yield items[start:start + size]
        start += size


def floor_seconds(model, requests: list[dict], batch_size: int | None, device) -> dict:
    """{score_s, generate_s, patch_s} of the recorded requests' unavoidable model work, batched as the suite's
    model batches (models/batching.Batcher: a fixed --batch-size, else its budget for that length)."""
    import torch

    from unlearnbench.models.batching import Batcher

    layers = model.config.num_hidden_layers
    vocab = model.config.vocab_size
    out = {"score_s": 0.0, "generate_s": 0.0, "patch_s": 0.0}
    batcher = Batcher(device=device, vocab_size=vocab, fixed_batch_size=batch_size)
    scored = sorted((n for r in requests if r["kind"] == "score" for n in r["lengths"]), reverse=True)
    patched = sorted((n for r in requests if r["kind"] == "patch" for n in r["lengths"]), reverse=True)
    generations = sorted(((p, n) for r in requests if r["kind"] == "generate" for p, n in zip(r["prompts"], r["new"])),
                         key=lambda pn: (-pn[1], -pn[0]))
    generator = torch.Generator().manual_seed(0)

    def tokens(shape):
        return torch.randint(10, vocab, shape, generator=generator).to(device)

    def forward_over(lengths: list[int], passes: float = 1.0) -> float:
        started = time.perf_counter()
        for group in _batches(lengths, lambda n: batcher.size(n, full_vocab_logits=True)):
            ids = tokens((len(group), max(group)))
            mask = torch.tensor([[1] * n + [0] * (max(group) - n) for n in group], device=device)
            for _ in range(max(1, round(passes))):
                model(input_ids=ids, attention_mask=mask)
        return time.perf_counter() - started

    with torch.inference_mode():
        out["score_s"] = forward_over(scored)
        # activation patching: one capture pass, then per patched layer the layers from it up (half the model on
        # average): 1 + layers / 2 forwards of each sequence
        out["patch_s"] = forward_over(patched, passes=1 + layers / 2) if patched else 0.0
        started = time.perf_counter()
        forward = inspect.signature(model.forward).parameters
        cache_kwarg = "cache" if "cache" in forward else "past_key_values"  # the name changed in transformers 5
        keep = {"logits_to_keep": 1} if "logits_to_keep" in forward else {}
        for group in _batches(generations, lambda pn: batcher.size(pn[0] + pn[1], full_vocab_logits=False)):
            longest = max(p for p, _ in group)
            ids = tokens((len(group), longest))
            mask = torch.tensor([[0] * (longest - p) + [1] * p for p, _ in group], device=device)
            result = model(input_ids=ids, attention_mask=mask, use_cache=True, **keep)
            remaining = torch.tensor([n for _, n in group], device=device)
            nxt = result.logits[:, -1].argmax(-1, keepdim=True)
            while True:
                remaining = remaining - 1
                live = (remaining > 0).nonzero().flatten()
                if len(live) == 0:
                    break
                cache = getattr(result, cache_kwarg)
                if len(live) < len(remaining):  # finished rows leave the batch and its cache
                    cache.batch_select_indices(live)
                    nxt, mask, remaining = nxt[live], mask[live], remaining[live]
                mask = torch.cat([mask, torch.ones((len(live), 1), dtype=mask.dtype, device=device)], dim=1)
                result = model(input_ids=nxt, attention_mask=mask, use_cache=True, **{cache_kwarg: cache}, **keep)
                nxt = result.logits[:, -1].argmax(-1, keepdim=True)
        out["generate_s"] = time.perf_counter() - started
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=None, help="an HF checkpoint folder (default: the zoo's npo)")
    parser.add_argument("--full-model", type=Path, default=None, help="default: the zoo's full")
    parser.add_argument("--retain-model", type=Path, default=None, help="default: the zoo's retain")
    parser.add_argument("--data-dir", type=Path, default=None, help="default: the zoo's data")
    parser.add_argument("--suites", nargs="+", default=list(ZOO_SUITES), choices=ZOO_SUITES, metavar="SUITE")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--json", type=Path, default=None, help="also write the table as JSON")
    parser.add_argument("--cache-dir", type=Path, default=None, help="where the zoo is kept")
    args = parser.parse_args()
    from unlearnbench.fixtures import zoo
    from unlearnbench.fixtures.perturb import nudged_copy

    args.model = args.model or zoo.build("npo", args.cache_dir)
    args.full_model = args.full_model or zoo.build("full", args.cache_dir)
    args.retain_model = args.retain_model or zoo.build("retain", args.cache_dir)
    args.data_dir = args.data_dir or zoo.data_dir(args.cache_dir)
    with tempfile.TemporaryDirectory(prefix="floor-") as work:
        work = Path(work)
        pytest_run(args.suites, {CANDIDATE: args.model}, args, work, record=False)  # the references' work, cached
        first = nudged_copy(args.model, work / FIRST, nudge=2e-7)
        copy = nudged_copy(args.model, work / CANDIDATE)
        timed = pytest_run(args.suites, {FIRST: first, CANDIDATE: copy}, args, work, record=True)
        import torch
        from transformers import AutoModelForCausalLM

        device = torch.device(args.device)
        model = AutoModelForCausalLM.from_pretrained(str(copy), dtype=torch.float32).to(device).eval()
        batch = timed["report"]["run"]["options"].get("batch_size")
        batch = int(batch) if str(batch).isdigit() else None  # "auto": the Batcher's budget
        rows = []
        for suite in args.suites:
            real, once = ((timed["report"]["checkpoints"][name]["suites"].get(suite, {}).get("timings") or {}).get(
                "evaluate_s") for name in (CANDIDATE, FIRST))
            floor = floor_seconds(model, timed["requests"].get(suite, []), batch, device)
            total = sum(floor.values())
            rows.append({"suite": suite, "real_s": real, "first_s": once, **floor, "floor_s": total,
                         "ratio": real / total if real and total else None,
                         "requests": len(timed["requests"].get(suite, []))})
    print(f"{'suite':<13}{'first s':>9}{'real s':>9}{'floor s':>9}{'real/floor':>12}   "
          "floor: score / generate / patch s")
    seconds = lambda value: "-" if value is None else f"{value:.3f}"  # noqa: E731
    for r in rows:
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}x"
        print(f"{r['suite']:<13}{seconds(r['first_s']):>9}{seconds(r['real_s']):>9}{r['floor_s']:>9.3f}{ratio:>12}   "
              f"{r['score_s']:.3f} / {r['generate_s']:.3f} / {r['patch_s']:.3f}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
