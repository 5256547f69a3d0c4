"""The failure text a developer reads: what drifted, per event and field, and how to fix it. Deterministic
(no timestamps, no dict-order or set-order dependence) so it can be snapshot-tested."""

from __future__ import annotations

from typing import Final

from ..core.commands import update_command
from .result import Difference, DriftResult
from .rules import ORDER, PRESENCE, generalize_path, split_path
from .text import focused_diff, format_value, is_long, visible

MAX_RULE_SUGGESTIONS: Final = 5
# A whole event's difference: its title, and what it says (a moved event says where it went).
_KIND_TITLE: Final = {
    "inserted": ("inserted", "replayed, not recorded"),
    "missing": ("missing", "recorded, not replayed"),
    "moved": ("order changed", ""),
}


def _plural(n: int, word: str) -> str:
    return f"{n} {word if n == 1 else word + 's'}"


def headline(result: DriftResult, *, test: str, cassette: str, mode: str) -> str:
    if not result.compared:
        return f"{test}: not compared (cassette {cassette}, mode {mode})"
    regressions = len(result.regressions)
    expected = len(result.expected)
    if not regressions and not expected:
        return f"{test}: no drift (cassette {cassette}, mode {mode})"
    return (
        f"{test}: {_plural(regressions, 'regression')}, "
        f"{_plural(expected, 'expected difference')} (cassette {cassette}, mode {mode})"
    )


def _seq(value: int | None) -> str:
    return "-" if value is None else str(value)


def _value_lines(diff: Difference) -> list[str]:
    tag = f"[{diff.verdict}, {diff.rule.source} rule {diff.rule.selector}]"
    if diff.kind in _KIND_TITLE and diff.path in (PRESENCE, ORDER):
        title, detail = _KIND_TITLE[diff.kind]
        if diff.kind == "moved" and diff.seq_recorded == diff.seq_replayed:
            # Same place, yet unaligned: one side ran it inside an order-insensitive group of concurrent
            # calls (data.group) and the other did not, so the two runs group their steps differently.
            detail = (
                f"seq {_seq(diff.seq_recorded)} on both sides, but its order-insensitive group differs "
                "(concurrent calls in one run, sequential in the other)"
            )
        elif diff.kind == "moved":
            detail = f"was seq {_seq(diff.seq_recorded)}, now seq {_seq(diff.seq_replayed)}"
        return [f"  {title}: {detail}  {tag}"]
    path = visible(diff.path)
    if is_long(diff.recorded) or is_long(diff.replayed):
        lines = [f"  {path}:  {tag}"]
        lines.extend(f"      {visible(line)}" for line in focused_diff(diff.recorded, diff.replayed))
        return lines
    return [f"  {path}: {format_value(diff.recorded)} -> {format_value(diff.replayed)}  {tag}"]


def _suggestion(diff: Difference) -> str:
    """The narrowest rule that marks this change expected.

    A request path keeps its list indexes: ``messages[0]`` is one message of the conversation, where
    ``messages[*]`` would hide a change to every message, tool results included (and ``tools[*]`` every
    tool's definition). Elsewhere an index is where a value happened to land (``tool_calls[0]``), so the
    rule covers the list. The comment names what a request path is (``# system prompt``)."""
    tokens = diff.path_tokens or split_path(diff.path)
    if diff.path in (PRESENCE, ORDER):
        path = diff.path
    else:
        path = generalize_path(tokens, keep_indexes=tokens[0] == "input_ref")
    # A TOML basic string: a backslash and a quote escaped first, then the control characters (``visible``).
    selector = visible(f"{diff.event_type}:{path}".replace("\\", "\\\\").replace('"', '\\"'))
    comment = f"  # {diff.subject}" if diff.subject else ""
    return f'"{selector}" = "expected"{comment}'


def render_drift(
    result: DriftResult, *, test: str, cassette: str, mode: str | None = None, update_hint: bool = True
) -> str:
    """Headline, then every drifting event (seq, type, tool/model) with each field ``recorded ->
    replayed`` and the judging rule, then how to fix it.

    ``update_hint=False`` leaves out the ``pytest --agentreplay-update`` fix: a comparison outside a
    pytest run (``agentreplay diff A B``) has no test run that could accept it."""
    mode = mode or result.mode
    lines = [headline(result, test=test, cassette=cassette, mode=mode)]
    if not result.differences:
        return lines[0]
    current: tuple[object, ...] | None = None
    for diff in result.differences:
        key = (diff.seq_recorded, diff.seq_replayed, diff.event_type)
        if key != current:
            what = visible(f"{diff.event_type} {diff.label}".rstrip())
            lines += ["", f"seq {_seq(diff.seq_recorded)} -> {_seq(diff.seq_replayed)}  {what}"]
            current = key
        summary = diff.summary
        lines += [f"  {visible(summary)}"] if summary else []
        lines += _value_lines(diff)
    if result.has_regressions:
        suggestions = list(dict.fromkeys(_suggestion(diff) for diff in result.regressions))
        shown = suggestions[:MAX_RULE_SUGGESTIONS]
        update = update_command([test], mode) if test and update_hint else None
        accept = "If the new behaviour is intended, accept it (rewrites the cassette from this run):"
        fixes = [[accept, update]] if update is not None else []
        fixes.append(
            [
                "If these differences should not fail, mark them expected in pyproject.toml:",
                "[tool.agentreplay.rules]",
                *shown,
            ]
        )
        lines += ["", "How to fix:"]
        for number, (text, *commands) in enumerate(fixes, 1):
            lines.append(f"  {number}. {text}")
            lines.extend(f"       {command}" for command in commands)
        if len(suggestions) > len(shown):
            lines.append(f"       # ... {len(suggestions) - len(shown)} more")
        lines.append("     (or pass rules= to @pytest.mark.agentreplay for this test only)")
    return "\n".join(lines)
