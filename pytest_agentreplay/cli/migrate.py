"""``agentreplay migrate``: rewrite cassettes of an older format version in the current one."""

from __future__ import annotations

import argparse

from ..cassette.maintenance import migrate_file
from ..exceptions import AgentReplayError
from .common import EXIT_OK, EXIT_USAGE, Progress, err, iter_files, out


def run(args: argparse.Namespace) -> int:
    files = iter_files(args.paths, (".json",), command="migrate")
    changed = current = failed = 0
    verb = "would migrate" if args.dry_run else "migrated"
    with Progress(len(files), "migrate") as bar:
        for path in files:
            try:
                if migrate_file(path, dry_run=args.dry_run):
                    changed += 1
                    out(f"{verb} {path}")
                else:
                    current += 1
            except AgentReplayError as exc:
                failed += 1
                err(f"{path}: {exc.headline}")
            bar.advance(str(path))
    out(f"migrate: {changed} {verb}, {current} already current, {failed} failed")
    return EXIT_USAGE if failed else EXIT_OK
