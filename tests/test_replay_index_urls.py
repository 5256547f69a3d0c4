"""The replay index keeps each recorded URL normalised by its text (``HttpReplayIndex.normalised``), so a live
call whose redacted URL is a recorded one is not normalised again: the kept form must be
``normalise_url``'s, whatever the URL, and a URL the index does not hold is normalised as before."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from pytest_agentreplay.core.constants import HTTP_REQUEST_MEDIA_TYPE
from pytest_agentreplay.core.events import Event, PayloadRef
from pytest_agentreplay.http.exchange import normalise_url
from pytest_agentreplay.replay.http import HttpReplayIndex

URLS = [
    "http://127.0.0.1:38063/items/7?page=0",
    "HTTP://Example.COM:80/a/b?y=2&x=1#frag",
    "https://host:443/?b&&a",
    "https://host/a?b=http://evil/c",
    "http://host",
    "",
]


class _Recorded:
    def __init__(self, urls: list[str]) -> None:
        self.run = None
        request: dict[str, object] = {"method": "GET", "headers": {}, "body": None}
        stamp = {"run_id": "r", "ts": "2025-01-01T00:00:00.000000Z", "type": "http", "actor": "tool"}
        self.events = [
            Event.model_validate(
                {
                    **stamp,
                    "seq": seq,
                    "class": "input",
                    "input_ref": {"inline": {**request, "url": url}, "media_type": HTTP_REQUEST_MEDIA_TYPE},
                }
            )
            for seq, url in enumerate(urls)
        ]

    def payload(self, ref: PayloadRef | None) -> Any:
        return None if ref is None else ref.inline


def _index(urls: list[str]) -> HttpReplayIndex:
    settings: Any = SimpleNamespace(idempotency_header="idempotency-key", allow_read_repeats=True)
    return HttpReplayIndex(_Recorded(urls), settings)  # type: ignore[arg-type]


def test_each_recorded_url_is_kept_as_normalise_url_writes_it() -> None:
    index = _index(URLS)
    assert index.normalised == {url: normalise_url(url) for url in URLS}
    assert {key[1] for key in index.reads.heads if isinstance(key, tuple)} == {
        normalise_url(url) for url in URLS
    }


@given(st.lists(st.text(alphabet="hHtTpPsS:/?#&=.aAbB12[]@%", max_size=40), max_size=6))
def test_the_kept_form_is_the_slow_paths_for_any_url(urls: list[str]) -> None:
    index = _index(urls)
    for url in urls:
        assert index.normalised[url] == normalise_url(url)
