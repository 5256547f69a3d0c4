"""Replay of a vcr-marked test from its pytest-recording cassettes, read in place (issue 12).

A vcr-marked test without a cassette of this plugin is served from its YAML cassettes through
:class:`~pytest_agentreplay.interop.vcr_compat.VcrReplay`: vcrpy's ``match_on``, ``filter_headers`` and
``before_record_*`` decide, fail-closed (an unmatched request is refused, never sent), and a request
vcrpy would ignore (``ignore_hosts``, ``ignore_localhost``) is sent unrecorded, as vcrpy sends it.

The recorded history the run is compared with is the played interactions, in play order
(``interactions_to_events`` shapes, labelled ``source: vcr``), so the lenient rules of imported
recordings apply: header and body differences vcrpy never compared do not fail.

``session.TestRun`` calls :func:`load_vcr_source` (instead of loading a cassette), :func:`activate`,
:func:`played_history` and :func:`converted_run`; ``policy.decide`` finds the :class:`VcrServing` in the
run (``ctx.served_instead``) and asks it: replay knows the protocol,
not this module.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ..core.events import Event, RunMeta
from ..exceptions import UnmatchedRequestError
from ..http.classify import Classification
from ..http.exchange import HttpRequest, HttpResponse
from ..http.recording import LiveCapture, emit_exchange
from ..replay.policy import Action, Refuse, Send, Serve

if TYPE_CHECKING:
    from ..cassette.read import LoadedCassette
    from ..core.capture import RunContext
    from ..core.run_settings import RunSettings
    from ..core.run_state import RunRedactor
    from .vcr_compat import VcrReplay

SOURCE_LABEL: Final = "vcr"
CONVERTED_LABEL: Final = "vcr-converted"


@dataclass
class VcrServing:
    """The run's vcrpy replay and what it played: (index into its interactions, the live URL it
    answered), in play order."""

    replay: VcrReplay
    played: list[tuple[int, str]] = field(default_factory=list)
    _interactions: list[Any] | None = None

    def interactions(self) -> list[Any]:
        if self._interactions is None:
            self._interactions = self.replay.interactions()
        return self._interactions

    def decide(self, ctx: RunContext, request: HttpRequest, cls: Classification) -> Action:
        """vcrpy's answer to ``request``: the recorded response, the request sent unrecorded where vcrpy
        ignores its host (``ignore_hosts``, ``ignore_localhost``), else a refusal."""
        served = serve(ctx, self, request, cls)
        if isinstance(served, HttpResponse):
            return Serve(served)
        if served is None:
            return Send(request, request.host, UnrecordedCapture(ctx, request, cls))
        return Refuse(served)


def load_vcr_source(test_run: Any) -> LoadedCassette:
    """The recorded side of a vcr-served run: an empty in-memory cassette (the played interactions become
    its events at the end) carrying the :class:`VcrReplay`, labelled imported."""
    from ..cassette.blobs import BlobStore, default_blob_dir
    from ..cassette.read import LoadedCassette
    from .vcr_compat import VcrReplay

    source = test_run.vcr
    replay = VcrReplay(source.paths, source.config, record_mode="none")
    found = replay.found
    run = RunMeta(
        run_id=f"vcr-{test_run.nodeid}",
        test=test_run.nodeid,
        labels={
            "source": SOURCE_LABEL,
            "imported_from": "vcrpy",
            "vcr_cassette": ", ".join(p.name for p in found),
        },
    )
    cassette: Path = test_run.cassette
    blobs = BlobStore(default_blob_dir(cassette))
    loaded = LoadedCassette(path=cassette, run=run, events=[], blob_store=blobs)
    loaded.document = {"vcr": VcrServing(replay)}
    return loaded


def activate(ctx: RunContext, recorded: Any, *, converting: bool = False) -> None:
    """Serve ``ctx`` from the vcrpy replay ``recorded`` carries (a :func:`load_vcr_source` result).

    Before the run starts. vcrpy recorded no clock, uuid or random values: none are served or compared,
    unless the run is converted into this plugin's cassette (``--agentreplay-update``), which keeps
    the values this run drew for its later replays."""
    serving = getattr(recorded, "document", {}).get("vcr") if recorded is not None else None
    if isinstance(serving, VcrServing):
        ctx.served_instead = serving
        if not converting:
            ctx.settings = replace(ctx.settings, runtime_values=())


def serve(ctx: RunContext, serving: VcrServing, request: HttpRequest, cls: Classification) -> Any:
    """The recorded response (recorded on the run), None when vcrpy would let ``request`` through
    unrecorded, else the refusal (an :class:`UnmatchedRequestError`, also kept in ``ctx.failures``)."""
    started = time.perf_counter()
    match = serving.replay.play(request)
    if match is not None:
        serving.played.append((match.index, request.url))
        emit_exchange(ctx, request, match.response, cls, (time.perf_counter() - started) * 1000.0)
        return match.response
    if serving.replay.ignored(request):
        return None
    return _unmatched(ctx, serving, request)


class UnrecordedCapture(LiveCapture):
    """A live exchange vcrpy ignores (``ignore_hosts``/``ignore_localhost``): sent, never recorded."""

    __slots__ = ()

    def finish(self, error: BaseException | None = None) -> None:
        self._done = True


def _unmatched(ctx: RunContext, serving: VcrServing, request: HttpRequest) -> UnmatchedRequestError:
    from ..core.commands import new_call_fix

    url = ctx.redactor.redact_url(request.url) if ctx.redactor is not None else request.url
    replay = serving.replay
    match_on = replay.config.get("match_on") or ("method", "scheme", "host", "port", "path", "query")
    error = UnmatchedRequestError(
        f"no recorded vcrpy interaction matches {request.method} {url}",
        evidence=[
            f"live call: {request.method} {url}",
            f"cassettes (read in place): {', '.join(str(p) for p in replay.found)}"
            if replay.found
            else f"no cassette: {replay.paths[0]} does not exist (nor this plugin's {ctx.cassette})",
            f"vcrpy match_on: {', '.join(str(getattr(m, '__name__', m)) for m in match_on)}",
            *_closest(replay, request),
        ],
        cassette=ctx.cassette,
        mode=ctx.mode,
        fixes=[
            new_call_fix(ctx.settings.nodeid, ctx.cassette),
            "if it is not, find what changed it (prompt, arguments, base URL, code)",
        ],
    )
    # The code under test may swallow the exception: the test must still fail.
    ctx.failures.append(error)
    return error


def _closest(replay: VcrReplay, request: HttpRequest) -> list[str]:
    lines = replay.closest(request)
    return ["closest recorded:", *(f"  {line}" for line in lines)] if lines else []


def played_history(ctx: RunContext) -> PlayedHistory | None:
    """The recorded side of a vcr-served run's comparison: the played interactions in play order (as
    ``interactions_to_events`` would record them, between a run.start and a run.end), redacted like a
    saved cassette. None for any other run."""
    serving = ctx.served_instead
    recorded = ctx.recorded
    if not isinstance(serving, VcrServing) or recorded is None:
        return None
    from ..http.classify import classify_exchange

    run = recorded.run
    interactions = serving.interactions()
    capture = _capture_context(run, ctx.settings)
    recorder = capture.recorder
    start = {k: v for k, v in run.model_dump(mode="json").items() if k in ("agent",)}
    recorder.emit("run.start", actor="runtime", event_class="input", data=start)
    for index, url in serving.played:
        item = interactions[index]
        # vcrpy matched the live URL to this interaction under its filters (filter_query_parameters,
        # before_record_request) and match_on: a URL difference it disregarded is not compared either.
        stored = item.request
        request = HttpRequest(stored.method, url, stored.headers, stored.body)
        cls = classify_exchange(request, item.response, capture.settings)
        emit_exchange(capture, request, item.response, cls, 0.0)
    recorder.emit("run.end", actor="runtime", event_class="decision", data={"status": "ok"})
    return PlayedHistory(run, recorder.events, ctx.redactor)


@dataclass
class PlayedHistory:
    """What ``session._compare`` reads of a recorded cassette, for a vcr-served run."""

    run: RunMeta
    events: list[Event]
    redactor: RunRedactor | None = None

    def event_dicts(self) -> list[dict[str, Any]]:
        from ..core.events import event_to_dict

        dicts = [event_to_dict(e) for e in self.events]
        if self.redactor is None:
            return dicts
        return [self.redactor.redact(d) for d in dicts]

    def payload(self, ref: Any) -> Any:
        return None if ref is None else ref.inline


def _capture_context(run: RunMeta, settings: RunSettings) -> RunContext:
    from ..core.capture import Recorder, RunContext

    return RunContext(Recorder(run), mode="capture", settings=settings)


def converted_run(run: RunMeta) -> RunMeta:
    """The run metadata of a vcr-served run written as this plugin's cassette (``--agentreplay-update``):
    no longer labelled imported (its requests are this run's own), the source cassettes named."""
    labels = {**run.labels, "source": CONVERTED_LABEL}
    return run.model_copy(update={"labels": labels, "run_id": run.run_id})
