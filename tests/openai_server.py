"""A small OpenAI-compatible server for tests, on 127.0.0.1.

It answers GET /v1/models and POST /v1/completions with the documented
legacy-completions fields only (prompt as text, token ids or a list of
either; max_tokens, temperature 0, stop, echo, logprobs), like a vLLM
server would. Its answers come from a Hugging Face model driven through
transformers directly (`model.generate` for greedy replies, forward
passes with vLLM-style prefix caching for echoed prompts), not through
unlearnbench's backend: what the endpoint backend computes is checked
against an independent path.

`fail_next(status, n)` makes the next n requests answer with an HTTP error
(retries), `calls` records every request body and its Authorization header.
"""

from __future__ import annotations

import inspect
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import torch


class CompletionsServer:
    def __init__(self, model_dir, served_name: str, *, root: str | None = None):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
        self.model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).eval()
        self.served_name, self.root = served_name, root or str(model_dir)
        self._cache_argument = "cache" if "cache" in inspect.signature(self.model.forward).parameters \
            else "past_key_values"
        self.calls: list[dict] = []
        self._failures: list[int] = []
        self._lock = threading.Lock()  # one forward pass at a time; requests arrive concurrently
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args):
                pass

            def _reply(self, status: int, payload: dict) -> None:
                body = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):  # noqa: N802 - http.server's name
                if self.path.rstrip("/") != "/v1/models":
                    return self._reply(404, {"error": {"message": f"no route {self.path}"}})
                self._reply(200, {"object": "list", "data": [{"id": server.served_name, "object": "model",
                                                              "root": server.root, "owned_by": "tests"}]})

            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.calls.append({"body": body, "authorization": self.headers.get("Authorization")})
                with server._lock:
                    failure = server._failures.pop(0) if server._failures else None
                if failure is not None:
                    return self._reply(failure, {"error": {"message": f"injected {failure}"}})
                if self.path.rstrip("/") != "/v1/completions":
                    return self._reply(404, {"error": {"message": f"no route {self.path}"}})
                try:
                    choices = server.complete(body)
                except ValueError as exc:
                    return self._reply(400, {"error": {"message": str(exc)}})
                self._reply(200, {"object": "text_completion", "model": server.served_name, "choices": choices})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()

    def fail_next(self, status: int, n: int = 1) -> None:
        self._failures += [status] * n

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    # ------------------------------------------------------------ completions
    def _prompts(self, prompt) -> list[list[int]]:
        if isinstance(prompt, str) or (isinstance(prompt, list) and prompt and isinstance(prompt[0], int)):
            prompt = [prompt]
        out = []
        for p in prompt:
            # Text is tokenized as servers do, with the tokenizer's special tokens.
            out.append(self.tokenizer(p)["input_ids"] if isinstance(p, str) else [int(t) for t in p])
        return out

    def complete(self, body: dict) -> list[dict]:
        if body.get("model") != self.served_name:
            raise ValueError(f"model {body.get('model')!r} is not served here")
        if body.get("temperature", 1) != 0:
            raise ValueError("this server only decodes greedily (temperature 0)")
        max_tokens = int(body.get("max_tokens", 16))
        stops = body.get("stop") or []
        stops = [stops] if isinstance(stops, str) else list(stops)
        prompts = self._prompts(body["prompt"])
        if max_tokens == 0:
            if not body.get("echo"):
                raise ValueError("max_tokens 0 needs echo")
            with self._lock, torch.inference_mode():
                echoed = self._echo(prompts, body.get("logprobs"))
            return [{"index": index, "text": self.tokenizer.decode(ids), "finish_reason": "length", "logprobs": logprobs}
                    for index, (ids, logprobs) in enumerate(zip(prompts, echoed))]
        choices = []
        for index, ids in enumerate(prompts):
            with self._lock, torch.inference_mode():
                text = self._greedy(ids, max_tokens, stops)
            cut = min((i for i in (text.find(s) for s in stops) if i >= 0), default=-1)
            choices.append({"index": index, "text": text if cut < 0 else text[:cut], "logprobs": None,
                            "finish_reason": "stop" if cut >= 0 else "length"})
        return choices

    def _echo(self, prompts: list[list[int]], top: int | None) -> list[dict]:
        """The prompts' log-probs, with prefix caching as vLLM does it: prompts
        that share most of their tokens with the one before them (one question
        with each answer label) run their shared prefix once and only their
        own tail on its KV cache; tails of one length run as one batch, as
        vLLM batches the requests it holds."""
        out = []
        for group in _prefix_groups(prompts):
            shared = min(min(len(ids) for ids in group) - 1, _common_prefix_length(group))
            head = self.model(input_ids=torch.tensor([group[0][:shared]]), use_cache=True) if shared else None
            # transformers 5 renamed the KV-cache argument and its output field alike
            cache = None if head is None else getattr(head, self._cache_argument)
            tails = [ids[shared:] for ids in group]
            if cache is not None and len({len(t) for t in tails}) == 1:
                cache.batch_repeat_interleave(len(group))
                tail_logits = list(self.model(input_ids=torch.tensor(tails), use_cache=True,
                                              **{self._cache_argument: cache}).logits)
            else:
                tail_logits = []
                for tail in tails:
                    tail_logits.append(self.model(input_ids=torch.tensor([tail]), use_cache=True,
                                                  **{self._cache_argument: cache}).logits[0])
                    if cache is not None:
                        cache.crop(-len(tail))  # drop this tail again
            head_logp = [] if head is None else [torch.log_softmax(head.logits[0].float(), dim=-1)]
            for ids, logits in zip(group, tail_logits):
                logp = torch.cat([*head_logp, torch.log_softmax(logits.float(), dim=-1)])
                out.append(self._logprobs(ids, logp, top))
        return out

    def _logprobs(self, ids: list[int], logp: torch.Tensor, top: int | None) -> dict:
        chosen = logp[torch.arange(len(ids) - 1), torch.tensor(ids[1:], dtype=torch.long)].tolist()
        top_lists = None
        if top:
            values, indices = logp[: len(ids) - 1].topk(int(top), dim=-1)
            top_lists = [None] + [dict(zip(self.tokenizer.convert_ids_to_tokens(i), v))
                                  for v, i in zip(values.tolist(), indices.tolist())]
        return {"tokens": self.tokenizer.convert_ids_to_tokens(ids), "token_logprobs": [None, *chosen],
                "top_logprobs": top_lists, "text_offset": [0] * len(ids)}

    def _greedy(self, ids: list[int], max_tokens: int, stops: list[str]) -> str:
        """Greedy decoding that ends at EOS or, as servers do, once a stop string appears."""
        out = self.model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                  max_new_tokens=max_tokens, do_sample=False,
                                  pad_token_id=self.tokenizer.pad_token_id or self.tokenizer.eos_token_id,
                                  **({"stop_strings": stops, "tokenizer": self.tokenizer} if stops else {}))
        return self.tokenizer.decode(out[0, len(ids):], skip_special_tokens=True)


def _common_prefix_length(prompts: list[list[int]]) -> int:
    length = 0
    while all(len(ids) > length and ids[length] == prompts[0][length] for ids in prompts):
        length += 1
    return length


def _prefix_groups(prompts: list[list[int]]) -> list[list[list[int]]]:
    """Runs of consecutive prompts that share at least half their tokens with the run's first."""
    groups: list[list[list[int]]] = []
    for ids in prompts:
        if groups and 2 * _common_prefix_length([groups[-1][0], ids]) >= len(ids):
            groups[-1].append(ids)
        else:
            groups.append([ids])
    return groups


class StubServer:
    """A loopback HTTP server for tests that need no model: it records every
    request (method, path, Authorization header, body) and answers through
    `respond(handler, body)`; with `tls`, over https."""

    def __init__(self, respond, *, tls=None):
        self.requests: list[dict] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args):
                pass

            def _handle(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                stub.requests.append({"method": self.command, "path": self.path,
                                      "authorization": self.headers.get("Authorization"), "body": body})
                respond(self, body)

            do_GET = do_POST = _handle  # noqa: N815 - http.server's names

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        if tls is not None:
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.origin = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def reply_json(handler, status: int, payload: dict, headers: dict | None = None) -> None:
    body = json.dumps(payload).encode()
    handler.send_response(status)
    for name, value in {"Content-Type": "application/json", "Content-Length": str(len(body)),
                        **(headers or {})}.items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(body)
