"""``agentreplay prune``: remove payload blobs from the blob store by data class and age.

What may go is decided in :mod:`pytest_agentreplay.cassette.prune`, from every cassette sharing the
store, whatever folder is given; this module only reads the options and prints.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..cassette.prune import plan_prune, remove
from ..core.constants import DEFAULT_CASSETTE_DIR
from .common import EXIT_OK, Progress, UsageError, out, project_table


def run(args: argparse.Namespace) -> int:
    table = project_table()
    cassette_dir = Path(args.cassette_dir or str(table.get("cassette_dir") or DEFAULT_CASSETTE_DIR))
    if not cassette_dir.is_dir():
        raise UsageError(
            f"cassette folder {cassette_dir} does not exist",
            fixes=["pass it: agentreplay prune --cassette-dir path/to/cassettes"],
        )
    if args.older_than is not None and args.older_than < 0:
        raise UsageError("--older-than must be a number of days >= 0")
    plan = plan_prune(
        cassette_dir,
        data_classes=args.data_class or (),
        older_than=args.older_than,
        include_referenced=args.include_referenced,
    )
    for scan in plan.scans:
        out(f"blob store {scan.blob_dir}: read the {scan.cassettes} cassette file(s) under {scan.root}")
    verb = "would remove" if args.dry_run else "removed"
    with Progress(len(plan.removals), "prune") as bar:
        for removal in plan.removals:
            bar.advance(removal.sha[:12])
            if not args.dry_run:
                remove(plan, removal)
            out(
                f"{verb} {removal.path} ({removal.reason}, {removal.age_days:.0f} day(s) old, "
                f"{removal.size} bytes)"
            )
    freed = sum(removal.size for removal in plan.removals)
    out(f"prune: {len(plan.removals)} blob(s) {verb} ({freed} bytes)")
    wanted = args.data_class or []
    if plan.kept_referenced:
        what = f" of class {', '.join(sorted(wanted))}" if wanted else ""
        out(
            f"kept {plan.kept_referenced} blob(s){what} that cassettes still reference; "
            "pass --include-referenced to remove them too"
        )
    if plan.kept_elsewhere:
        out(
            f"kept {plan.kept_elsewhere} blob(s) that cassettes outside {cassette_dir} reference "
            "(they share its blob store); prune their folder to remove them"
        )
    broken = plan.broken()
    if broken:
        now = "would reference" if args.dry_run else "now reference"
        out(f"{len(broken)} cassette(s) {now} removed blobs (re-record them or remove them):")
        for name in broken:
            out(f"  {name}")
    return EXIT_OK
