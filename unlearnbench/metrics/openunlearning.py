"""OpenUnlearning's data path, for TOFU and MUSE under `convention=reference`
(docs/suites/tofu.md): the token ids its code feeds the model and the positions it
scores, so our numbers sit beside the ones its code publishes.

Read from locuslab/open-unlearning: `src/data/utils.py`
(`preprocess_chat_instance`, `preprocess_pretraining_instance`),
`src/data/collators.py`, `src/evals/metrics/utils.py`, `memorization.py`,
`privacy.py`, `mia/`, and the model and eval configs. What it does that our
default convention does not:

- a QA item is the templated conversation; the scored labels are everything
  after the templated prompt: the answer, the template's closing tokens and
  an EOS appended when the conversation does not end with one;
- base models get `Question: ... \\nAnswer: ` (a prompt that ends in a
  space), chat models their template with the system prompt (and date line,
  Llama-3.x) of OpenUnlearning's config for their family (`CONFIGS`), and a
  model it has no config for its template as is;
- the collator's attention mask is `input_ids != pad_id`, and pad = EOS
  where the tokenizer has none: every EOS-id token inside a sequence is kept
  out of attention (`masked_ids`);
- probabilities average over every label; extraction strength, exact
  memorization and Min-K% drop the last label position;
- MUSE's VerbMem is `prefix + " " + continuation` encoded together; a
  membership text is BOS + text, cut at BOS + 2048 tokens;
- every ratio has 1e-10 added to its denominator;
- generated text and references are decoded with special tokens skipped and
  `clean_up_tokenization_spaces=True` (which transformers 5 applies to
  WordPiece-style tokenizers, not BPE), then stripped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from unlearnbench.errors import DataError

EPSILON = 1e-10
AUTO = "auto"  # `reference_system_prompt`'s default: the system prompt of the config for the model's family


@dataclass(frozen=True)
class Template:
    """A model config's `template_args`: the chat template (`chat`) with an
    optional system prompt and date, or literal tags around each turn."""

    family: str
    chat: bool
    system_prompt: str | None = None
    date_string: str | None = None
    user_start: str = ""
    user_end: str = ""
    assistant_start: str = ""
    assistant_end: str = ""


HELPFUL = "You are a helpful assistant."
# OpenUnlearning's configs/model/*.yaml at d3d7cf9. Each config belongs to one
# model family, told here by the class its weights load as (`architecture`)
# and a marker its chat template writes: the template alone cannot tell them
# apart (Qwen2.5 and SmolLM2 both write ChatML, Mistral-Instruct and
# Llama-2-chat both write [INST]).
CONFIGS = (
    (
        "Llama",
        "<|start_header_id|>",
        Template("Llama-3.x (configs/model/Llama-3.*-Instruct.yaml)", True, HELPFUL, "10 Apr 2025"),
    ),
    ("Qwen2", "<|im_start|>", Template("Qwen2.5 (configs/model/Qwen2.5-*-Instruct.yaml)", True, HELPFUL)),
    ("Gemma", "<start_of_turn>", Template("Gemma (configs/model/gemma-7b-it.yaml)", True)),
    ("Phi3", "<|end|>", Template("Phi-3.5 (configs/model/Phi-3.5-mini-instruct.yaml)", True, HELPFUL)),
    ("Mistral", "<|assistant|>", Template("Zephyr (configs/model/zephyr-7b-beta.yaml)", True, HELPFUL, "10 Apr 2025")),
    (
        "Llama",
        "[INST]",
        Template(
            "Llama-2-chat (configs/model/Llama-2-7b-chat-hf.yaml)",
            False,
            user_start="[INST] ",
            user_end=" [/INST]",
            assistant_end=" ",
        ),
    ),
)
# A model OpenUnlearning ships no config for gets what a config of only
# `apply_chat_template: true` gives: the template as it is, with whatever
# default system prompt it writes itself (SmolLM2's names SmolLM).
OTHER_CHAT = Template(
    "a chat template no OpenUnlearning config covers: applied as is (its own default system prompt, if any)", True
)
BASE = Template(
    "base model (configs/model/Llama-2-7b-hf.yaml, phi-1_5.yaml)",
    False,
    user_start="Question: ",
    user_end="\n",
    assistant_start="Answer: ",
    assistant_end="\n\n",
)
MAX_QA_TOKENS = 512  # the TOFU and MUSE QA datasets' max_length
MAX_COMPLETION_TOKENS = 2048  # MUSE's VerbMem dataset max_length


def template_for(model, system_prompt: str = AUTO) -> Template:
    """The template_args of the OpenUnlearning config for `model`'s family,
    with `system_prompt` (a suite's `reference_system_prompt`: "auto" keeps
    the config's, "none" drops it, any other text replaces it)."""
    if not model.has_chat_template:
        template = BASE
    else:
        probe = model.format_chat([{"role": "user", "content": "?"}])
        template = next(
            (
                t
                for architecture, marker, t in CONFIGS
                if model.architecture.startswith(architecture) and marker in probe
            ),
            OTHER_CHAT,
        )
    if system_prompt == AUTO:
        return template
    if not template.chat:
        raise DataError(
            "--suite-option reference_system_prompt",
            f"{model.name} is prompted through "
            f"{template.family}, literal tags without a chat template: a system prompt has no place "
            f"there (OpenUnlearning's tag configs have none); drop the option",
        )
    text = None if system_prompt == "none" else system_prompt
    return replace(
        template,
        system_prompt=text,
        family=f"{template.family}; system prompt: {'none' if text is None else repr(text)}",
    )


def pad_id(model) -> int:
    """OpenUnlearning's tokenizer: pad = EOS where the tokenizer defines no pad."""
    return model.pad_token_id if model.pad_token_id is not None else model.eos_token_id


@dataclass(frozen=True)
class Encoded:
    """One item as OpenUnlearning's dataset gives it: the ids, where the
    labels start, and the prompt's own ids (what generation starts from)."""

    ids: list[int]
    start: int
    prompt_ids: list[int]


def _messages(template: Template, questions: Sequence[str], answers: Sequence[str]) -> list[dict]:
    chat = [{"role": "system", "content": template.system_prompt}] if template.system_prompt else []
    for question, answer in zip(questions, answers):
        chat += [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
    return chat


def _template_kwargs(template: Template) -> dict:
    return {"date_string": template.date_string} if template.date_string else {}


def qa_prompt(model, template: Template, questions: Sequence[str], answers: Sequence[str]) -> str:
    """The text before the last answer: earlier pairs are in-context examples."""
    if template.chat:
        return model.format_chat(
            _messages(template, questions, answers)[:-1],
            add_generation_prompt=True,
            template_kwargs=_template_kwargs(template),
        )
    turns = "".join(
        template.user_start + q + template.user_end + template.assistant_start + a + template.assistant_end
        for q, a in zip(questions[:-1], answers[:-1])
    )
    return turns + template.user_start + questions[-1] + template.user_end + template.assistant_start


def encode_qa(model, template: Template, questions: Sequence[str], answers: Sequence[str]) -> Encoded:
    """`preprocess_chat_instance`: the conversation (templated, or tags with
    the tokenizer's special tokens, cut at 512), an EOS appended unless it
    ends with one; labels from the templated prompt's length on."""
    prompt = qa_prompt(model, template, questions, answers)
    if template.chat:
        # apply_chat_template(tokenize=True) encodes the rendered text without special tokens.
        ids = model.encode(
            model.format_chat(
                _messages(template, questions, answers),
                add_generation_prompt=False,
                template_kwargs=_template_kwargs(template),
            ),
            add_special_tokens=False,
        )
        prompt_ids = model.encode(prompt, add_special_tokens=False)
    else:
        ids = model.encode(prompt + answers[-1], add_special_tokens=True)[:MAX_QA_TOKENS]
        prompt_ids = model.encode(prompt, add_special_tokens=True)[:MAX_QA_TOKENS]
    if ids[-1] != model.eos_token_id:
        ids = ids + [model.eos_token_id]
    return Encoded(ids, len(prompt_ids), prompt_ids)


def encode_completion(model, prefix: str, text: str, max_tokens: int, *, insert_space: bool) -> Encoded:
    """`preprocess_pretraining_instance`: prefix (+ a space) + text encoded
    together with special tokens, cut at the prefix's length + `max_tokens`;
    labels after the prefix, never on the first token."""
    prefix_ids = model.encode(prefix, add_special_tokens=True)
    ids = model.encode(prefix + (" " if insert_space else "") + text, add_special_tokens=True)
    return Encoded(ids[: len(prefix_ids) + max_tokens], max(len(prefix_ids), 1), prefix_ids)


def score(model, encoded: Sequence[Encoded], *, vocab_stats: bool = False) -> list:
    """Teacher-forced scores of every label, with pad-id tokens out of attention (the collator's mask)."""
    return model.token_logprobs(
        [e.ids for e in encoded], [e.start for e in encoded], vocab_stats=vocab_stats, masked_ids={pad_id(model)}
    )


def reference_text(model, encoded: Encoded, *, whole: bool) -> str:
    """`eval_text_similarity`'s ground truth: the label tokens decoded (the
    whole conversation for a QA item, whose generation labels are all of it),
    with the decoded prompt removed, stripped."""
    labels = encoded.ids if whole else encoded.ids[encoded.start :]
    prompt = model.clean_up_spaces(model.decode(encoded.prompt_ids))
    return model.clean_up_spaces(model.decode(labels)).replace(prompt, "").strip()


def generate(model, prompts: Sequence[str], *, max_new_tokens: int, stop_strings: Sequence[str] = ()) -> list[str]:
    """Greedy replies as `eval_text_similarity` reads them: pad-id tokens of
    the prompt out of attention, special tokens skipped, cleaned up, cut at
    the stop strings, stripped."""
    replies = model.generate(
        list(prompts), max_new_tokens=max_new_tokens, stop_strings=stop_strings, masked_ids={pad_id(model)}
    )
    return [model.clean_up_spaces(reply).strip() for reply in replies]


def labels_but_last(scores):
    """The positions `tokenwise_logprobs` and `tokenwise_vocab_logprobs`
    return: every label but the last (the EOS prediction)."""
    cut = slice(0, max(len(scores.logprobs) - 1, 0))
    return replace(
        scores,
        token_ids=scores.token_ids[cut],
        logprobs=scores.logprobs[cut],
        argmax=None if scores.argmax is None else scores.argmax[cut],
        vocab_mean=None if scores.vocab_mean is None else scores.vocab_mean[cut],
        vocab_var=None if scores.vocab_var is None else scores.vocab_var[cut],
    )
