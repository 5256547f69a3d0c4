"""Model-comparison output: the recorded model's decisions next to the live model's, per test and
aggregated over the session.

``comparison_for(ctx)`` builds a JSON-able dict from the two histories (recorded ``model.call``
events versus the ones the live run made): per call the tool choice and arguments of each side,
whether they agree, then final-answer similarity, token usage and latency totals, and the live tool
calls the cassette held no result for (not executed; reported with the closest recorded call).
``render_comparison`` turns it into the text of the test's report section; ``summary_lines``
aggregates many of them for the terminal summary.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..core.documents import Document
from ..diff.text import similarity
from ..exceptions import UnmatchedRequestError

if TYPE_CHECKING:
    from ..core.capture import RunContext
    from ..core.events import Event

SECTION = "agentreplay comparison"
PROPERTY = "agentreplay-comparison"


def _decision(event: Event) -> Document:
    decision = event.data.get("decision") or {}
    calls = [
        {"name": c.get("name"), "arguments": c.get("arguments")}
        for c in decision.get("tool_calls") or []
        if isinstance(c, Mapping)
    ]
    usage = event.data.get("usage") or {}
    return {
        "model": event.data.get("model"),
        "tool_calls": calls,
        "text": decision.get("text"),
        "input_tokens": int(usage.get("input_tokens") or 0),
        "output_tokens": int(usage.get("output_tokens") or 0),
        "latency_ms": float(event.data.get("latency_ms") or 0.0),
    }


def _call_text(calls: list[Document]) -> str:
    if not calls:
        return "(no tool call)"
    return ", ".join(f"{c['name']}({_args(c['arguments'])})" for c in calls)


def _args(arguments: object) -> str:
    if isinstance(arguments, Mapping):
        # Sorted: the cassette stores arguments canonically, the live side in the model's order.
        return ", ".join(f"{k}={arguments[k]!r}" for k in sorted(arguments))
    return repr(arguments)


def compare_decisions(recorded: list[Event], live: list[Event]) -> Document:
    """The comparison of two lists of ``model.call`` events, paired in order."""
    rec = [_decision(e) for e in recorded]
    liv = [_decision(e) for e in live]
    calls: list[Document] = []
    differences: list[str] = []
    choice_agree = args_equal = 0
    for n in range(max(len(rec), len(liv))):
        r = rec[n] if n < len(rec) else None
        lv = liv[n] if n < len(liv) else None
        entry: Document = {"n": n + 1, "recorded": r, "live": lv}
        if r is None or lv is None:
            entry["tool_choice_agrees"] = entry["arguments_equal"] = False
            side = "live" if r is None else "recorded"
            differences.append(f"call {n + 1}: only the {side} model made it")
        else:
            names_r = [c["name"] for c in r["tool_calls"]]
            names_l = [c["name"] for c in lv["tool_calls"]]
            agrees = names_r == names_l
            same_args = agrees and [c["arguments"] for c in r["tool_calls"]] == [
                c["arguments"] for c in lv["tool_calls"]
            ]
            entry["tool_choice_agrees"] = agrees
            entry["arguments_equal"] = same_args
            choice_agree += agrees
            args_equal += same_args
            if not agrees:
                differences.append(
                    f"call {n + 1}: recorded chose {_call_text(r['tool_calls'])}, "
                    f"live chose {_call_text(lv['tool_calls'])}"
                )
            elif not same_args:
                differences.append(
                    f"call {n + 1}: same tool, other arguments: recorded {_call_text(r['tool_calls'])}, "
                    f"live {_call_text(lv['tool_calls'])}"
                )
        calls.append(entry)
    total = max(len(rec), len(liv))
    final_r = next((d["text"] for d in reversed(rec) if d["text"]), None)
    final_l = next((d["text"] for d in reversed(liv) if d["text"]), None)
    if final_r is None and final_l is None:
        final_similarity = 1.0
    elif final_r is None or final_l is None:
        final_similarity = 0.0
    else:
        final_similarity = round(similarity(final_r, final_l), 3)

    def total_of(side: list[Document], key: str) -> Any:
        return sum(d[key] for d in side)

    return {
        "recorded_model": next((d["model"] for d in rec if d["model"]), None),
        "live_model": next((d["model"] for d in liv if d["model"]), None),
        "recorded_calls": len(rec),
        "live_calls": len(liv),
        "tool_choice_agreement": round(choice_agree / total, 3) if total else 1.0,
        "argument_equality": round(args_equal / total, 3) if total else 1.0,
        "agree": not differences,
        "final_answer": {"recorded": final_r, "live": final_l, "similarity": final_similarity},
        "tokens": {
            "recorded": {"input": total_of(rec, "input_tokens"), "output": total_of(rec, "output_tokens")},
            "live": {"input": total_of(liv, "input_tokens"), "output": total_of(liv, "output_tokens")},
        },
        "latency_ms": {
            "recorded": round(total_of(rec, "latency_ms"), 1),
            "live": round(total_of(liv, "latency_ms"), 1),
        },
        "calls": calls,
        "differences": differences,
    }


def comparison_for(ctx: RunContext) -> Document:
    """Recorded versus live decisions of a model-comparison run (JSON-able)."""
    recorded = [
        e for e in (ctx.recorded.events if ctx.recorded is not None else []) if e.type == "model.call"
    ]
    live = [e for e in ctx.recorder.events if e.type == "model.call"]
    out = compare_decisions(recorded, live)
    out["test"] = ctx.settings.nodeid or ""
    # Live decisions the cassette could not serve a tool result for: reported, never executed.
    unserved = [f for f in ctx.failures if isinstance(f, UnmatchedRequestError)]
    out["unserved_tool_calls"] = [{"headline": f.headline, "closest": list(f.evidence)} for f in unserved]
    if unserved:
        out["agree"] = False
    return out


def render_comparison(comparison: Document) -> str:
    """The text of the test's ``agentreplay comparison`` report section."""
    c = comparison
    tokens = c["tokens"]
    lines = [
        f"model comparison: recorded {c.get('recorded_model')} vs live {c.get('live_model')}",
        f"  model calls: recorded {c['recorded_calls']}, live {c['live_calls']}",
        f"  tool choice agreement: {c['tool_choice_agreement']:.0%}   "
        f"argument equality: {c['argument_equality']:.0%}",
        f"  final answer similarity: {c['final_answer']['similarity']:.0%}",
        f"  tokens in/out: recorded {tokens['recorded']['input']}/{tokens['recorded']['output']}, "
        f"live {tokens['live']['input']}/{tokens['live']['output']}",
        f"  latency: recorded {c['latency_ms']['recorded']:.0f} ms, live {c['latency_ms']['live']:.0f} ms",
    ]
    for call in c["calls"]:
        r, lv = call["recorded"], call["live"]
        mark = "==" if call["tool_choice_agrees"] and call["arguments_equal"] else "!="
        left = _call_text(r["tool_calls"]) if r else "(none)"
        right = _call_text(lv["tool_calls"]) if lv else "(none)"
        if r and not r["tool_calls"] and r.get("text"):
            left = f"answer {r['text']!r}"
        if lv and not lv["tool_calls"] and lv.get("text"):
            right = f"answer {lv['text']!r}"
        lines.append(f"  {call['n']:>3}. recorded {left}  {mark}  live {right}")
    if c["differences"]:
        lines.append("  where they differ:")
        lines.extend(f"    - {d}" for d in c["differences"])
    for item in c.get("unserved_tool_calls") or []:
        lines.append(f"  not executed: {item['headline']}")
        lines.extend(f"      {line}" for line in item["closest"])
    if not c["differences"] and not c.get("unserved_tool_calls"):
        lines.append("  the live model decided the same as the recorded one")
    return "\n".join(lines)


def summary_lines(comparisons: Iterable[Document]) -> list[str]:
    """Session aggregate for the terminal summary (one line per differing test, then totals)."""
    items = list(comparisons)
    if not items:
        return []
    calls = sum(max(c["recorded_calls"], c["live_calls"]) for c in items)
    agree = sum(sum(1 for k in c["calls"] if k["tool_choice_agrees"]) for c in items)
    equal = sum(sum(1 for k in c["calls"] if k["arguments_equal"]) for c in items)
    sims = [c["final_answer"]["similarity"] for c in items]
    tok_r = sum(c["tokens"]["recorded"]["input"] + c["tokens"]["recorded"]["output"] for c in items)
    tok_l = sum(c["tokens"]["live"]["input"] + c["tokens"]["live"]["output"] for c in items)
    lat_r = sum(c["latency_ms"]["recorded"] for c in items)
    lat_l = sum(c["latency_ms"]["live"] for c in items)
    differing = [c for c in items if not c.get("agree", True)]
    models = sorted({f"{c.get('recorded_model')} -> {c.get('live_model')}" for c in items})
    lines = [
        f"model comparison ({', '.join(models)}): {len(items)} test(s), "
        f"{len(items) - len(differing)} decided the same, {len(differing)} differ",
        f"  tool choice agreement {agree}/{calls}, argument equality {equal}/{calls}, "
        f"mean final answer similarity {sum(sims) / len(sims):.0%}",
        f"  tokens recorded {tok_r}, live {tok_l}; latency recorded {lat_r:.0f} ms, live {lat_l:.0f} ms",
    ]
    for c in differing:
        first = (c["differences"] or [u["headline"] for u in c.get("unserved_tool_calls") or []] or ["?"])[0]
        lines.append(f"  differs: {c.get('test') or '?'}: {first}")
    return lines
