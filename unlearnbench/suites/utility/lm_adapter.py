"""lm-evaluation-harness's `LM` over unlearnbench's model interface, so any
lm-eval task runs on every backend (Hugging Face weights in this process, an
OpenAI-compatible endpoint, a third-party backend) with its batching.

Registered in lm-eval's model registry as `unlearnbench`:

    lm_eval --model unlearnbench --model_args pretrained=runs/npo --tasks mmlu
    lm_eval --model unlearnbench --model_args pretrained=openai:http://host:8000/v1#my-model ...

Each request type follows lm-eval's HF backend (`lm_eval/models/huggingface.py`):
- `loglikelihood`: the context's trailing whitespace moves into the
  continuation, the joined text is encoded once (`LanguageModel.encode_pair`,
  written from lm-eval's `_encode_pair`); an empty context conditions on the
  prefix token (the tokenizer's BOS, else its EOS); `is_greedy` is whether
  every continuation token is the model's argmax (False where the backend
  does not report argmaxes); one-token continuations of a shared context
  (multiple choice by letter) share one forward pass
  (metrics/continuations.py), as lm-eval's HF backend shares one;
- `loglikelihood_rolling`: lm-eval's own rolling windows
  (`get_rolling_token_windows` + `make_disjoint_window`, context 1) over the
  text's tokens, each window scored teacher-forced;
- `generate_until`: greedy generation to `max_gen_toks` (default 256), cut at
  the first of `until`; a task that asks for sampling is refused (the models
  generate greedily).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from lm_eval import utils as lm_utils
from lm_eval.api.model import LM
from lm_eval.api.registry import register_model

from unlearnbench.metrics.continuations import continuation_loglikelihoods

DEFAULT_MAX_GEN_TOKS = 256


@register_model("unlearnbench")
class UnlearnbenchLM(LM):
    def __init__(
        self, model=None, pretrained: str | None = None, device: str = "auto", dtype: str = "auto", **_: Any
    ) -> None:
        super().__init__()
        if model is None:
            if pretrained is None:
                raise ValueError("--model_args pretrained=PATH|openai:URL#MODEL is required")
            from unlearnbench.backends import LoadSettings, backend_for

            settings = LoadSettings(device=device, dtype=dtype)
            model = backend_for(pretrained).load_model(pretrained, name=pretrained, settings=settings)
        self.model = model

    # ------------------------------------------------------------ loglikelihood
    def loglikelihood(self, requests, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        contexts, continuations = zip(*(r.args for r in requests)) if requests else ((), ())
        lls, greedy = continuation_loglikelihoods(
            self.model, contexts, continuations, empty_context_prefix=self._prefix_token()
        )
        return [(float(ll), bool(g)) for ll, g in zip(lls, greedy)]

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        prefix = self._prefix_token()
        windows, owner = [], []
        for index, (text,) in enumerate(r.args for r in requests):
            for context, continuation in map(
                lm_utils.make_disjoint_window,
                lm_utils.get_rolling_token_windows(
                    token_list=self.model.encode_prompt(text),
                    prefix_token=prefix,
                    max_seq_len=self.model.context_length,
                    context_len=1,
                ),
            ):
                windows.append((context, continuation))
                owner.append(index)
        scores = self.model.token_logprobs([c + x for c, x in windows], [len(c) for c, _ in windows])
        totals = [0.0] * len(requests)
        for index, score in zip(owner, scores):
            totals[index] += float(np.sum(score.logprobs, dtype=np.float64))
        return totals

    def _prefix_token(self) -> int:
        """lm-eval's `prefix_token_id`: what an empty context conditions on."""
        prefix = self.model.bos_token_id if self.model.bos_token_id is not None else self.model.eos_token_id
        if prefix is None:
            raise ValueError(
                f"{self.model.name}: its tokenizer has neither BOS nor EOS to condition an empty context on"
            )
        return prefix

    # --------------------------------------------------------------- generation
    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        groups: dict[str, list[int]] = {}
        for index, request in enumerate(requests):
            groups.setdefault(json.dumps(request.args[1], sort_keys=True, default=str), []).append(index)
        out: list[str] = [""] * len(requests)
        for indices in groups.values():
            kwargs = dict(requests[indices[0]].args[1])
            if kwargs.get("do_sample") or float(kwargs.get("temperature") or 0.0) > 0:
                raise ValueError(f"the task asks for sampling ({kwargs}); unlearnbench's models generate greedily")
            until = kwargs.get("until") or []
            until = [until] if isinstance(until, str) else list(until)
            texts = self.model.generate(
                [requests[i].args[0] for i in indices],
                max_new_tokens=int(kwargs.get("max_gen_toks", DEFAULT_MAX_GEN_TOKS)),
                stop_strings=until,
            )
            for i, text in zip(indices, texts):
                out[i] = text
        return out

    # -------------------------------------------------------------- chat format
    @property
    def tokenizer_name(self) -> str:
        return self.model.name

    def chat_template(self, chat_template: bool | str = False) -> str | None:
        return self.model.name if chat_template and self.model.has_chat_template else None

    def apply_chat_template(self, chat_history: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        return self.model.format_chat(chat_history, add_generation_prompt=add_generation_prompt)
