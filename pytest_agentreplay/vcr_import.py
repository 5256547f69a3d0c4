"""Convert vcrpy / pytest-recording cassettes into this format (``agentreplay import-vcr``).

Each input file becomes one run: every interaction is classified the way live recording classifies
it (a ``model.call`` per provider endpoint, an ``http`` read, or a write ``effect`` with its
idempotency key and receipt), bodies are decoded (gzip, base64 ``!!binary``, SSE streams), and the
run is redacted and saved through ``store.save_cassette`` (atomic, hash-chained, secret-scanned).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .canonical import sha256_hex
from .exceptions import CassetteCorruptError

if TYPE_CHECKING:
    from .store import LoadedCassette


def _read_interactions(source: Path) -> list[Any]:
    from .vcr_format import load_vcr

    fixes = [
        "check that it is a vcrpy / pytest-recording cassette (a YAML or JSON file with `interactions`)",
        "re-record it with vcrpy, or record the test with pytest-agentreplay directly",
    ]
    try:
        return load_vcr(source)
    except FileNotFoundError:
        raise CassetteCorruptError(f"{source} does not exist", cassette=source, fixes=fixes[:1]) from None
    except Exception as exc:  # YAML/JSON syntax, wrong shape, undecodable body
        first_line = str(exc).splitlines()[0] if str(exc) else ""
        raise CassetteCorruptError(
            f"cannot import {source.name}: {type(exc).__name__}: {first_line}",
            cassette=source,
            fixes=fixes,
        ) from None


def import_vcr_file(
    source: Path,
    target: Path,
    *,
    settings: Mapping[str, Any] | None = None,
    redaction: Mapping[str, Any] | None = None,
    blob_dir: Path | None = None,
) -> LoadedCassette:
    """Convert one vcrpy cassette at ``source`` into a cassette at ``target``; returns the saved cassette.

    ``settings`` are the HTTP settings of ``[tool.agentreplay]`` (idempotency header, receipt rules,
    OpenAI-compatible base URLs); ``redaction`` its ``redact_*`` keys.
    """
    from .capture import Recorder, RunContext
    from .events import RunMeta
    from .http.classify import classify_exchange
    from .http.recording import emit_exchange
    from .redaction import Redactor
    from .store import save_cassette

    source = Path(source)
    interactions = _read_interactions(source)
    digest = sha256_hex(source.read_bytes())
    run = RunMeta(
        run_id=f"vcr-{digest[:24]}",
        test=f"imported from {source.name}",
        labels={"imported_from": "vcrpy", "source": source.name},
    )
    ctx = RunContext(Recorder(run), mode="capture", cassette=str(target), settings=dict(settings or {}))
    ctx.start()
    for item in interactions:
        cls = classify_exchange(item.request, item.response, ctx.settings)
        emit_exchange(ctx, item.request, item.response, cls, 0.0)
    ctx.finish()
    models = [e for e in ctx.recorder.events if e.type == "model.call"]
    if models:
        first = models[0].data
        run = run.model_copy(update={"provider": first.get("provider"), "model": first.get("model")})
    redactor = Redactor.from_config({k: v for k, v in (redaction or {}).items() if k.startswith("redact_")})
    return save_cassette(Path(target), run, ctx.recorder.events, redactor=redactor, blob_dir=blob_dir)
