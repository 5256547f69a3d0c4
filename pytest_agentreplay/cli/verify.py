"""``agentreplay verify``: every problem of cassette files, or of every cassette under folders."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..cassette.chain import checked_integrity
from ..core.constants import FORMAT_VERSION
from ..exceptions import CassetteError
from ..replay.audit import audit_advice
from ..replay.replayability import replay_problems
from .common import EXIT_OK, EXIT_PROBLEMS, Progress, UsageError, iter_files, load_for_audit, out


def cassette_findings(path: Path) -> tuple[list[str], list[str]]:
    """The problems of one cassette (damage: schema, event digests, blobs, secrets, and whatever replay
    would trip on: the same load, payload resolution and decoding replay runs) and the advice on it
    (committed effects without a receipt or an idempotency key)."""
    try:
        loaded, _ = load_for_audit(path)
    except CassetteError as exc:
        return [exc.headline + (f" (at {exc.place})" if exc.place else ""), *exc.evidence], []
    # Both checks may find the same damage: each problem once.
    problems = list(dict.fromkeys([*loaded.verify(), *replay_problems(loaded)]))
    return problems, audit_advice(loaded)


def run(args: argparse.Namespace) -> int:
    files = iter_files(args.paths, (".json",), command="verify")
    if not files:
        raise UsageError(
            "no cassette found in " + ", ".join(args.paths),
            fixes=["pass cassette files or the folder that holds them: agentreplay verify cassettes/"],
        )
    bad = total = advised = 0
    with Progress(len(files), "verify") as bar:
        for path in files:
            problems, advice = cassette_findings(path)
            if args.strict:
                problems, advice = [*problems, *advice], []
            bar.advance(str(path))
            if problems:
                bad += 1
                total += len(problems)
                for problem in problems:
                    out(f"{path}: {problem}")
            for line in advice:
                out(f"{path}: warning: {line}")
            advised += len(advice)
            if not problems and not advice and args.verbose:
                out(f"{path}: ok")
    if bad:
        out(f"verify: {total} problem(s) in {bad} of {len(files)} cassette(s)")
        return EXIT_PROBLEMS
    # Only the current format passes (an older one is a problem above): its seal is what was checked.
    out(f"verify: {len(files)} cassette(s) ok ({checked_integrity(FORMAT_VERSION)})")
    if advised:
        out(
            f"verify: {advised} warning(s): committed writes without an idempotency key or a receipt "
            "(advice; --strict fails on them)"
        )
    return EXIT_OK
