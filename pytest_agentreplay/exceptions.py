"""One exception tree. Every error names where it happened (cassette, mode) and how to fix it.

Messages follow one layout: a headline, the evidence, the location, then numbered fixes.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any


class AgentReplayError(Exception):
    """Root of every error this package raises on purpose."""

    def __init__(
        self,
        headline: str,
        *,
        evidence: Sequence[str] = (),
        cassette: Path | str | None = None,
        mode: str | None = None,
        place: str | None = None,
        fixes: Sequence[str] = (),
    ) -> None:
        self.headline = headline
        self.evidence = tuple(evidence)
        self.cassette = str(cassette) if cassette is not None else None
        self.mode = mode
        self.place = place
        self.fixes = tuple(fixes)
        super().__init__(headline)

    def __reduce__(self) -> tuple[Any, ...]:
        # Every field travels (xdist workers, multiprocessing): the default would rebuild from args alone.
        return (_restore, (type(self), dict(self.__dict__)))

    def render(self) -> str:
        """The message, as ``str()`` gives it (docs/exceptions.md)."""
        return str(self)

    def __str__(self) -> str:
        # Rendered when shown, not when raised: a layer that adds the mode or the cassette on the way up
        # (``exc.mode = mode; raise``) is seen in the message.
        where = (("cassette", self.cassette), ("at", self.place), ("mode", self.mode))
        fixes = [f"  {n}. {fix}" for n, fix in enumerate(self.fixes, 1)]
        blocks = (
            [f"  {line}" for line in self.evidence],
            [f"{label}: {value}" for label, value in where if value is not None],
            ["How to fix:", *fixes] if fixes else [],
        )
        lines = [self.headline]
        for block in blocks:
            if block:
                lines += ["", *block]
        return "\n".join(lines)


def _restore(cls: type[AgentReplayError], state: dict[str, Any]) -> AgentReplayError:
    exc = cls.__new__(cls)
    Exception.__init__(exc, state.get("headline"))
    exc.__dict__.update(state)
    return exc


class ConfigError(AgentReplayError):
    """Invalid configuration: option, ini key, marker argument or rule."""


class NoProviderError(ConfigError):
    """An exchange was classified as a model call and no provider of the session reads it."""


class CassetteError(AgentReplayError):
    """A cassette cannot be read or written as it is."""


class CassetteNotFoundError(CassetteError):
    """Replay asked for a cassette that does not exist."""


class CassetteElsewhereError(CassetteNotFoundError):
    """The cassette is absent where the test looks, but is at ``found`` under the project root ``root``
    above pytest's rootdir: pytest ran from another directory than when it was recorded."""

    def __init__(self, headline: str, *, found: Path, root: Path, **kwargs: Any) -> None:
        self.found = found
        self.root = root
        super().__init__(headline, **kwargs)


class CassetteCorruptError(CassetteError):
    """The file is not valid JSON or not a cassette at all."""


class CassetteSchemaError(CassetteError):
    """The content does not match the cassette schema (unknown field, wrong type)."""


class CassetteVersionError(CassetteError):
    """The format version is newer than this package or unknown."""


class CassetteIntegrityError(CassetteError):
    """The hash chain does not match: an edit, a reordering or a truncation."""


class WrongTestCassetteError(CassetteError):
    """The cassette was recorded for another test and was not named explicitly with ``cassette=``."""


class AuditProblemsError(CassetteIntegrityError):
    """Audit mode found problems in the recorded run (missing receipts, unkeyed writes...)."""


class CassetteLimitError(CassetteCorruptError):
    """A cassette, blob or imported file exceeds a size, nesting-depth or expansion limit."""


class CassetteFileTypeError(CassetteError):
    """A cassette or blob path is not a regular file inside its folder (a FIFO, a symlink out of it...)."""


class PayloadShapeError(CassetteSchemaError):
    """A payload or blob does not have the shape its reference says (a request, response, chain node)."""


class BlobMissingError(CassetteError):
    """An event references a payload blob that is not in the blob store."""


class SecretLeakError(CassetteError):
    """A value shaped like a secret survived redaction; the cassette was not written."""


class ContentCodingError(CassetteError):
    """A body's content coding cannot be undone here (``zstd`` without ``zstandard``): not recorded,
    since redaction cannot see inside it."""


class EventStreamError(CassetteError):
    """An AWS event stream message failed its CRC check or has impossible lengths: it cannot be stored."""


class CassetteNotSavedError(CassetteError):
    """Writing a cassette or its blobs failed (a full disk, no permission...): nothing was replaced."""

    # Starts every headline after the file name: one phrase for every way a write fails.
    MARK = "was not saved: writing it failed"


class PruneRefusedError(CassetteError):
    """``agentreplay prune`` deleted nothing: a cassette sharing the blob store cannot be read, so which
    blobs are still in use is unknown."""


class PendingDriftError(CassetteError):
    """A pending drift file cannot be reviewed: unreadable, or its cassette changed since the drift."""


class ReplayError(AgentReplayError):
    """Replay could not serve a live call from the cassette."""


class UnmatchedRequestError(ReplayError):
    """A live request has no recorded counterpart."""


class ToolNotRecordedError(UnmatchedRequestError):
    """A tool call has no recorded result to serve."""


class SandboxCheckError(ReplayError):
    """A sandbox-mode check failed: a duplicate write, a missing idempotency key, an unhandled fault."""


class NetworkBlockedError(ReplayError):
    """An outbound connection the mode does not allow was refused."""


class ReportError(AgentReplayError):
    """The session report could not be written (its folder is gone, no permission, a full disk)."""


class DriftError(AgentReplayError):
    """The replayed history differs from the recorded one by a regression."""


class ComparisonError(AgentReplayError):
    """A model comparison failed its test: agreement below ``min_agreement``, a budget rule exceeded."""


class ToolValueError(AgentReplayError):
    """A ``@tool`` value cannot be stored so that replay gives it back as it was (refused while
    recording), or a recorded one cannot be rebuilt (its class is gone). Never stored as a ``repr``."""


class RecordedToolError(Exception):
    """Raised in replay where the tool raised while recording, when the recorded exception cannot be
    rebuilt as its own type; ``error_type`` is its recorded type name (``KeyError``), if known.

    Outside the ``AgentReplayError`` tree: it stands for the tool's own failure, which the agent under test
    handles as it did while recording."""

    def __init__(self, tool: str, message: str, *, error_type: str | None = None) -> None:
        super().__init__(f"{tool}: {message}")
        self.tool = tool
        self.message = message
        if error_type is None:
            # The recorded text is ``Type: message`` (``KeyError: 'sku'``).
            head, sep, _ = message.partition(": ")
            if sep and head and all(part.isidentifier() for part in head.split(".")):
                error_type = head
        self.error_type = error_type


def __getattr__(name: str) -> object:
    # The old name of ``pydantic.ValidationError`` (records are pydantic models now), kept for code that
    # catches it; resolved on first use, so a guarded child that imports this module skips pydantic.
    if name == "RecordValidationError":
        from pydantic import ValidationError  # heavy: ~40 ms of import a guarded child never needs

        return ValidationError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class UnencodableValueError(CassetteError):
    """A recorded value cannot be stored as UTF-8 JSON (a lone UTF-16 surrogate): nothing is written."""
