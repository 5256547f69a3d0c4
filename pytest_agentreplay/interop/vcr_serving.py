"""Replay of a vcr-marked test from its pytest-recording cassettes, read in place (the vcrpy source of
``replay/foreign.py``). An unmatched request is refused; one vcrpy ignores (``ignore_hosts``,
``ignore_localhost``) is sent unrecorded. The recorded side is the played interactions, labelled
``source: vcr`` so the lenient rules of imported recordings apply.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from ..cassette.blobs import BlobStore, default_blob_dir
from ..cassette.read import LoadedCassette
from ..core.capture import RunContext
from ..core.documents import Document
from ..core.events import Event, PayloadRef, RunMeta, event_to_dict
from ..core.run_state import RunRedactor
from ..exceptions import UnmatchedRequestError
from ..http.classify import Classification
from ..http.exchange import HttpRequest
from ..http.recording import LiveCapture, emit_exchange
from ..http.unmatched import unmatched_refusal
from ..replay.policy import Action, Refuse, Send, Serve
from .vcr_compat import VcrCassettePaths, VcrReplay, agentreplay_record_mode, allowed_hosts
from .vcr_format import VcrInteraction, interactions_to_events, vcrpy_run

CONVERTED_LABEL: Final = "vcr-converted"


@dataclass
class VcrServing:
    """The run's vcrpy replay and what it played: (interaction index, live URL), in play order."""

    replay: VcrReplay
    played: list[tuple[int, str]] = field(default_factory=list)

    def decide(self, ctx: RunContext, request: HttpRequest, cls: Classification) -> Action:
        started = time.perf_counter()
        match = self.replay.play(request)
        if match is not None:
            self.played.append((match.index, request.url))
            emit_exchange(ctx, request, match.response, cls, (time.perf_counter() - started) * 1000.0)
            return Serve(match.response)
        if self.replay.ignored(request):
            return Send(request, request.host, UnrecordedCapture(ctx, request, cls))
        return Refuse(_unmatched(ctx, self, request))


@dataclass
class VcrSource:
    """A vcr-marked test's cassettes and merged ``vcr_config``: vcrpy's ``replay.foreign.ForeignSource``."""

    paths: VcrCassettePaths
    config: Document
    record_mode: str  # vcrpy's
    # The record mode was given on the command line (--record-mode): it applies, whatever vcr_config says.
    record_given: bool = False
    # The session's vcr.VCR (its registered matchers, serializers, persister); None: vcrpy's defaults.
    vcr: Any = field(default=None, repr=False)
    # Set by :meth:`load`: the replay the run is served from.
    serving: VcrServing | None = field(default=None, repr=False)

    def exists(self) -> bool:
        return bool(self.paths.existing())

    def marker_defaults(self, marker: Mapping[str, object]) -> dict[str, object]:
        """The ``agentreplay`` marker with what the vcr marker implies (record mode, ``allowed_hosts``) where
        it says nothing."""
        out = dict(marker)
        if out.get("record") is None and (self.record_given or "record_mode" in self.config):
            out["record"] = agentreplay_record_mode(self.record_mode)
        hosts = allowed_hosts(self.config)
        if hosts:
            given = out.get("allow_hosts") or ()
            listed = [given] if isinstance(given, str) else list(given) if isinstance(given, Iterable) else []
            out["allow_hosts"] = [*listed, *hosts]
        return out

    def load(self, nodeid: str, cassette: Path) -> LoadedCassette:
        """An empty in-memory cassette labelled imported, even without a YAML file (pytest-recording passes
        a test that sends nothing)."""
        replay = VcrReplay(self.paths, self.config, vcr=self.vcr)
        self.serving = VcrServing(replay)
        run = vcrpy_run(f"vcr-{nodeid}", nodeid, ", ".join(p.name for p in replay.found))
        blobs = BlobStore(default_blob_dir(cassette))
        return LoadedCassette(path=cassette, run=run, events=[], blob_store=blobs)

    def activate(self, ctx: RunContext, recorded: LoadedCassette, *, converting: bool) -> None:
        """Serve ``ctx`` from the replay :meth:`load` made. vcrpy recorded no clock, uuid or random values:
        none are served (a converted run keeps the values it drew)."""
        assert self.serving is not None, "activate() before load()"
        ctx.served_instead = self.serving
        if not converting:
            ctx.settings = ctx.settings._replace(runtime_values=())

    def recorded_side(self, ctx: RunContext) -> PlayedHistory:
        assert self.serving is not None and ctx.recorded is not None, "recorded_side() before load()"
        interactions = self.serving.replay.interactions()
        played: list[VcrInteraction] = []
        for index, url in self.serving.played:
            stored, response = interactions[index].request, interactions[index].response
            # vcrpy matched the live URL to this interaction under its filters (filter_query_parameters,
            # before_record_request) and match_on: a URL difference it disregarded is not compared either.
            request = HttpRequest(stored.method, url, stored.headers, stored.body)
            played.append(VcrInteraction(request, response))
        events = interactions_to_events(played, ctx.settings, ctx.recorded.run, framed=True)
        return PlayedHistory(ctx.recorded.run, events, ctx.redactor)

    def converted_run(self, run: RunMeta) -> RunMeta:
        return run.model_copy(update={"labels": {**run.labels, "source": CONVERTED_LABEL}})


class UnrecordedCapture(LiveCapture):
    """A live exchange vcrpy ignores (``ignore_hosts``/``ignore_localhost``): sent, never recorded."""

    __slots__ = ()

    def finish(self, error: BaseException | None = None) -> None:
        self._done = True


def _unmatched(ctx: RunContext, serving: VcrServing, request: HttpRequest) -> UnmatchedRequestError:
    url = ctx.redactor.redact_url(request.url) if ctx.redactor is not None else request.url
    replay = serving.replay
    match_on = replay.config.get("match_on") or ("method", "scheme", "host", "port", "path", "query")
    matchers = match_on if isinstance(match_on, list | tuple) else (match_on,)
    closest = replay.closest(request)
    return unmatched_refusal(
        ctx,
        request,
        url,
        "vcrpy interaction",
        [
            f"cassettes (read in place): {', '.join(str(p) for p in replay.found)}"
            if replay.found
            else f"no cassette: {replay.paths[0]} does not exist (nor this plugin's {ctx.cassette})",
            f"vcrpy match_on: {', '.join(str(getattr(m, '__name__', m)) for m in matchers)}",
        ],
        ["closest recorded:", *(f"  {line}" for line in closest)] if closest else [],
        ["if it is not, find what changed it (prompt, arguments, base URL, code)"],
    )


@dataclass
class PlayedHistory:
    """The recorded side of a vcr-served run's comparison (a ``replay.foreign.RecordedSide``)."""

    run: RunMeta
    events: list[Event]
    redactor: RunRedactor | None = None

    def event_dicts(self) -> list[Document]:
        dicts = [event_to_dict(e) for e in self.events]
        if self.redactor is None:
            return dicts
        return [self.redactor.redact(d) for d in dicts]

    def payload(self, ref: PayloadRef | None) -> object:
        return None if ref is None else ref.inline
