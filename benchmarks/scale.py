"""Every suite on models of the shapes users evaluate: peak memory, seconds,
tokens, and what they come to at full depth on a CPU and on a GPU.

    python benchmarks/scale.py                                   # Llama-3.2-1B, Llama-3.1-8B, Qwen2.5-7B shapes
    python benchmarks/scale.py --shapes llama-3.2-1b --layers 2 --suites tofu muse dusk
    python benchmarks/scale.py --model DIR --runs 5              # a real checkpoint: each suite's peak, 5 times
    python benchmarks/scale.py --quick                           # a tiny shape, two suites (the tests run this)

A shape is built here: a random-initialised model with the real width,
heads, MLP and vocabulary of the named model, `--layers` decoder layers
deep (the full depth does not fit this machine's 24 GB in float32 for the
7-8B shapes, nor its time), with SmolLM2's tokenizer and chat template (its
49k ids are a subset of every shape's vocabulary; a random model may emit
the others). Each suite runs alone in a fresh process (`pytest suites/S`,
a nudged copy of the shape as the checkpoint, the shape itself as the full
and the retain model, on the fixture
zoo's data with `--max-items` items a set where the suite has the option),
through benchmarks/floor.py's recorder, so that the run's tokens are counted:

- measured: the process's peak RSS (on CUDA also torch's peak allocation
  while the suite evaluates the checkpoint), the suite's seconds for the
  checkpoint (the report's `evaluate_s`, of a second nudged copy: a first
  one, evaluated before it, pays the references' work, as in a sweep), the sequences scored and the
  prompts generated from, the tokens scored, prefilled and generated;
- extrapolated to the shape's full depth: seconds on this device, by the
  per-layer cost measured here (one forward of a fixed batch at the built
  depth and at one layer: the rest of the model, its head over the
  vocabulary above all, is what one layer leaves); the peak, by the weights
  of the layers added (the working set is bounded by the batch budget, not
  by depth: docs/speed.md, "Memory");
- extrapolated to a GPU (`--gpu`, an H100 SXM by default: its dense
  bfloat16 and float32 throughput and memory bandwidth, `GPUS`), from the
  token counts: scoring and prefill at `MFU` of the dense throughput, each
  decoding step reading every weight once, in batches the GPU's memory
  allows. Never measured here: benchmarks/gpu_check.sh measures the
  Llama-3.2-1B shape on a real GPU, to hold these against.

Prints a table per shape (and with --json writes it). A measurement, never
a test assertion.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import floor  # noqa: E402  (benchmarks/floor.py: its pytest run and request recorder)

SUITES = ("smoke", "dusk", "honesty", "conceptguard", "tofu", "muse", "wmdp", "uds", "elicitation")
LIMITED = ("dusk", "honesty", "tofu", "muse", "wmdp", "uds", "elicitation")  # the suites with a max_items option

# The published configs' shapes (config.json of each model on the Hugging Face hub).
SHAPES = {
    "llama-3.2-1b": {"model_type": "llama", "hidden_size": 2048, "intermediate_size": 8192,
                     "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 64, "vocab_size": 128256,
                     "num_hidden_layers": 16, "tie_word_embeddings": True},
    "llama-3.1-8b": {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
                     "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 128256,
                     "num_hidden_layers": 32, "tie_word_embeddings": False},
    "qwen2.5-7b": {"model_type": "qwen2", "hidden_size": 3584, "intermediate_size": 18944,
                   "num_attention_heads": 28, "num_key_value_heads": 4, "head_dim": 128, "vocab_size": 152064,
                   "num_hidden_layers": 28, "tie_word_embeddings": False},
    # --quick: the smallest model SmolLM2's tokenizer can drive (its vocabulary, one narrow layer).
    "tiny": {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
             "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 49152, "num_hidden_layers": 1,
             "tie_word_embeddings": True},
}
# Dense throughput (FLOP/s) by dtype and memory bandwidth (bytes/s), from the vendors' data sheets.
GPUS = {
    "h100-80gb": {"memory_gib": 80, "flops": {"bfloat16": 989e12, "float32": 67e12}, "bandwidth": 3.35e12},
    "a100-80gb": {"memory_gib": 80, "flops": {"bfloat16": 312e12, "float32": 19.5e12}, "bandwidth": 2.04e12},
    "l4-24gb": {"memory_gib": 24, "flops": {"bfloat16": 121e12, "float32": 30e12}, "bandwidth": 0.3e12},
}
MFU = 0.4  # the share of the dense throughput a forward over a batch reaches (assumed, not measured)
MAX_ROWS = 256  # models/batching.MAX_BATCH


def build_shape(name: str, layers: int, folder: Path) -> Path:
    """A random-initialised `name`-shaped model `layers` deep, with SmolLM2's tokenizer, saved in `folder`."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from unlearnbench.models.offline import smollm2_checkpoint

    tokenizer = AutoTokenizer.from_pretrained(str(smollm2_checkpoint()))
    shape = dict(SHAPES[name], num_hidden_layers=layers)
    config = AutoConfig.for_model(**shape, max_position_embeddings=8192, bos_token_id=tokenizer.bos_token_id,
                                  eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def params_of(shape: dict) -> tuple[int, int]:
    """(parameters of one decoder layer, of everything else) of a shape."""
    h, i, heads, kv, d = (shape[k] for k in ("hidden_size", "intermediate_size", "num_attention_heads",
                                               "num_key_value_heads", "head_dim"))
    layer = h * heads * d * 2 + h * kv * d * 2 + 3 * h * i + 2 * h
    rest = shape["vocab_size"] * h * (1 if shape["tie_word_embeddings"] else 2) + h
    return layer, rest


def depth_factor(folder: Path, layers: int, full_layers: int, device: str) -> float:
    """Seconds at full depth / seconds at `layers`, from one timed forward of a
    [4, 256] batch at `layers` and at one layer (the same weights, cut)."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).to(device).eval()
    ids = torch.randint(10, 40000, (4, 256), generator=torch.Generator().manual_seed(0)).to(device)

    def seconds() -> float:
        times = []
        with torch.inference_mode():
            for _ in range(3):
                started = time.perf_counter()
                model(input_ids=ids)
                if device.startswith("cuda"):
                    torch.cuda.synchronize()
                times.append(time.perf_counter() - started)
        return statistics.median(times)

    whole = seconds()
    blocks = model.model.layers
    model.model.layers = blocks[:1]
    model.config.num_hidden_layers = 1
    one = seconds()
    per_layer = max((whole - one) / max(layers - 1, 1), 1e-9) if layers > 1 else None
    if per_layer is None:  # one layer built: split by parameter count
        layer_params, rest_params = params_of(json.loads((folder / "config.json").read_text()))
        per_layer = one * layer_params / (layer_params + rest_params)
    rest = max(one - per_layer, 0.0)
    return (rest + full_layers * per_layer) / (rest + layers * per_layer)


def token_counts(requests: list[dict]) -> dict:
    scored = [n for r in requests if r["kind"] in ("score", "patch") for n in r["lengths"]]
    prompts = [p for r in requests if r["kind"] == "generate" for p in r["prompts"]]
    new = [n for r in requests if r["kind"] == "generate" for n in r["new"]]
    # Decoding steps: each generate call's prompts in batches of MAX_ROWS, each batch as long as its longest reply.
    steps = sum(math.ceil(len(r["new"]) / MAX_ROWS) * max(r["new"], default=0)
                for r in requests if r["kind"] == "generate")
    return {"sequences": len(scored) + len(prompts), "scored_tokens": sum(scored), "prefill_tokens": sum(prompts),
            "generated_tokens": sum(new), "decode_steps": steps}


def gpu_seconds(counts: dict, shape: dict, dtype: str, gpu: dict) -> float | None:
    """Seconds of the recorded work at full depth on `gpu`; None where the weights do not fit."""
    layer, rest = params_of(shape)
    params = layer * shape["num_hidden_layers"] + rest
    weight_bytes = params * (2 if dtype == "bfloat16" else 4)
    if weight_bytes > 0.9 * gpu["memory_gib"] * 2**30:
        return None
    forward_flops = 2 * params * (counts["scored_tokens"] + counts["prefill_tokens"] + counts["generated_tokens"])
    compute = forward_flops / (MFU * gpu["flops"][dtype])
    reading = counts["decode_steps"] * weight_bytes / gpu["bandwidth"]  # each decoding step reads every weight
    return compute + reading


def run_suite(suite: str, model: Path, args, work: Path, tag: str, full: Path, retain: Path, *,
              first: bool) -> dict:
    """`suite` on a nudged copy of `model` (its own fingerprint: the full model's results, were it the same
    model, would otherwise be the checkpoint's), in a fresh process with a fresh result cache. `first`:
    another nudged copy is evaluated before it in the same process and pays the references' work and the
    process's one-time costs, so that the copy's seconds are what one more checkpoint of a sweep costs
    (as benchmarks/floor.py times it); else its seconds include them."""
    from unlearnbench.fixtures.perturb import nudged_copy

    copies = {floor.FIRST: work / "first", floor.CANDIDATE: work / "candidate"} if first else \
        {floor.CANDIDATE: work / "candidate"}
    for name, folder in copies.items():
        if not folder.is_dir():
            nudged_copy(model, folder, nudge=2e-7 if name == floor.FIRST else 1e-7)
    options = argparse.Namespace(device=args.device, full_model=full, retain_model=retain, data_dir=args.data_dir)
    extra = [f"--dtype={args.dtype}"]
    if args.max_items and suite in LIMITED:
        extra.append(f"--suite-option={suite}.max_items={args.max_items}")
    result = floor.pytest_run([suite], copies, options, work / tag, record=True, extra=tuple(extra),
                              folder_name=suite)
    timings = result["report"]["checkpoints"][floor.CANDIDATE]["suites"].get(suite, {}).get("timings") or {}
    cuda_peak = result["requests"].get("_cuda_peak_bytes", {}).get(suite)
    return {"suite": suite, "seconds": timings.get("evaluate_s"), "peak_rss_mib": result["peak_rss_mib"],
            "cuda_peak_mib": cuda_peak / 2**20 if cuda_peak else None, "wall_s": result["wall_s"],
            **token_counts(result["requests"].get(suite, []))}


def weights_mib(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.glob("*.safetensors")) / 2**20


def measure_shape(name: str, args, work: Path) -> dict:
    folder = build_shape(name, args.layers if name != "tiny" else 1, work / name / "model")
    layers = json.loads((folder / "config.json").read_text())["num_hidden_layers"]
    shape = SHAPES[name]
    factor = depth_factor(folder, layers, shape["num_hidden_layers"], args.device)
    layer_params, rest_params = params_of(shape)
    added_mib = (shape["num_hidden_layers"] - layers) * layer_params * 4 / 2**20
    rows = []
    for suite in args.suites:
        row = run_suite(suite, folder, args, work / name, "runs", folder, folder, first=True)
        row["full_depth_s"] = row["seconds"] * factor if row["seconds"] is not None else None
        row["full_depth_peak_mib"] = row["peak_rss_mib"] + added_mib
        for dtype in ("bfloat16", "float32"):
            row[f"gpu_{dtype}_s"] = gpu_seconds(row, shape, dtype, GPUS[args.gpu])
        rows.append(row)
        print(f"  {name} {suite}: {row['seconds']} s, peak {row['peak_rss_mib']:.0f} MiB", file=sys.stderr)
    return {"shape": name, "layers": layers, "full_layers": shape["num_hidden_layers"],
            "weights_mib": weights_mib(folder), "full_weights_mib": weights_mib(folder) + added_mib,
            "depth_factor": factor, "gpu": args.gpu, "rows": rows}


def measure_model(args, work: Path) -> dict:
    """A real checkpoint: each suite `--runs` times, each run in a fresh process with a fresh cache (its seconds
    include the references' work: what one gate of one checkpoint costs)."""
    full, retain = args.full_model or args.model, args.retain_model or args.model
    rows = []
    for suite in args.suites:
        runs = [run_suite(suite, args.model, args, work / f"run{k}", f"run{k}", full, retain, first=False)
                for k in range(args.runs)]
        rows.append({"suite": suite, "runs": runs, "peak_rss_mib": [r["peak_rss_mib"] for r in runs],
                     "seconds": [r["seconds"] for r in runs],
                     **{k: runs[0][k] for k in ("sequences", "scored_tokens", "prefill_tokens", "generated_tokens")}})
        print(f"  {suite}: peaks {[round(r['peak_rss_mib']) for r in runs]} MiB, "
              f"{[r['seconds'] for r in runs]} s", file=sys.stderr)
    return {"model": str(args.model), "weights_mib": weights_mib(Path(args.model)), "rows": rows}


def print_shape(result: dict) -> None:
    print(f"\n{result['shape']}: {result['layers']} of {result['full_layers']} layers built, "
          f"{result['weights_mib']:.0f} MiB of weights (full depth {result['full_weights_mib']:.0f} MiB, float32); "
          f"seconds x {result['depth_factor']:.2f} at full depth")
    print("| suite | sequences | tokens scored / prefilled / generated | peak RSS MiB | s | s per sequence | "
          f"full depth: s, peak MiB | {result['gpu']}: bf16 s, fp32 s |")
    print("|---|---|---|---|---|---|---|---|")
    for r in result["rows"]:
        per = r["seconds"] / r["sequences"] if r["seconds"] and r["sequences"] else None
        gpu = " / ".join("does not fit" if r[f"gpu_{d}_s"] is None else f"{r[f'gpu_{d}_s']:.1f}"
                         for d in ("bfloat16", "float32"))
        peak = f"{r['peak_rss_mib']:.0f}" + (f" (GPU {r['cuda_peak_mib']:.0f})" if r["cuda_peak_mib"] else "")
        print(f"| {r['suite']} | {r['sequences']} | {r['scored_tokens']} / {r['prefill_tokens']} / "
              f"{r['generated_tokens']} | {peak} | {fmt(r['seconds'])} | {fmt(per, 3)} | "
              f"{fmt(r['full_depth_s'])}, {r['full_depth_peak_mib']:.0f} | {gpu} |")


def print_model(result: dict) -> None:
    print(f"\n{result['model']}: {result['weights_mib']:.0f} MiB of weights")
    print("| suite | peak RSS MiB, each run | most above the weights, MiB | s, each run |")
    print("|---|---|---|---|")
    for r in result["rows"]:
        print(f"| {r['suite']} | {', '.join(f'{p:.0f}' for p in r['peak_rss_mib'])} | "
              f"{max(r['peak_rss_mib']) - result['weights_mib']:.0f} | {', '.join(fmt(s) for s in r['seconds'])} |")


def fmt(value, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="+", default=["llama-3.2-1b", "llama-3.1-8b", "qwen2.5-7b"],
                        choices=sorted(SHAPES), metavar="SHAPE")
    parser.add_argument("--layers", type=int, default=2, help="decoder layers built (default 2)")
    parser.add_argument("--model", type=Path, default=None, help="a real checkpoint instead of the shapes")
    parser.add_argument("--full-model", type=Path, default=None, help="with --model (default: the model)")
    parser.add_argument("--retain-model", type=Path, default=None, help="with --model (default: the model)")
    parser.add_argument("--runs", type=int, default=1, help="with --model: runs of each suite")
    parser.add_argument("--suites", nargs="+", default=list(SUITES), choices=SUITES, metavar="SUITE")
    parser.add_argument("--max-items", type=int, default=0, help="items a set, where a suite has the option")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    parser.add_argument("--gpu", default="h100-80gb", choices=sorted(GPUS))
    parser.add_argument("--data-dir", type=Path, default=None, help="default: the fixture zoo's data")
    parser.add_argument("--cache-dir", type=Path, default=None, help="where the zoo's data is kept")
    parser.add_argument("--quick", action="store_true", help="the tiny shape, smoke and tofu, 2 items a set")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    if args.quick:
        args.shapes, args.suites, args.max_items = ["tiny"], ["smoke", "tofu"], 2
    from unlearnbench.fixtures import zoo

    args.data_dir = args.data_dir or zoo.data_dir(args.cache_dir)
    with tempfile.TemporaryDirectory(prefix="scale-") as work:
        if args.model:
            results = [measure_model(args, Path(work))]
            print_model(results[0])
        else:
            results = []
            for name in args.shapes:
                results.append(measure_shape(name, args, Path(work)))
                print_shape(results[-1])
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
