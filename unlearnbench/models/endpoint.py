"""`EndpointModel`: a model served by an OpenAI-compatible server (vLLM,
llama.cpp server, TGI, ...), named `openai:http://HOST:PORT/v1#SERVED-NAME`.

It uses only the documented legacy-completions fields of `/v1/completions`
(prompt as token ids, `max_tokens`, `temperature: 0`, `stop`, `echo`,
`logprobs`), so no vendor extension is needed:
- prompts are built here, from the served model's own tokenizer files
  (`--tokenizer NAME=DIR`) and sent as token ids: chat formatting and the one
  BOS (docs/conventions.md) are ours, exactly as in the Hugging Face backend;
- generation: greedy (`temperature: 0`), cut at the stop strings here too
  (servers accept only a few of them);
- teacher-forced log-probs: the prompt echoed with its log-probs and no new
  token (`echo`, `logprobs`, `max_tokens: 0`);
- label log-probs (multiple-choice answers): the prompt with each label token
  appended, echoed the same way, so every label gets its exact log-prob (a
  top-k list would miss labels outside the top k).

What an endpoint cannot give makes the metrics that need it unavailable
(`MissingCapability`), with the reason: the full next-token distribution
(Min-K%++ statistics, first-token entropy), rewriting logits, and hidden
states (UDS). Without a tokenizer every metric is unavailable.

Requests go out in chunks of prompts, a bounded number at a time, with
retries on 429/5xx and timeouts (openai_api.py).
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
import time
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np

from unlearnbench import cancel, progress
from unlearnbench.errors import CheckpointError, MissingCapability
from unlearnbench.models.checkpoint import TOKENIZER_VOCAB_FILES, fingerprint, prompting_files
from unlearnbench.models.interface import NextToken, Sampling, TokenScores, cut_at_stop
from unlearnbench.models.tokenization import Tokenization
from unlearnbench.openai_api import EndpointError, OpenAIClient

PREFIX = "openai:"
PROMPTS_PER_REQUEST = 16
# Echoed log-probs of 16 long prompts (with their top-1 entries) run to a few MB.
MAX_REPLY_BYTES = 64 << 20
RETRIES = 4
FULL_DISTRIBUTION = (
    "an OpenAI-compatible endpoint returns the log-probs of given tokens and a top-k list, "
    "not the full next-token distribution"
)


def parse_source(source: str) -> tuple[str, str]:
    """(base URL, served model name) of `openai:http(s)://HOST[:PORT]/PATH#NAME`."""
    url, _, served = source.removeprefix(PREFIX).partition("#")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise CheckpointError(source, "expected openai:http(s)://HOST[:PORT]/v1#SERVED-MODEL-NAME")
    return url.rstrip("/"), served


def _client(source: str, settings) -> OpenAIClient:
    base_url, _ = parse_source(source)
    return OpenAIClient(
        base_url,
        what=f"--model {source}",
        timeout=settings.endpoint_timeout,
        retries=RETRIES,
        max_reply_bytes=MAX_REPLY_BYTES,
    )


def _served_entry(client: OpenAIClient, source: str) -> dict:
    """The server's `/models` entry of the served model (reachability, and its name when none is given)."""
    _, served = parse_source(source)
    try:
        listed = client.get("/models").get("data") or []
    except EndpointError as exc:
        raise CheckpointError(source, f"the server does not answer GET /models: {exc}") from None
    ids = [entry.get("id") for entry in listed if isinstance(entry, dict)]
    if served:
        if served not in ids:
            raise CheckpointError(source, f"the server serves {', '.join(map(str, ids)) or 'no model'}, not '{served}'")
        return listed[ids.index(served)]
    if len(ids) != 1:
        raise CheckpointError(
            source, f"the server serves {len(ids)} models ({', '.join(map(str, ids))}): name one after '#'"
        )
    return listed[0]


def _run_interruptibly(send: Callable[[list[int]], list], chunks: list[list[int]], concurrency: int) -> list[list]:
    """[send(chunk) for chunk in chunks], `concurrency` at a time, in daemon
    threads: the caller waits in short steps and leaves at once on Ctrl-C or
    the checkpoint's deadline (cancel.py), without waiting for requests still
    in flight (a hung server's threads end with the process)."""
    results: dict[int, list] = {}
    errors: list[BaseException] = []
    todo = list(enumerate(chunks))
    lock, progressed = threading.Lock(), threading.Event()

    def worker() -> None:
        while not errors and not cancel.interrupted():
            with lock:
                if not todo:
                    return
                position, chunk = todo.pop(0)
            try:
                results[position] = send(chunk)
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller
                errors.append(exc)
            progressed.set()

    for _ in range(max(1, min(concurrency, len(chunks)))):
        threading.Thread(target=worker, daemon=True).start()
    while True:
        progressed.clear()  # before looking: a chunk finished after the look sets it again
        if errors:
            raise errors[0]
        if len(results) == len(chunks):
            return [results[position] for position in range(len(chunks))]
        cancel.check()
        progressed.wait(cancel.POLL_S)


def _tokenizer_dir(name: str, settings) -> Path | None:
    directory = settings.tokenizers.get(name)
    if directory is None:
        return None
    path = Path(directory).expanduser()
    if not any((path / f).is_file() for f in TOKENIZER_VOCAB_FILES):
        raise CheckpointError(
            path,
            f"--tokenizer {name}={directory}: no tokenizer files (one of {', '.join(TOKENIZER_VOCAB_FILES)}) in it",
        )
    return path


def check_source(source: str, *, name: str, settings) -> None:
    """Before any model loads: the URL's form, the tokenizer folder, and that the server answers."""
    _tokenizer_dir(name, settings)
    with _client(source, settings) as client:
        _served_entry(client, source)


def source_fingerprint(source: str, *, name: str, settings) -> str:
    """The URL, the served model's name and path as the server reports them
    (vLLM's `root`), and the tokenizer files: a server restarted on other
    weights under the same name and path looks the same, so give a new
    checkpoint a new name (or a fresh --cache-dir)."""
    with _client(source, settings) as client:
        entry = _served_entry(client, source)
    directory = _tokenizer_dir(name, settings)
    tokenizer = fingerprint(tuple(prompting_files(directory))) if directory else ""
    identity = {
        "url": parse_source(source)[0],
        "model": entry.get("id"),
        "root": entry.get("root"),
        "tokenizer": tokenizer,
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()


def load_backend(source: str, *, name: str, settings) -> EndpointModel:
    started = time.perf_counter()
    client = _client(source, settings)
    entry = _served_entry(client, source)
    directory = _tokenizer_dir(name, settings)
    tokenizer, config = None, {}
    if directory is not None:
        from transformers import AutoTokenizer

        try:
            tokenizer = AutoTokenizer.from_pretrained(str(directory))
        except Exception as exc:  # noqa: BLE001 - report any loader failure as one line
            raise CheckpointError(
                directory, f"--tokenizer {name}: cannot load it ({type(exc).__name__}: {exc})"
            ) from exc
        if (directory / "config.json").is_file():
            config = json.loads((directory / "config.json").read_text())
    from unlearnbench.models.device import resolve_device

    return EndpointModel(
        name=name,
        source=source,
        served=str(entry["id"]),
        client=client,
        tokenizer=tokenizer,
        tokenizer_dir=directory,
        config=config,
        fingerprint=source_fingerprint(source, name=name, settings=settings),
        concurrency=settings.concurrency,
        helper_device=resolve_device(settings.device),
        load_seconds=time.perf_counter() - started,
    )


class EndpointModel(Tokenization):
    """`LanguageModel` over an OpenAI-compatible `/v1/completions` endpoint."""

    def __init__(
        self,
        *,
        name: str,
        source: str,
        served: str,
        client: OpenAIClient,
        tokenizer,
        tokenizer_dir,
        config: dict,
        fingerprint: str,
        concurrency: int,
        helper_device,
        load_seconds: float = 0.0,
    ):
        self.name, self.source, self.served, self.client = name, source, served, client
        self._tokenizer, self.tokenizer_dir, self.config = tokenizer, tokenizer_dir, config
        self.fingerprint, self.concurrency, self.load_seconds = fingerprint, concurrency, load_seconds
        self._helper_device = helper_device

    @property
    def tokenizer(self):
        if self._tokenizer is None:
            raise MissingCapability(
                f"{self.name} is served by an endpoint and no tokenizer was given: prompts are "
                f"built from the served model's tokenizer files (--tokenizer {self.name}=DIR)"
            )
        return self._tokenizer

    # ------------------------------------------------------------ identity
    @property
    def device(self):
        """Where helper models (embedders, judges) run: the model itself is remote."""
        return self._helper_device

    @property
    def dtype(self) -> str:
        return "served"  # the server's choice, not visible through the API

    @property
    def architecture(self) -> str:
        return (self.config.get("architectures") or [f"served by {self.client.base_url}"])[0]

    @property
    def context_length(self) -> int:
        for key in ("max_position_embeddings", "n_positions"):
            if self.config.get(key):
                return int(self.config[key])
        limit = getattr(self.tokenizer, "model_max_length", None)
        if limit and limit < 10**8:  # transformers' "no limit" is a huge sentinel
            return int(limit)
        raise MissingCapability(
            f"{self.name}: the context length is unknown (no config.json with "
            "max_position_embeddings beside the tokenizer, no model_max_length)"
        )

    def describe(self) -> dict:
        return {
            "name": self.name,
            "source": self.source,
            "fingerprint": self.fingerprint,
            "backend": "openai",
            "served_model": self.served,
            "architecture": self.architecture,
            "tokenizer": str(self.tokenizer_dir) if self.tokenizer_dir else None,
            "device": "endpoint",
            "dtype": self.dtype,
            "load_seconds": round(self.load_seconds, 3),
        }

    def release(self) -> None:
        """The weights live on the server: only the connections are closed."""
        self.client.close()

    # ------------------------------------------------------------ requests
    def _completions(
        self, prompts: Sequence[Sequence[int]], body: dict, read: Callable[[dict, Sequence[int]], object], what: str
    ) -> list:
        """`read(choice, prompt)` of each prompt's choice, prompts sent in
        chunks, `concurrency` requests at a time; results in input order."""
        chunks = [
            list(range(i, min(i + PROMPTS_PER_REQUEST, len(prompts))))
            for i in range(0, len(prompts), PROMPTS_PER_REQUEST)
        ]

        def send(chunk: list[int]) -> list:
            request = {
                "model": self.served,
                "prompt": [[int(t) for t in prompts[i]] for i in chunk],
                "temperature": 0,
                **body,
            }
            try:
                choices = self.client.post("/completions", request).get("choices")
            except EndpointError as exc:  # after its retries: the server cannot serve this checkpoint
                raise CheckpointError(self.name, f"POST /completions ({what}): {exc}") from None
            if not isinstance(choices, list) or len(choices) != len(chunk):
                raise EndpointError(
                    f"{self.name}: POST /completions ({what}): expected {len(chunk)} choices, "
                    f"got {len(choices) if isinstance(choices, list) else 'none'}"
                )
            ordered = sorted(choices, key=lambda c: c.get("index", 0))
            return [read(choice, prompts[i]) for i, choice in zip(chunk, ordered)]

        with progress.step(f"{self.name}: {what} ({len(prompts)} prompts at {self.client.base_url})"):
            return [out for outs in _run_interruptibly(send, chunks, self.concurrency) for out in outs]

    def _echoed_logprobs(self, sequences: Sequence[Sequence[int]], what: str) -> list[list[float | None]]:
        """log p(x_t | x_<t) of every token of each sequence (None for the first)."""

        def read(choice: dict, prompt: Sequence[int]) -> list[float | None]:
            values = (choice.get("logprobs") or {}).get("token_logprobs")
            if not isinstance(values, list) or len(values) < len(prompt):
                raise EndpointError(
                    f"{self.name}: the server echoed {len(values) if isinstance(values, list) else 0}"
                    f" log-probs for a prompt of {len(prompt)} tokens (it needs echo + logprobs)"
                )
            # The first token has no prediction (null); every later one must be a number.
            bad = next(
                (
                    t
                    for t in range(1, len(prompt))
                    if not isinstance(values[t], (int, float))
                    or isinstance(values[t], bool)
                    or not math.isfinite(values[t])
                ),
                None,
            )
            if bad is not None:
                raise EndpointError(
                    f"{self.name}: the server's logprobs.token_logprobs holds {json.dumps(values[bad])} at "
                    f"position {bad} of a {len(prompt)}-token prompt, where a log-prob is due"
                )
            return values[: len(prompt)]

        return self._completions(sequences, {"max_tokens": 0, "echo": True, "logprobs": 1}, read, what)

    # ------------------------------------------------------------ the interface
    def token_logprobs(
        self,
        sequences: Sequence[Sequence[int]],
        target_starts: Sequence[int],
        *,
        vocab_stats: bool = False,
        masked_ids: Collection[int] = (),
    ) -> list[TokenScores]:
        if vocab_stats:
            raise MissingCapability(
                f"{self.name}: Min-K%++ needs the mean and variance of log p over the whole "
                f"vocabulary at each position; {FULL_DISTRIBUTION}"
            )
        # The last token is attended by no scored position: masking it changes nothing.
        self._refuse_masks([seq[:-1] for seq in sequences], masked_ids)
        for seq, start in zip(sequences, target_starts):
            if not 1 <= start <= len(seq):
                raise ValueError(f"target start {start} outside 1..{len(seq)} (the first token has no prediction)")
        echoed = self._echoed_logprobs(sequences, "scoring")
        return [
            TokenScores(
                token_ids=np.asarray(seq[start:], dtype=np.int64), logprobs=np.asarray(values[start:], dtype=np.float32)
            )
            for seq, start, values in zip(sequences, target_starts, echoed)
        ]

    def generate(
        self,
        prompts: Sequence[str],
        *,
        max_new_tokens: int,
        stop_strings: Sequence[str] = (),
        prefix: str = "",
        masked_ids: Collection[int] = (),
        sampling: Sampling | None = None,
    ) -> list[str]:
        """Greedy replies; the server sees encode_prompt(prefix + prompt), the
        ids the Hugging Face backend runs (a shared prefix is the server's to cache)."""
        if sampling is not None:
            raise MissingCapability(
                f"{self.name}: a completions server draws samples its own way (its seed is "
                f"best effort), so a seeded draw cannot be reproduced; sampled decoding needs "
                f"the weights"
            )
        encoded = self.encode_prompts([prefix + p for p in prompts])
        self._refuse_masks(encoded, masked_ids)
        stops = [s for s in stop_strings if s]
        # The legacy API accepts up to 4 stop strings; the rest are cut here (the reply is the same).
        body = {"max_tokens": max_new_tokens, **({"stop": stops[:4]} if stops else {})}

        def read(choice: dict, _prompt) -> str:
            text = choice.get("text")
            if not isinstance(text, str):
                raise EndpointError(f"{self.name}: a completion choice has no text")
            return cut_at_stop(text, stops)

        return self._completions(encoded, body, read, f"generating up to {max_new_tokens} tokens")

    def _refuse_masks(self, sequences: Sequence[Sequence[int]], masked_ids: Collection[int]) -> None:
        """A server attends to every token it is sent: where a masked id
        occurs, the scores would not be the ones asked for."""
        masked = set(masked_ids)
        if masked and any(masked.intersection(seq) for seq in sequences):
            raise MissingCapability(
                f"{self.name}: OpenUnlearning's convention keeps every pad-id token (pad = EOS) "
                f"out of attention, and a completions server attends to all it is sent"
            )

    def next_token(self, prompts: Sequence[str], columns: Sequence[Sequence[int]] | None = None) -> NextToken:
        """Log-probs of the tokens in `columns[i]` as the first token of the
        reply to prompt i: each (prompt + token) echoed. The entropy and
        argmax over the whole vocabulary are not available here (None)."""
        if columns is None:
            raise MissingCapability(
                f"{self.name}: the next-token entropy needs the full distribution; {FULL_DISTRIBUTION}"
            )
        if len(columns) != len(prompts):
            raise ValueError(f"{len(columns)} column lists for {len(prompts)} prompts")
        encoded = self.encode_prompts(prompts)
        sequences = [ids + [int(c)] for ids, cols in zip(encoded, columns) for c in cols]
        echoed = iter(self._echoed_logprobs(sequences, "scoring answer labels"))
        logprobs = [np.asarray([next(echoed)[-1] for _ in cols], dtype=np.float32) for cols in columns]
        return NextToken(logprobs=logprobs, entropy=None, argmax=None)
