"""A request's stored payload is built in one pass: the same as redacting, dropping the framing headers and
sorting one after the other."""

from __future__ import annotations

import random

from pytest_agentreplay.core.constants import REDACTED
from pytest_agentreplay.http import multipart
from pytest_agentreplay.http.exchange import SECRET_HEADERS, HttpRequest, StoredHeaders, redact_headers

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


def _body_for(rng: random.Random, headers: dict[str, str], multipart_share: float) -> bytes:
    """A body of the request's content type, made multipart (that share of the time) or JSON; none without
    one. A body is sent as is: its request has no content coding."""
    content = b""
    if "content-type" in headers and rng.random() < multipart_share:
        headers["content-type"] = "multipart/form-data; boundary=b1"
        content = b'--b1\r\nContent-Disposition: form-data; name="f"\r\n\r\nv\r\n--b1--\r\n'
    elif "content-type" in headers:
        headers["content-type"] = "application/json"
        content = b'{"a": 1}'
    if content:
        headers.pop("content-encoding", None)
    return content


def test_to_payload_equals_the_steps_one_after_the_other() -> None:
    rng = random.Random(7)
    for _ in range(300):
        names = rng.sample(NAMES, rng.randrange(len(NAMES) + 1))
        headers = {name: f"value {rng.randrange(9)}" for name in names}
        content = _body_for(rng, headers, 0.5)
        request = HttpRequest("POST", "https://example.test/x?b=1", headers, content)
        payload = request.to_payload()
        assert payload == slow_payload(request)
        assert list(payload["headers"]) == sorted(payload["headers"])
        assert all(payload["headers"][k] == REDACTED for k in SECRET_HEADERS & set(headers))


def test_a_run_s_stored_headers_give_the_payload_of_the_steps_one_after_the_other() -> None:
    """A run's stored headers (filled by its earlier requests, to the same host or another, with the same
    headers in any order or others) give each request the payload the steps give, in headers of its own: a
    payload's holder changing them changes neither a payload handed out before nor one to come."""
    rng = random.Random(13)
    known = StoredHeaders()
    given: list[tuple[dict[str, object], dict[str, str]]] = []
    for _ in range(400):
        names = rng.sample(NAMES[:6], rng.randrange(7)) if rng.random() < 0.3 else NAMES[4:8]
        headers = {name: f"value {rng.randrange(2)}" for name in names}
        if "content-length" in headers:
            headers["content-length"] = str(rng.randrange(1000))  # new on every request: never stored
        content = _body_for(rng, headers, 0.3)
        order = list(headers)
        rng.shuffle(order)
        headers = {name: headers[name] for name in order}
        host = rng.choice(["a.test", "b.test"])
        method = rng.choice(["POST", "GET"])
        request = HttpRequest(method, f"https://{host}/x", headers, content)
        payload = request.to_payload(known)
        assert payload == slow_payload(request)
        assert list(payload["headers"]) == sorted(payload["headers"])
        held = payload["headers"]
        assert isinstance(held, dict)
        held["x-changed-by-its-holder"] = "1"  # its holder may change it: no other payload sees that
        given.append((payload, dict(held)))
    assert all(payload["headers"] == copy for payload, copy in given)
    assert len({id(payload["headers"]) for payload, _ in given}) == len(given)


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
