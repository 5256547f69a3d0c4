"""The commands that read cassettes to show them: ``agentreplay show``, ``diff``, ``export-otel`` and
``schema``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..cassette.chain import checked_integrity, run_to_dict
from ..cassette.read import load_cassette
from ..core.canonical import dumps_pretty
from ..core.constants import FORMAT_VERSION, REPLAY_MODES
from ..core.events import PayloadRef, cassette_json_schema, event_to_dict
from ..diff import RuleSet, compare_histories, render_drift
from ..diff.result import DriftResult
from ..diff.rules import is_imported
from ..exceptions import ConfigError
from ..interop.otel import cassette_to_otlp, export_with_sdk
from ..replay.audit import audit_advice
from ..report import report_json_schema
from ..report.timeline import render_timeline
from ..report.viewer import render_cassette_page, write_html
from .common import EXIT_OK, EXIT_PROBLEMS, UsageError, err, load_for_audit, out, project_table


def show(args: argparse.Namespace) -> int:
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


def diff(args: argparse.Namespace) -> int:
    table = project_table()
    mode = args.mode or str(table.get("mode") or "regression")
    if mode not in REPLAY_MODES:
        raise ConfigError(
            f"invalid replay mode {mode!r} in pyproject.toml", fixes=[f"use one of {REPLAY_MODES}"]
        )
    recorded = load_cassette(Path(args.a), mode=mode)
    replayed = load_cassette(Path(args.b), mode=mode)
    rules = RuleSet.from_layers(mode, project=table.get("rules"), imported=is_imported(recorded.run.labels))

    def resolve(ref: Mapping[str, object]) -> object:
        model = PayloadRef.model_validate(dict(ref))
        if model.sha256 is None:
            return model.inline
        for side in (recorded, replayed):
            if side.blob_store.exists(model.sha256):
                return side.payload(model)
        return recorded.payload(model)

    result = compare_histories(recorded.event_dicts(), replayed.event_dicts(), rules=rules, resolve=resolve)
    if args.json:
        sys.stdout.write(dumps_pretty(result.to_dict()))
    else:
        test = recorded.run.test or str(args.a)
        out(render_drift(result, test=test, cassette=f"{args.a} vs {args.b}", mode=mode, update_hint=False))
    return EXIT_PROBLEMS if result.has_regressions else EXIT_OK


def export_otel(args: argparse.Namespace) -> int:
    loaded = load_cassette(Path(args.cassette))
    if args.exporter:
        count = export_with_sdk(loaded, args.exporter, endpoint=args.endpoint)
        err(f"exported {count} span(s) through the {args.exporter} exporter")
        return EXIT_OK
    sys.stdout.write(json.dumps(cassette_to_otlp(loaded, service_name=args.service_name), indent=2) + "\n")
    return EXIT_OK


def schema(args: argparse.Namespace) -> int:
    sys.stdout.write(dumps_pretty(report_json_schema() if args.report else cassette_json_schema()))
    return EXIT_OK
