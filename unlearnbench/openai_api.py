"""The one client for OpenAI-compatible HTTP servers (vLLM, llama.cpp server,
TGI, ...), shared by the `openai:` judge and the `openai:` model backend:
JSON POST and GET over httpx (pooled connections), a timeout per request,
bounded retries with exponential backoff on 429, 5xx, connection errors and
timeouts (a 4xx other than 429 will not go away and is not retried), and a
bound on the reply's size.

Where the API key (OPENAI_API_KEY) may go:
- only to https URLs or to this machine (loopback), checked on the URL given;
- never along a redirect to another origin (scheme, host, port): such a
  redirect is refused, not followed, so neither the key nor the prompts reach
  the other host. A redirect on the same origin is followed;
- never through a proxy for a loopback URL: the proxy variables
  (http_proxy, all_proxy, ...) apply to remote hosts only, where an https
  request goes through the proxy as an end-to-end TLS tunnel.
Certificates are verified against SSL_CERT_FILE / SSL_CERT_DIR when set, else
certifi's bundle.

Every wait (a request, a backoff) ends early on Ctrl-C or the checkpoint's
deadline (cancel.py).
"""

from __future__ import annotations

import ipaddress
import json
import os
import socket
import ssl
from urllib.parse import urlsplit

from unlearnbench import cancel
from unlearnbench.errors import UnlearnbenchError

API_KEY_VARIABLE = "OPENAI_API_KEY"
MAX_REDIRECTS = 5


class EndpointError(UnlearnbenchError):
    """A request that failed for good (after its retries), or a reply that is not what the API documents."""


def is_loopback(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def safe_for_secrets(url: str) -> bool:
    """https, or plain http to this machine (a local server): where an API key may go."""
    return urlsplit(url).scheme == "https" or is_loopback(url)


def _origin(url) -> tuple[str, str, int | None]:
    parts = urlsplit(str(url))
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    return parts.scheme, (parts.hostname or "").lower(), port


def _tls_context() -> ssl.SSLContext:
    cafile, capath = os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")
    if not (cafile or capath):
        import certifi

        cafile = certifi.where()
    return ssl.create_default_context(cafile=cafile, capath=capath)


class OpenAIClient:
    def __init__(
        self,
        base_url: str,
        *,
        what: str,
        timeout: float = 30.0,
        retries: int = 3,
        backoff: float = 0.5,
        max_reply_bytes: int = 1 << 20,
    ):
        """`what` names the option the URL came from, for messages (e.g. "--judge openai:URL")."""
        import httpx

        self.base_url = base_url.rstrip("/")
        self.timeout, self.retries, self.backoff, self.max_reply_bytes = timeout, retries, backoff, max_reply_bytes
        self.api_key = os.environ.get(API_KEY_VARIABLE)
        if self.api_key and not safe_for_secrets(self.base_url):
            raise UnlearnbenchError(
                f"{what}: {API_KEY_VARIABLE} is set, and it is sent only over https or to a loopback address "
                "(127.0.0.1, ::1, localhost); use an https URL or unset the key"
            )
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        # trust_env=False for loopback: no proxy variable may route a request to
        # this machine (and its key) elsewhere. Certificates come from
        # _tls_context either way, so SSL_CERT_FILE still applies.
        # TCP_NODELAY: a request's headers and body go out as separate writes,
        # and without it the body waits for the server's delayed ACK (~40 ms a
        # request on a kept-alive connection).
        transport = httpx.HTTPTransport(
            verify=_tls_context() if urlsplit(self.base_url).scheme == "https" else True,
            limits=httpx.Limits(max_connections=64, max_keepalive_connections=16),
            socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)],
        )
        self._http = httpx.Client(
            headers=headers, follow_redirects=False, trust_env=not is_loopback(self.base_url), transport=transport
        )

    def post(self, path: str, body: dict) -> dict:
        return self._request("POST", path, json.dumps(body).encode())

    def get(self, path: str) -> dict:
        return self._request("GET", path, None)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> OpenAIClient:
        return self

    def __exit__(self, *_exc) -> None:
        self.close()

    def _request(self, method: str, path: str, data: bytes | None) -> dict:
        import httpx

        error = ""
        for attempt in range(self.retries):
            if attempt:
                cancel.sleep(self.backoff * 2 ** (attempt - 1))
            cancel.check()
            left = cancel.remaining()
            timeout = self.timeout if left is None else max(0.1, min(self.timeout, left))
            try:
                status, reply, message = self._send(method, self.base_url + path, data, timeout)
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                cancel.check()  # a timeout cut short by the deadline says so
                error = f"{type(exc).__name__}: {exc or 'no answer'}"
                if isinstance(exc, httpx.TimeoutException):
                    error = f"timed out after {timeout:.3g} s ({type(exc).__name__})"
                continue
            if status >= 400:
                error = f"HTTP {status}" + message
                if status < 500 and status != 429:
                    break  # a client error will not go away on retry
                continue
            try:
                return json.loads(reply.decode())
            except (json.JSONDecodeError, UnicodeDecodeError):
                raise EndpointError("malformed response (not JSON)") from None
        raise EndpointError(f"failed after {self.retries} attempts: {error}")

    def _send(self, method: str, url: str, data: bytes | None, timeout: float) -> tuple[int, bytes, str]:
        """(status, body, the server's error message) of one request,
        following same-origin redirects only."""
        request = self._http.build_request(method, url, content=data, timeout=timeout)
        for _ in range(MAX_REDIRECTS + 1):
            response = self._http.send(request, stream=True)
            try:
                if response.is_redirect:
                    request = self._redirected(request, response)
                    continue
                body = self._read(response)
            finally:
                response.close()
            return response.status_code, body, _server_message(body) if response.status_code >= 400 else ""
        raise EndpointError(f"{method} {url}: more than {MAX_REDIRECTS} redirects")

    def _redirected(self, request, response):
        """The request a same-origin redirect asks for; any other is refused
        (the key, and the prompts, would go to a host nobody named)."""
        target = response.next_request
        if target is None:
            raise EndpointError(f"{request.method} {request.url}: HTTP {response.status_code} without a Location")
        if _origin(target.url) != _origin(request.url):
            raise EndpointError(
                f"{request.method} {request.url}: the server answered HTTP {response.status_code}, a redirect to "
                f"{target.url}, another origin: not followed (the API key and the prompts go only to the URL "
                "given); use the final URL"
            )
        return target

    def _read(self, response) -> bytes:
        chunks, size = [], 0
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > self.max_reply_bytes:
                raise EndpointError(f"reply larger than {self.max_reply_bytes} bytes: not read further")
            chunks.append(chunk)
        return b"".join(chunks)


def _server_message(body: bytes) -> str:
    """The server's own error message, when it sends one (OpenAI's {"error": {"message": ...}})."""
    try:
        payload = json.loads(body[: 1 << 16].decode())
        message = payload["error"]["message"] if isinstance(payload.get("error"), dict) else payload.get("error")
    except Exception:  # noqa: BLE001 - no readable body: the status says it
        return ""
    return f" ({str(message)[:200]})" if message else ""
