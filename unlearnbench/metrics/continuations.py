"""The log-likelihood of continuations after their contexts, as lm-evaluation-
harness's `loglikelihood` defines it (`LanguageModel.encode_pair`), computed
with as few forward passes as the requests allow: multiple-choice requests
whose continuations are each one token after exactly the context's own ids
(" A" ... " D" after "Answer:") share one next-token pass per distinct
context, the way lm-eval's HF backend shares one; the others are scored
teacher-forced in one batched call. The WMDP suite and the lm-eval adapter
both score through here."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def continuation_loglikelihoods(
    model, contexts: Sequence[str], continuations: Sequence[str], *, empty_context_prefix: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(summed log-likelihood of each continuation, whether it is the greedy
    one: every token the model's argmax; False where the backend reports no
    argmax). `empty_context_prefix`: the token an empty context conditions on
    (lm-eval's prefix token); None: `encode_pair`'s own rule."""
    n = len(contexts)
    lls, greedy = np.zeros(n, dtype=np.float64), np.zeros(n, dtype=bool)
    one_token: dict[str, list[tuple[int, int]]] = {}  # context -> [(request, continuation token)]
    own: dict[str, list[int]] = {}
    sequences, starts, forced = [], [], []
    paired = [i for i, context in enumerate(contexts) if context or empty_context_prefix is None]
    pairs = dict(zip(paired, model.encode_pairs([contexts[i] for i in paired], [continuations[i] for i in paired])))
    for i, (context, continuation) in enumerate(zip(contexts, continuations, strict=True)):
        if i not in pairs:
            sequences.append([empty_context_prefix, *model.encode_prompt(continuation)])
            starts.append(1)
            forced.append(i)
            continue
        ids, start = pairs[i]
        if len(ids) - start == 1:
            if context not in own:
                own[context] = model.encode_prompt(context)
            if ids[:start] == own[context]:
                one_token.setdefault(context, []).append((i, ids[start]))
                continue
        sequences.append(ids)
        starts.append(start)
        forced.append(i)
    if one_token:
        prompts = list(one_token)
        nxt = model.next_token(prompts, [[token for _, token in one_token[p]] for p in prompts])
        for k, prompt in enumerate(prompts):
            for (i, token), logprob in zip(one_token[prompt], nxt.logprobs[k], strict=True):
                lls[i] = float(logprob)
                greedy[i] = nxt.argmax is not None and int(nxt.argmax[k]) == token
    if forced:
        for i, scores in zip(forced, model.token_logprobs(sequences, starts), strict=True):
            lls[i] = float(np.sum(scores.logprobs, dtype=np.float64))
            greedy[i] = scores.argmax is not None and np.array_equal(scores.argmax, scores.token_ids)
    return lls, greedy
