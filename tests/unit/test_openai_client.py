"""Where the API key goes, and how long a request may hold a run: the one
HTTP client behind the `openai:` model backend and the `openai:` judge,
against stub servers on 127.0.0.1 started here (no model needed)."""

from __future__ import annotations

import ssl
import subprocess
import threading
import time

import pytest
from openai_server import StubServer, reply_json

from unlearnbench.openai_api import EndpointError, OpenAIClient

KEY = "sk-never-leaves"


def _models(handler, _body) -> None:
    reply_json(handler, 200, {"data": [{"id": "m"}]})


def _redirect(location: str, status: int = 302):
    def respond(handler, _body):
        reply_json(handler, status, {}, {"Location": location + handler.path})
    return respond


@pytest.fixture
def servers():
    started: list[StubServer] = []

    def start(respond=_models, **kwargs) -> StubServer:
        started.append(StubServer(respond, **kwargs))
        return started[-1]

    yield start
    for server in started:
        server.close()


@pytest.fixture
def no_proxy_variables(monkeypatch):
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_a_redirect_to_another_origin_never_carries_the_key(servers, no_proxy_variables, status):
    elsewhere = servers()
    redirecting = servers(_redirect(elsewhere.origin, status))
    client = OpenAIClient(redirecting.origin + "/v1", what="--model openai:test", retries=1)
    with pytest.raises(EndpointError, match=f"redirect.*{elsewhere.port}"):
        client.get("/models")
    with pytest.raises(EndpointError, match=f"redirect.*{elsewhere.port}"):
        client.post("/completions", {"prompt": [1, 2]})
    assert [r["authorization"] for r in redirecting.requests] == [f"Bearer {KEY}"] * 2
    assert elsewhere.requests == []  # not followed at all: nothing, key or body, reaches the other origin


def test_a_redirect_on_the_same_origin_is_followed_with_the_key(servers, no_proxy_variables):
    def respond(handler, _body):
        if handler.path.startswith("/old"):
            return reply_json(handler, 307, {}, {"Location": handler.path.replace("/old", "/v1", 1)})
        reply_json(handler, 200, {"object": "list", "data": [{"id": "m"}]})

    server = servers(respond)
    client = OpenAIClient(server.origin + "/old", what="--model openai:test", retries=1)
    assert client.post("/completions", {"prompt": [1]})["data"][0]["id"] == "m"
    assert [(r["method"], r["path"], r["authorization"]) for r in server.requests] == [
        ("POST", "/old/completions", f"Bearer {KEY}"), ("POST", "/v1/completions", f"Bearer {KEY}")]
    assert server.requests[1]["body"] == b'{"prompt": [1]}'


@pytest.mark.parametrize("variable", ["http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"])
def test_a_proxy_variable_never_sees_a_loopback_request(servers, no_proxy_variables, monkeypatch, variable):
    proxy = servers(lambda handler, _body: reply_json(handler, 200, {"data": [{"id": "from-the-proxy"}]}))
    target = servers()
    monkeypatch.setenv(variable, proxy.origin)
    for host in ("127.0.0.1", "localhost"):
        client = OpenAIClient(f"http://{host}:{target.port}/v1", what="--model openai:test", retries=1)
        assert client.get("/models")["data"][0]["id"] == "m"
    assert proxy.requests == []
    assert [r["authorization"] for r in target.requests] == [f"Bearer {KEY}"] * 2


@pytest.fixture(scope="module")
def self_signed(tmp_path_factory):
    """A certificate for 127.0.0.1 made here with openssl, and a server context for it."""
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return cert, context


def test_https_carries_the_key_and_verifies_the_certificate(servers, no_proxy_variables, monkeypatch, self_signed):
    cert, context = self_signed
    server = servers(tls=context)
    with pytest.raises(EndpointError, match="CERTIFICATE_VERIFY_FAILED|certificate"):
        OpenAIClient(server.origin + "/v1", what="--model openai:test", retries=1).get("/models")
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # the user's way to trust their own CA
    assert OpenAIClient(server.origin + "/v1", what="--model openai:test", retries=1).get("/models")["data"]
    assert server.requests[-1]["authorization"] == f"Bearer {KEY}"


def test_a_server_that_never_answers_gives_up_after_the_timeout(servers, no_proxy_variables):
    answered = threading.Event()
    server = servers(lambda handler, _body: answered.wait(60))
    client = OpenAIClient(server.origin + "/v1", what="--model openai:test", timeout=1.0, retries=2, backoff=0.1)
    started = time.monotonic()
    with pytest.raises(EndpointError, match="(?i)timed? ?out"):
        client.post("/completions", {"prompt": [1]})
    assert time.monotonic() - started < 10
    assert len(server.requests) == 2
    answered.set()


def test_a_reply_larger_than_the_bound_is_not_read(servers, no_proxy_variables):
    server = servers(lambda handler, _body: reply_json(handler, 200, {"text": "x" * 5000}))
    client = OpenAIClient(server.origin + "/v1", what="--model openai:test", retries=1, max_reply_bytes=1000)
    with pytest.raises(EndpointError, match="larger than 1000 bytes"):
        client.get("/models")
