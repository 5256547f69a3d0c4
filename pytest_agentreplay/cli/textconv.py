"""``agentreplay textconv``: a cassette with its blob-stored payloads inlined, for git's diff driver."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..cassette.blobs import BlobStore, default_blob_dir
from ..cassette.parsing import read_cassette_bytes
from ..cassette.stored_form import stored_refs
from ..core.canonical import dumps_pretty
from ..core.constants import BLOB_DIR_NAME, DEFAULT_CASSETTE_DIR
from ..exceptions import AgentReplayError, CassetteError
from .common import EXIT_OK, EXIT_USAGE, err


def _textconv_blob_dir(path: Path, explicit: str | None) -> Path:
    if explicit:
        return Path(explicit)
    found = default_blob_dir(path)
    if found.is_dir():
        return found
    # git hands textconv a temporary copy of an older revision: look from where git runs (the repository).
    for ancestor in (Path.cwd(), *Path.cwd().parents):
        for candidate in (ancestor / DEFAULT_CASSETTE_DIR / BLOB_DIR_NAME, ancestor / BLOB_DIR_NAME):
            if candidate.is_dir():
                return candidate
    return found


def run(args: argparse.Namespace) -> int:
    path = Path(args.cassette)
    try:
        data = read_cassette_bytes(path)
    except (CassetteError, OSError) as exc:
        err(f"textconv: {getattr(exc, 'headline', exc)}")
        return EXIT_USAGE
    # Every blob-stored payload inlined next to its sha256; a damaged file never fails the diff: what
    # cannot be resolved is named in place.
    try:
        raw = json.loads(data)
        store = BlobStore(_textconv_blob_dir(path, args.blob_dir))
        for _, _, ref in stored_refs(raw.get("events") if isinstance(raw, dict) else None):
            if not isinstance(ref["sha256"], str):
                continue
            try:
                ref["inline"] = store.load(ref["sha256"])
            except (AgentReplayError, OSError, ValueError, RecursionError) as exc:
                ref["inline"] = f"<payload not resolved: {getattr(exc, 'headline', exc)}>"
        text = dumps_pretty(raw)
    except (ValueError, RecursionError):
        sys.stdout.buffer.write(data)  # not a cassette git can render: the bytes as they are
        return EXIT_OK
    sys.stdout.write(text)
    return EXIT_OK
