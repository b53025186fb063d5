"""Adapters on an accelerator: the checks of tests/suites/test_adapters.py
that depend on where the model lives, run on `--device` (cuda on a GPU
machine; cpu anywhere). Two LoRA adapters are trained over a base model on
that device; each, loaded as an unlearnbench checkpoint, must score as its
merged copy (float32 to 1e-5, bfloat16 to its own precision), the second
must reuse the first's base (same object, on the device), and the base must
come back bit for bit after both. Prints one line per check and the time a
load takes; exits 1 on a failed check.

    python benchmarks/adapter_device_check.py --base ZOO_OR_HF_DIR --device cuda
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch


def train_adapter(base_dir: Path, out: Path, seed: int, device: str) -> tuple[Path, Path]:
    """A rank-4 LoRA adapter over `base_dir` after a few steps of gradient ascent on a fixed text, and its merged
    copy (`out`-merged)."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(str(base_dir))
    model = AutoModelForCausalLM.from_pretrained(str(base_dir), dtype=torch.float32).to(device)
    peft_model = get_peft_model(model, LoraConfig(r=4, lora_alpha=16, target_modules=["q_proj", "v_proj",
                                                                                      "down_proj"]))
    batch = tokenizer(["The quick brown fox jumps over the lazy dog."] * 4, return_tensors="pt").to(device)
    optimizer = torch.optim.AdamW([p for p in peft_model.parameters() if p.requires_grad], lr=2e-2)
    for _ in range(2 + seed):
        (-peft_model(**batch, labels=batch.input_ids).loss).backward()
        optimizer.step()
        optimizer.zero_grad()
    peft_model.save_pretrained(str(out))
    merged = out.with_name(out.name + "-merged")
    peft_model.merge_and_unload().to("cpu").save_pretrained(str(merged))
    tokenizer.save_pretrained(str(merged))
    return out, merged


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, required=True, help="an HF directory (the zoo's full model, SmolLM2)")
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    from unlearnbench.models.checkpoint import resolve
    from unlearnbench.models.handle import ModelHandle

    failed = []

    def check(name: str, ok: bool, detail: str = "") -> None:
        print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)
        if not ok:
            failed.append(name)

    work = Path(tempfile.mkdtemp(prefix="adapter-device-check-"))
    pairs = [train_adapter(args.base, work / f"lora{seed}", seed, args.device) for seed in range(2)]
    sequences = [[1, 5, 9, 14, 3, 7, 2, 8, 11, 4]]
    # float32: a merged checkpoint's arithmetic, to 1e-5; bfloat16: the adapter is merged in bfloat16 while the
    # merged copy was merged in float32 and rounded once, so they agree to a few bfloat16 steps (1/64 relative).
    for dtype, tolerance in (("float32", 1e-5), ("bfloat16", 1 / 64)):
        bases = []
        for adapter, merged in pairs:
            started = time.perf_counter()
            ours = ModelHandle.load(resolve(str(adapter)), name="lora", device=args.device, dtype=dtype)
            seconds = time.perf_counter() - started
            theirs = ModelHandle.load(str(merged), name="merged", device=args.device, dtype=dtype)
            a = torch.as_tensor(ours.token_logprobs(sequences, [1])[0].logprobs)
            b = torch.as_tensor(theirs.token_logprobs(sequences, [1])[0].logprobs)
            on_device = ours.device.type == torch.device(args.device).type
            check(f"{dtype} {adapter.name} scores as its merged copy on {ours.device}",
                  on_device and torch.allclose(a, b, rtol=tolerance, atol=tolerance),
                  f"max |diff| {float((a - b).abs().max()):.2e}, load {seconds:.2f} s")
            bases.append(ours.model)
            ours.release()
            theirs.release()
        check(f"{dtype} the second adapter reuses the first's base", bases[0] is bases[1])
        if dtype == "float32":
            from transformers import AutoModelForCausalLM

            fresh = AutoModelForCausalLM.from_pretrained(str(args.base), dtype=torch.float32).state_dict()
            kept = {k: v.cpu() for k, v in bases[0].state_dict().items()}
            check("float32 the base comes back bit for bit", all(torch.equal(kept[k], fresh[k]) for k in fresh))
    print(f"{len(failed)} failed" if failed else "all checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
