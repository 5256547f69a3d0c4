"""``agentreplay diff``: the drift between two cassettes under the project's diff rules."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path

from ..cassette.read import load_cassette
from ..core.canonical import dumps_pretty
from ..core.constants import REPLAY_MODES
from ..core.events import PayloadRef
from ..diff import RuleSet, compare_histories, render_drift
from ..diff.rules import is_imported
from ..exceptions import ConfigError
from .common import EXIT_OK, EXIT_PROBLEMS, out, project_table


def run(args: argparse.Namespace) -> int:
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
