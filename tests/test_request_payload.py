"""A request's stored payload is built in one pass: the same as redacting, dropping the framing headers and
sorting one after the other."""

from __future__ import annotations

import random

from pytest_agentreplay.core.constants import REDACTED
from pytest_agentreplay.http import multipart
from pytest_agentreplay.http.exchange import SECRET_HEADERS, HttpRequest, redact_headers

NAMES = [
    "authorization",
    "x-api-key",
    "content-encoding",
    "content-length",
    "content-type",
    "accept",
    "user-agent",
    "x-stainless-os",
    "cookie",
    "a",
    "z",
]


def slow_payload(request: HttpRequest) -> dict[str, object]:
    """What ``to_payload`` was: each step over the whole headers in turn."""
    headers = redact_headers(request.headers)
    headers.pop("content-encoding", None)
    headers.pop("content-length", None)
    body = request.stored_body()
    if body is not None and "multipart" in body and "content-type" in headers:
        headers["content-type"] = multipart.without_boundary(headers["content-type"])
    return {
        "body": body,
        "headers": dict(sorted(headers.items())),
        "method": request.method,
        "url": request.url,
    }


def test_to_payload_equals_the_steps_one_after_the_other() -> None:
    rng = random.Random(7)
    body = b'--b1\r\nContent-Disposition: form-data; name="f"\r\n\r\nv\r\n--b1--\r\n'
    for _ in range(300):
        names = rng.sample(NAMES, rng.randrange(len(NAMES) + 1))
        headers = {name: f"value {rng.randrange(9)}" for name in names}
        content = b""
        if "content-type" in headers and rng.random() < 0.5:
            headers["content-type"] = "multipart/form-data; boundary=b1"
            content = body
        elif "content-type" in headers:
            headers["content-type"] = "application/json"
            content = b'{"a": 1}'
        if content:
            headers.pop("content-encoding", None)  # the body is not coded
        request = HttpRequest("POST", "https://example.test/x?b=1", headers, content)
        payload = request.to_payload()
        assert payload == slow_payload(request)
        assert list(payload["headers"]) == sorted(payload["headers"])
        assert all(payload["headers"][k] == REDACTED for k in SECRET_HEADERS & set(headers))


def test_redacted_headers_are_a_pass_over_every_header_in_order() -> None:
    """``redact_headers`` changes only the names that are secret or left out (set operations): the headers
    it gives, in order, are those of a pass over every one, whatever the order, ``without`` and sorting."""
    rng = random.Random(11)
    withouts = [frozenset(), frozenset({"content-length", "content-encoding"}), frozenset({"cookie", "a"})]
    for _ in range(300):
        names = rng.sample(NAMES, rng.randrange(len(NAMES) + 1))
        headers = {name: f"value {rng.randrange(9)}" for name in names}
        without = rng.choice(withouts)
        ordered = rng.random() < 0.5
        items = sorted(headers.items()) if ordered else headers.items()
        walked = {k: (REDACTED if k in SECRET_HEADERS else v) for k, v in items if k not in without}
        found = redact_headers(headers, without=without, ordered=ordered)
        assert list(found.items()) == list(walked.items())
        assert found is not headers
