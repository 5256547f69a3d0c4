"""``agentreplay show``: a recorded run as a timeline, JSON or the HTML viewer, with its audit."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..cassette.chain import checked_integrity, run_to_dict
from ..core.canonical import dumps_pretty
from ..core.constants import FORMAT_VERSION
from ..core.events import event_to_dict
from ..diff.result import DriftResult
from ..replay.audit import audit_advice
from ..report.timeline import render_timeline
from ..report.viewer import render_cassette_page, write_html
from .common import EXIT_OK, EXIT_PROBLEMS, UsageError, load_for_audit, out


def run(args: argparse.Namespace) -> int:
    path = Path(args.cassette)
    # An older format version is shown as it loads in memory, after the check its own version defines; a
    # broken seal or chain is a problem, not a failure.
    loaded, sealed = load_for_audit(path, mode="audit", migrate=True)
    version = loaded.version if sealed else None
    problems = loaded.verify()
    advice = audit_advice(loaded)
    # Said per format: only version 2 had a hash chain; the current format is sealed without one.
    integrity = checked_integrity(version) if version is not None else None
    if args.html:
        drift = None
        if args.drift:
            try:
                found: Any = json.loads(Path(args.drift).read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                fixes = ["pass a JSON file"]
                raise UsageError(f"cannot read the drift result {args.drift}: {exc}", fixes=fixes) from None
            if isinstance(found, Mapping) and isinstance(found.get("drift"), Mapping):
                found = found["drift"]
            try:
                drift = DriftResult.from_dict(found)
            except (KeyError, TypeError, AttributeError, ValueError) as exc:
                fix = "pass what agentreplay diff --json printed, or a test of the JSON report"
                raise UsageError(f"{args.drift} holds no drift result: {exc!r}", fixes=[fix]) from None
        write_html(Path(args.html), render_cassette_page(loaded, drift=drift, problems=[*problems, *advice]))
        out(
            f"wrote {args.html} ({len(loaded.events)} events, {len(problems)} audit problem(s), "
            f"{len(advice)} advice)"
        )
    elif args.json:
        doc = {
            "cassette": str(path),
            "run": run_to_dict(loaded.run),
            "events": [event_to_dict(e) for e in loaded.events],
            "problems": problems,
            "advice": advice,
            "integrity": integrity,
        }
        sys.stdout.write(dumps_pretty(doc))
    else:
        out(render_timeline(loaded.run, loaded.events, title=f"{path} (run {loaded.run.run_id})"))
        out()
        if problems:
            out(f"audit: {len(problems)} problem(s)")
            for problem in problems:
                out(f"  - {problem}")
        else:
            effects = "" if advice else "committed effects have receipts and keys, "
            out(f"audit: ok ({integrity}; {effects}blobs present, no secrets)")
        if advice:
            out(f"advice: {len(advice)} (the record holds, it could prove more)")
            for line in advice:
                out(f"  - {line}")
        if version is not None and version != FORMAT_VERSION:
            out(f"format version {version} is not replayed: upgrade it with `agentreplay migrate {path}`")
    # Advice never fails show: it renders what was recorded.
    return EXIT_PROBLEMS if problems else EXIT_OK
