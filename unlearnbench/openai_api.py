"""A small client for OpenAI-compatible HTTP servers (vLLM, llama.cpp
server, TGI, ...), shared by the `openai:` judge and the `openai:` model
backend: JSON POST and GET with a timeout, bounded retries with exponential
backoff on 429, 5xx and connection errors (a 4xx other than 429 will not go
away and is not retried), a bound on the reply's size, and the API key from
OPENAI_API_KEY sent only over https or to this machine.
"""

from __future__ import annotations

import ipaddress
import json
import os
import time
import urllib.error
import urllib.request
from urllib.parse import urlsplit

from unlearnbench.errors import UnlearnbenchError

API_KEY_VARIABLE = "OPENAI_API_KEY"


class EndpointError(UnlearnbenchError):
    """A request that failed for good (after its retries), or a reply that is not what the API documents."""


def safe_for_secrets(url: str) -> bool:
    """https, or plain http to this machine (a local server): where an API key may go."""
    parts = urlsplit(url)
    if parts.scheme == "https":
        return True
    host = parts.hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class OpenAIClient:
    def __init__(self, base_url: str, *, what: str, timeout: float = 30.0, retries: int = 3, backoff: float = 0.5,
                 max_reply_bytes: int = 1 << 20):
        """`what` names the option the URL came from, for messages (e.g. "--judge openai:URL")."""
        self.base_url = base_url.rstrip("/")
        self.timeout, self.retries, self.backoff, self.max_reply_bytes = timeout, retries, backoff, max_reply_bytes
        self.api_key = os.environ.get(API_KEY_VARIABLE)
        if self.api_key and not safe_for_secrets(self.base_url):
            raise UnlearnbenchError(
                f"{what}: {API_KEY_VARIABLE} is set, and it is sent only over https or to a loopback address "
                "(127.0.0.1, ::1, localhost); use an https URL or unset the key")

    def post(self, path: str, body: dict) -> dict:
        return self._request(path, json.dumps(body).encode())

    def get(self, path: str) -> dict:
        return self._request(path, None)

    def _request(self, path: str, data: bytes | None) -> dict:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        url = self.base_url + path
        error = ""
        for attempt in range(self.retries):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            try:
                request = urllib.request.Request(url, data=data, headers=headers, method="POST" if data else "GET")
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    reply = response.read(self.max_reply_bytes + 1)
            except urllib.error.HTTPError as exc:
                error = f"HTTP {exc.code}" + _server_message(exc)
                if exc.code < 500 and exc.code != 429:
                    break  # a client error will not go away on retry
                continue
            except (urllib.error.URLError, TimeoutError, OSError) as exc:
                error = f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"
                continue
            if len(reply) > self.max_reply_bytes:
                raise EndpointError(f"reply larger than {self.max_reply_bytes} bytes: not read further")
            try:
                return json.loads(reply.decode())
            except (json.JSONDecodeError, UnicodeDecodeError):
                raise EndpointError("malformed response (not JSON)") from None
        raise EndpointError(f"failed after {self.retries} attempts: {error}")


def _server_message(exc: urllib.error.HTTPError) -> str:
    """The server's own error message, when it sends one (OpenAI's {"error": {"message": ...}})."""
    try:
        payload = json.loads(exc.read(1 << 16).decode())
        message = payload["error"]["message"] if isinstance(payload.get("error"), dict) else payload.get("error")
    except Exception:  # noqa: BLE001 - no readable body: the status says it
        return ""
    return f" ({str(message)[:200]})" if message else ""
