"""Attacks on an unlearned checkpoint (docs/suites/robustness.md): transformations that bring
back knowledge that was hidden rather than removed. Each writes a new
checkpoint directory (the attacked weights and the tokenizer) that every
backend-independent probe can then evaluate like any checkpoint.

- `quant4`: 4-bit NF4 weight quantization as OpenUnlearning's study uses it
  (bitsandbytes, block size 64, double-quantized block scales), on every
  linear layer but the output head, as transformers' `load_in_4bit` does.
  The weights are quantized and dequantized with bitsandbytes' own kernels
  (they run on CPU and CUDA) and the model then runs in its usual dtype: the
  same weights a 4-bit model computes with, with float32 log-softmax kept.
- `quant8`: 8-bit row-wise absmax quantization (bitsandbytes' LLM.int8()
  weight format) of the same layers.
- `relearn`: LoRA fine-tuning (peft) for `steps` steps on a relearning set
  that is not the forget text, seeded and deterministic on CPU, merged back.

Attacked checkpoints are cached under `<cache>/attacks/` by (checkpoint
fingerprint, attack, parameters, relearning data).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from unlearnbench import libraries
from unlearnbench.errors import UnlearnbenchError

ATTACKS = ("quant4", "quant8", "relearn")
NF4_BLOCK = 64
ATTACKS_CODE_VERSION = 2


@dataclass(frozen=True)
class Attack:
    name: str  # one of ATTACKS
    params: dict = field(default_factory=dict)  # relearn: steps, learning_rate, rank, seed
    texts: tuple[str, ...] = ()  # relearn: the relearning set

    def digest(self) -> str:
        body = {
            "name": self.name,
            "params": self.params,
            "version": ATTACKS_CODE_VERSION,
            "texts": hashlib.sha256("\x00".join(self.texts).encode()).hexdigest() if self.texts else None,
        }
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]


def check_available(names) -> None:
    """One message before any model loads: an unknown attack, or the library it needs missing."""
    for name in names:
        if name not in ATTACKS:
            raise UnlearnbenchError(f"unknown attack '{name}' (known: {', '.join(ATTACKS)})")
    import importlib.util

    for name in names:
        if name == "relearn" and importlib.util.find_spec("peft") is None:
            raise UnlearnbenchError(f"attack '{name}' needs peft, which is not installed (pip install peft)")
        if name in ("quant4", "quant8") and importlib.util.find_spec("bitsandbytes") is None:
            others = ",".join(a for a in names if a not in ("quant4", "quant8")) or "relearn"
            raise UnlearnbenchError(
                f"attack '{name}' needs bitsandbytes: pip install 'unlearnbench[quant]' (or leave the "
                f"quantization attacks out: --suite-option robustness.attacks={others})"
            )


def attacked_dir(root: Path, fingerprint: str, attack: Attack) -> Path:
    return Path(root) / "attacks" / f"{fingerprint[:16]}-{attack.name}-{attack.digest()}"


def build(source, out: Path, attack: Attack) -> Path:
    """Write the attacked checkpoint of `source` (a models.checkpoint.ResolvedCheckpoint:
    an HF directory, a GGUF file or a PEFT adapter over its base) to `out`, atomically (a temporary folder
    renamed), unless it is there already. The caller holds `out`'s lock."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    if (out / "config.json").is_file():
        return out
    hf_logging.disable_progress_bar()  # pytest output is for verdicts, not load bars
    kwargs = {"gguf_file": source.gguf_file} if source.gguf_file else {}
    tokenizer = AutoTokenizer.from_pretrained(str(source.tokenizer_directory), **kwargs)
    # Quantization keeps the checkpoint's own dtype (a bf16 model needs half the memory of float32);
    # relearning trains its LoRA weights in float32.
    dtype = torch.float32 if attack.name == "relearn" else "auto"
    model = AutoModelForCausalLM.from_pretrained(str(source.weights_directory), dtype=dtype, **kwargs)
    if source.kind == "adapter":
        PeftModel = libraries.peft().PeftModel

        # The attack acts on the weights the adapted model runs with: the adapter merged into its base.
        model = PeftModel.from_pretrained(model, str(source.directory)).merge_and_unload()
    if attack.name == "quant4":
        quantize_nf4(model)
    elif attack.name == "quant8":
        quantize_int8(model)
    else:
        model = relearn(model, tokenizer, attack)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = out.with_name(out.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    model.save_pretrained(staging, safe_serialization=True)
    tokenizer.save_pretrained(staging)
    (staging / "attack.json").write_text(
        json.dumps(
            {
                "attack": attack.name,
                "params": attack.params,
                "source": source.display,
                "relearn_texts": len(attack.texts),
            }
        )
    )
    staging.rename(out)
    return out


def quantized_linears(model):
    """Every linear layer but the output head (transformers keeps it unquantized)."""
    import torch

    head = model.get_output_embeddings()
    return [m for m in model.modules() if isinstance(m, torch.nn.Linear) and m is not head]


def nf4_roundtrip(weight, *, double_quant: bool = True):
    """bitsandbytes' NF4 quantization of `weight` (blocks of 64), dequantized."""
    bnb = libraries.bitsandbytes()

    packed, state = bnb.quantize_4bit(
        weight.detach().float().contiguous(), blocksize=NF4_BLOCK, quant_type="nf4", compress_statistics=double_quant
    )
    return bnb.dequantize_4bit(packed, state).to(weight.dtype)


def int8_roundtrip(weight):
    """bitsandbytes' LLM.int8() weight format: int8 per row, scaled by the row's absmax."""
    bnb = libraries.bitsandbytes()

    codes, row_absmax, _ = bnb.int8_vectorwise_quant(weight.detach().half().contiguous())
    return (codes.float() * (row_absmax.float()[:, None] / 127)).to(weight.dtype)


def quantize_nf4(model) -> None:
    _quantize(model, nf4_roundtrip)


def quantize_int8(model) -> None:
    _quantize(model, int8_roundtrip)


def _quantize(model, roundtrip) -> None:
    """Each quantized layer's weight through `roundtrip`, one layer at a time
    on a GPU when there is one (the same kernels; the model stays where it is)."""
    import torch

    device = torch.device("cuda") if torch.cuda.is_available() else None
    with torch.no_grad():
        for linear in quantized_linears(model):
            weight = linear.weight
            linear.weight.copy_(roundtrip(weight.to(device) if device else weight).to(weight.device))


def relearn(model, tokenizer, attack: Attack):
    """LoRA fine-tuning on `attack.texts` for `steps` steps, merged into the weights."""
    import torch

    peft = libraries.peft()

    if not attack.texts:
        raise UnlearnbenchError("attack 'relearn': the relearning set is empty")
    p = {"steps": 20, "learning_rate": 1e-3, "rank": 8, "seed": 0, "batch_size": 8, **attack.params}
    saved = (torch.are_deterministic_algorithms_enabled(), torch.get_num_threads())
    torch.manual_seed(int(p["seed"]))
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)  # the same sums in the same order on every machine
    try:
        lora = peft.get_peft_model(
            model,
            peft.LoraConfig(
                r=int(p["rank"]), lora_alpha=2 * int(p["rank"]), lora_dropout=0.0, target_modules="all-linear"
            ),
        )
        optimizer = torch.optim.AdamW([q for q in lora.parameters() if q.requires_grad], lr=float(p["learning_rate"]))
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        order = torch.randperm(len(attack.texts), generator=torch.Generator().manual_seed(int(p["seed"]))).tolist()
        size = int(p["batch_size"])
        lora.train()
        for step in range(int(p["steps"])):
            rows = [attack.texts[order[(step * size + k) % len(order)]] for k in range(size)]
            batch = tokenizer(rows, return_tensors="pt", padding=True)
            labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
            loss = lora(**batch, labels=labels).loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        lora.eval()
        return lora.merge_and_unload()
    finally:
        torch.use_deterministic_algorithms(saved[0])
        torch.set_num_threads(saved[1])
