"""The endpoint backend's own overhead: requests, JSON and threads, with the
model's time taken out. A server on 127.0.0.1 answers every echoed-log-prob
request at once with a reply of the real shape (one log-prob per prompt
token), so the time measured is the client's: building requests, sending
them over HTTP, reading and checking the replies.

    python benchmarks/endpoint_bench.py [--prompts 2048] [--tokens 128] [--concurrency 8] [--repeats 3]

Prints prompts per second for teacher-forced scoring (`token_logprobs`),
the best of the repeats. Run it on two checkouts to compare clients.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from unlearnbench.backends import LoadSettings, backend_for


class InstantServer:
    """Lists one model; echoes each prompt's tokens with log-prob -1.0 (null
    first), over kept-alive HTTP/1.1 connections without Nagle's delay, as
    vLLM's server answers."""

    def __init__(self):
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as vLLM serves

            def setup(self):
                super().setup()
                # As uvicorn (vLLM's server) does: no Nagle delay on replies.
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def log_message(self, *_args):
                pass

            def _reply(self, payload: dict) -> None:
                body = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):  # noqa: N802 - http.server's name
                self._reply({"data": [{"id": "bench", "root": "/bench"}]})

            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                self._reply({"choices": [
                    {"index": i, "text": "", "logprobs": {"token_logprobs": [None] + [-1.0] * (len(p) - 1)}}
                    for i, p in enumerate(body["prompt"])]})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.source = f"openai:http://127.0.0.1:{self.httpd.server_address[1]}/v1#bench"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=2048)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    os.environ.pop("OPENAI_API_KEY", None)
    server = InstantServer()
    try:
        model = backend_for(server.source).load_model(
            server.source, name="bench", settings=LoadSettings(device="cpu", concurrency=args.concurrency))
        sequences = [[(7 * i + t) % 1000 + 1 for t in range(args.tokens)] for i in range(args.prompts)]
        best = float("inf")
        for _ in range(args.repeats):
            started = time.perf_counter()
            scores = model.token_logprobs(sequences, [1] * len(sequences))
            best = min(best, time.perf_counter() - started)
        assert len(scores) == args.prompts and float(scores[0].logprobs.sum()) == -(args.tokens - 1)
        print(f"token_logprobs: {args.prompts} prompts x {args.tokens} tokens, concurrency {args.concurrency}: "
              f"{best:.2f} s, {args.prompts / best:.0f} prompts/s (best of {args.repeats})")
    finally:
        server.close()


if __name__ == "__main__":
    main()
