"""What a load gives: :class:`LoadedCassette`, its payloads resolved and shape-checked lazily, and every
problem of the cassette listed for ``agentreplay verify``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..core.constants import FORMAT_VERSION, HTTP_REQUEST_MEDIA_TYPE, HTTP_RESPONSE_MEDIA_TYPE
from ..core.documents import Document
from ..core.events import Event, PayloadRef, RunMeta, event_to_dict
from ..exceptions import CassetteError, PayloadShapeError
from ..redaction import Redactor, default_redactor
from .blobs import BlobStore
from .chain import build_document, integrity_problems, run_to_dict, scan_document
from .parsing import edit_fixes, parse_document
from .stored_decode import restore_response_payload
from .stored_form import REF_FIELDS
from .validation import (
    bodiless_request_fits,
    capped,
    depth_problem,
    parsed_response_fits,
    payload_problem,
    relocate,
)


def verify_chain(doc: Document) -> list[str]:
    return capped([problem.message for problem in integrity_problems(doc)], 20)


# A plain class, not a dataclass: far cheaper to create at start-up.
class LoadedCassette:
    __slots__ = ("blob_store", "document", "events", "mode", "path", "restored", "run", "source", "version")

    def __init__(
        self,
        path: Path,
        run: RunMeta,
        events: list[Event],
        blob_store: BlobStore,
        document: Document | None = None,
        mode: str | None = None,
        # The file's bytes, when ``document`` is left empty (a current-version file).
        source: bytes | None = None,
        # The format version of the file (an older one is upgraded in memory when loaded with ``migrate``).
        version: int = FORMAT_VERSION,
        # By id (each object kept beside it): the inline response payloads of ``events`` whose body's
        # ``json`` the load parsed from its ``raw`` (``decode_events``), which :meth:`payload` checks so.
        restored: dict[int, Document] | None = None,
    ) -> None:
        self.path, self.run, self.events, self.blob_store = path, run, events, blob_store
        self.document: Document = {} if document is None else document
        self.mode, self.source, self.version = mode, source, version
        self.restored: dict[int, Document] = {} if restored is None else restored

    # Any: the payload is whatever JSON was recorded, read by callers that know its shape.
    def payload(self, ref: PayloadRef | None) -> Any:
        """The payload value: inline as stored, or the blob with every ``$blob`` reference expanded."""
        if ref is None:
            return None
        if ref.sha256 is None:
            value = ref.inline
            restored = self.restored.get(id(value))
            if restored is value and restored is not None and parsed_response_fits(restored):
                return restored
            if ref.media_type == HTTP_REQUEST_MEDIA_TYPE and bodiless_request_fits(value):
                return value
            problem = depth_problem(value)
            stored = "stored inline"
        else:
            try:
                value = self.blob_store.load(ref.sha256)
            except CassetteError as exc:
                place = f"{self._ref_place(ref)}, payload {ref.sha256}"
                raise relocate(exc, self.path, self.mode, place) from None
            if ref.media_type == HTTP_RESPONSE_MEDIA_TYPE:
                # Stored in the lean form of an inline response (stored_form): its parsed JSON left out.
                value = restore_response_payload(value)
            problem = None
            stored = f"stored in blob {ref.sha256}"
        if problem is None and ref.media_type is not None:
            problem = payload_problem(ref.media_type, value)
        if problem is not None:
            raise PayloadShapeError(
                f"cassette {self.path.name}: a recorded payload has the wrong shape: {problem}",
                evidence=[f"media type: {ref.media_type}", stored],
                cassette=self.path,
                mode=self.mode,
                place=self._ref_place(ref),
                fixes=edit_fixes(self.path, self.run.test),
            )
        return value

    def _ref_place(self, ref: PayloadRef) -> str:
        for index, name, candidate in self.iter_refs():
            if candidate is ref:
                return f"event seq {index} (events[{index}]), field {name}"
        return "referenced by an event"

    def event_dicts(self) -> list[Document]:
        return [event_to_dict(event) for event in self.events]

    def iter_refs(self) -> Iterator[tuple[int, str, PayloadRef]]:
        for index, event in enumerate(self.events):
            for name in REF_FIELDS:
                ref = getattr(event, name)
                if ref is not None:
                    yield index, name, ref

    def verify(self, redactor: Redactor | None = None) -> list[str]:
        """Every problem: event digests, missing or damaged blobs, secret-shaped values (doc and blobs)."""
        doc = self.document or self._stored_document()
        problems = verify_chain(doc)
        redactor = redactor or default_redactor()
        problems.extend(f"secret-shaped value at {p}" for p in scan_document(doc, redactor))
        checked: set[str] = set()
        for index, name, ref in self.iter_refs():
            if ref.sha256 is None or ref.sha256 in checked:
                continue
            try:
                shas = self.blob_store.referenced(ref.sha256)
            except CassetteError as exc:
                problems.append(f"events[{index}].{name}: {exc.headline}")
                continue
            found = 0
            for sha in shas - checked:
                leaks = redactor.find_secrets(self.blob_store.get(sha))
                found += len(leaks)
                problems.extend(f"secret-shaped value in blob {sha} at {p}" for p in leaks)
            if not found:
                # The payload whole, as the write-time scan saw it: a stream or body cut across blobs.
                try:
                    leaks = redactor.find_secrets(self.payload(ref), f"events[{index}].{name}")
                except CassetteError:
                    leaks = []  # already reported by the blob checks
                problems.extend(f"secret-shaped value at {p}" for p in leaks)
            checked |= shas
        if (shown := redactor.redact_string(self.path.name, keys=False)) != self.path.name:
            problems.append(f"secret-shaped value in the file name ({shown})")
        return problems

    def _stored_document(self) -> Document:
        if self.source is not None:  # the bytes it was loaded from: they parsed then
            value = parse_document(self.source, self.path, self.mode)
            if isinstance(value, dict):
                return value
        # Rebuilt from the models, so the chain is recomputed: only blobs and secrets are really checked.
        return build_document(run_to_dict(self.run), self.event_dicts())
