"""``agentreplay review``, ``accept`` and ``reject``: the pending drift files drifting tests left beside their
cassettes (``cassette/pending.py``). ``review`` reads one key per test with prompt_toolkit (raw mode on every
platform, no Enter needed).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path

from ..cassette.pending import Pending, find_pending, read_pending
from ..core.paths import PENDING_SUFFIX, pending_path
from ..exceptions import PendingDriftError
from .common import EXIT_OK, EXIT_PROBLEMS, UsageError, err, out

_KEYS = {"a": "accept", "r": "reject", "s": "skip", "q": "quit"}


def review(args: argparse.Namespace) -> int:
    pendings = _selected(args)
    if not pendings:
        out("no pending drift" + (f" matching -k {args.k!r}" if args.k else "") + ": nothing to review")
        return EXIT_OK
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError(
            "agentreplay review reads one key per test and needs a terminal",
            evidence=[f"{len(pendings)} pending drift file(s) found"],
            fixes=[
                "run it in a terminal",
                "or decide without asking: agentreplay accept PATH... / agentreplay reject PATH... (--all)",
            ],
        )
    done = {"accept": 0, "reject": 0, "skip": 0}
    for number, pending in enumerate(pendings, 1):
        out(_bold(f"[{number}/{len(pendings)}] {pending.test}"))
        out(pending.drift.rstrip("\n"))
        try:
            pending.check_base()
        except PendingDriftError as exc:
            err(str(exc))
            done["skip"] += 1
            continue
        out(_bold(f"accepting changes {pending.relative}:"))
        for line in pending.changes():
            out(_colored(line))
        choice = _ask("a accept · r reject · s skip · q quit > ")
        if choice == "quit":
            break
        _apply(pending, choice)
        done[choice] += 1
    out(f"{done['accept']} accepted, {done['reject']} rejected, {done['skip']} skipped")
    return EXIT_OK


def decide(args: argparse.Namespace) -> int:
    choice = args.command
    if not (args.paths or args.all or args.from_dir):
        raise UsageError(
            f"agentreplay {choice} needs the pending drift files (or their cassettes), or --all",
            fixes=[
                f"agentreplay {choice} cassettes/test_agent/test_refund.pending.json",
                f"agentreplay {choice} --all",
            ],
        )
    pendings = _selected(args)
    problems = 0
    for pending in pendings:
        try:
            _apply(pending, choice)
        except PendingDriftError as exc:
            err(str(exc))
            problems += 1
    if not pendings:
        out(f"no pending drift to {choice}")
    return EXIT_PROBLEMS if problems else EXIT_OK


def _apply(pending: Pending, choice: str) -> None:
    if choice == "accept":
        out(f"accepted: {pending.test} -> {pending.accept()}")
    elif choice == "reject":
        pending.reject()
        out(f"rejected: {pending.test} (cassette unchanged)")
    else:
        out(f"skipped: {pending.test} (still pending: {pending.path})")


def _selected(args: argparse.Namespace) -> list[Pending]:
    """The pending drifts the arguments name (files, cassettes, folders), or every one under ``--from`` or
    ``.``."""
    source = Path(args.from_dir) if args.from_dir else None
    if source is not None and not source.is_dir():
        raise UsageError(
            f"--from {args.from_dir}: no such folder",
            fixes=["name the folder CI's artifact was unpacked into"],
        )
    roots: list[Path] = []
    for raw in args.paths or ([] if source is not None else ["."]):
        path = Path(raw)
        if not path.exists():
            raise UsageError(f"{raw}: no such file or directory", fixes=["agentreplay review cassettes/"])
        if path.is_file() and not path.name.endswith(PENDING_SUFFIX):
            path = pending_path(path)
            if not path.exists():
                raise UsageError(f"{raw} has no pending drift ({path.name} does not exist)")
        roots.append(path)
    if source is not None:
        roots.append(source)
    select = _keyword_filter(args.k or "")  # an empty expression selects every test
    pendings = [
        read_pending(path, root=Path.cwd() if source is not None and path.is_relative_to(source) else None)
        for path in find_pending(roots)
    ]
    return [pending for pending in pendings if select(pending.test)]


_TOKEN = re.compile(r"\s*(\(|\)|[^\s()]+)")


def _keyword_filter(expression: str) -> Callable[[str], bool]:
    """``-k`` as pytest reads it, on node ids: words matched case-insensitively as substrings, combined with
    ``and``, ``or``, ``not`` and parentheses."""
    tokens = _TOKEN.findall(expression)
    words = [t for t in tokens if t not in ("(", ")", "and", "or", "not")]
    python = " ".join(t if t in ("(", ")", "and", "or", "not") else f"_w[{words.index(t)}]" for t in tokens)
    try:
        code = compile(python or "True", "<-k>", "eval")
        eval(code, {"__builtins__": {}}, {"_w": [True] * len(words)})
    except SyntaxError:
        raise UsageError(
            f"-k {expression!r} is not an expression", fixes=["e.g. -k 'refund and not slow'"]
        ) from None

    def select(nodeid: str) -> bool:
        lowered = nodeid.lower()
        found = [w.lower() in lowered for w in words]
        return bool(eval(code, {"__builtins__": {}}, {"_w": found}))

    return select


def _ask(message: str) -> str:
    """One key of ``a``/``r``/``s``/``q`` (Ctrl-C or Ctrl-D: quit)."""
    from prompt_toolkit import PromptSession  # the terminal library, only when asking
    from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent

    bindings = KeyBindings()
    for key, choice in (*_KEYS.items(), ("c-c", "quit"), ("c-d", "quit")):

        def chosen(event: KeyPressEvent, choice: str = choice) -> None:
            event.app.exit(result=choice)

        bindings.add(key)(chosen)

    @bindings.add("<any>")
    def ignored(event: KeyPressEvent) -> None:
        """Any other key: keep asking."""

    answer: str = PromptSession[str]().prompt(message, key_bindings=bindings)
    return answer


# Review runs in a terminal only: its output is always coloured.
def _bold(text: str) -> str:
    return f"\x1b[1m{text}\x1b[0m"


def _colored(line: str) -> str:
    code = None if line.startswith(("+++", "---")) else {"+": "32", "-": "31", "@": "36"}.get(line[:1])
    return f"\x1b[{code}m{line}\x1b[0m" if code else line
