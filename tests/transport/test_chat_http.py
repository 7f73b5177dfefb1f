"""OpenAI-compatible chat completions over httpx (``transport.chat_http``): which answers
are retried, how long a retry waits, and which servers skip the CA bundle."""

from __future__ import annotations

import random
import ssl
import time
from email.utils import formatdate

import httpx

from tests.fakes.asgi import clear_proxies
from transport.chat_http import _tls, retry_delay, should_retry


def _answer(status: int, **headers: str) -> httpx.Response:
    return httpx.Response(status, headers=headers)


def test_which_answers_are_retried() -> None:
    assert all(should_retry(_answer(s)) for s in (408, 409, 429, 500, 502, 503))
    assert not any(should_retry(_answer(s)) for s in (400, 401, 403, 404, 422))
    assert not should_retry(_answer(503, **{"x-should-retry": "false"}))
    assert should_retry(_answer(400, **{"x-should-retry": "true"}))
    assert not should_retry(_answer(429, **{"retry-after": "300"}))  # over two minutes: give up


def test_the_wait_before_a_retry() -> None:
    rng = random.Random(0)
    assert retry_delay(0, httpx.Headers({"retry-after": "3"}), rng) == 3.0
    assert retry_delay(0, httpx.Headers({"retry-after-ms": "1500"}), rng) == 1.5
    date = formatdate(time.time() + 30, usegmt=True)
    assert 25 < retry_delay(0, httpx.Headers({"retry-after": date}), rng) <= 30
    for tries, base in ((0, 0.5), (1, 1.0), (3, 4.0), (9, 8.0)):  # backoff, capped at 8 s
        waits = [retry_delay(tries, httpx.Headers(), rng) for _ in range(50)]
        assert all(0.75 * base <= w <= base for w in waits) and len(set(waits)) > 1
    assert retry_delay(1, httpx.Headers({"retry-after": "500"}), rng) <= 1.0  # not sane: backoff


def test_only_a_local_plain_http_server_skips_the_ca_bundle(monkeypatch) -> None:
    clear_proxies(monkeypatch)
    local = _tls("http://127.0.0.1:8013/v1/chat/completions")
    assert isinstance(local, ssl.SSLContext) and local.verify_mode == ssl.CERT_REQUIRED
    assert local.cert_store_stats()["x509_ca"] == 0
    assert _tls("https://127.0.0.1:8013/v1/chat/completions") is True
    assert _tls("http://models.example.com/v1/chat/completions") is True
    monkeypatch.setenv("ALL_PROXY", "https://proxy.example.com:3128")  # its TLS needs the bundle
    assert _tls("http://127.0.0.1:8013/v1/chat/completions") is True
