"""Model-comparison output: the recorded model's decisions next to the live model's (per call: tool choice,
arguments, agreement; then final answer, tokens, cost, latency, and live tool calls the cassette could not
serve), judged under the run's rules (:class:`Judging`, docs/comparison.md). ``comparison_for`` builds the
JSON-able dict, ``render_comparison`` the report section, ``summary_lines`` the session's summary.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import zip_longest
from typing import TYPE_CHECKING, Any

from ..core.documents import Document
from ..core.prices import PriceTable, tokens_of
from ..diff.text import similarity
from ..exceptions import ComparisonError, UnmatchedRequestError
from .repeats import render_repeats, verdict_line

if TYPE_CHECKING:
    from ..core.capture import RunContext
    from ..core.events import Event
    from ..diff.rules import RuleSet
    from .judge import Judge

SECTION = "agentreplay comparison"

_TEXT = ("data", "decision", "text")
# Budget pseudo path -> (what a call uses of it, its unit as reports write it).
_BUDGETS = {"@usage": ("tokens", "tokens"), "@cost": ("cost", "USD"), "@latency": ("latency_ms", "ms")}


@dataclass(frozen=True)
class Judging:
    """What judges a run beyond the two histories: its rules, the judge, the price table."""

    rules: RuleSet | None = None
    judge: Judge | None = None
    prices: PriceTable = field(default_factory=PriceTable)


def _decision(event: Event, prices: PriceTable) -> Document:
    decision = event.data.get("decision") or {}
    calls = [
        {"name": c.get("name"), "arguments": c.get("arguments")}
        for c in decision.get("tool_calls") or []
        if isinstance(c, Mapping)
    ]
    usage = event.data.get("usage")
    usage = usage if isinstance(usage, Mapping) else {}
    model = event.data.get("model")
    return {
        "model": model,
        "tool_calls": calls,
        "text": decision.get("text"),
        "input_tokens": int(usage.get("input_tokens") or 0),
        "output_tokens": int(usage.get("output_tokens") or 0),
        "tokens": tokens_of(usage),
        "cost": prices.cost(model, usage),
        "latency_ms": float(event.data.get("latency_ms") or 0.0),
    }


def _call_text(calls: list[Document], separator: str = ", ") -> str:
    return separator.join(f"{c['name']}({_args(c['arguments'])})" for c in calls) or "(no tool call)"


def _args(arguments: object) -> str:
    if isinstance(arguments, Mapping):
        # Sorted: the cassette stores arguments canonically, the live side in the model's order.
        return ", ".join(f"{k}={arguments[k]!r}" for k in sorted(arguments))
    return repr(arguments)


def _path_calls(
    rec: list[Document], liv: list[Document], judging: Judging, judged: list[Document]
) -> tuple[list[Document], list[Document]]:
    """Both sides' tool calls in order, each argument the rules ignore left out, and a live argument the
    judge passes against the recorded one in the same place written as the recorded one."""
    rules = judging.rules
    sides: tuple[list[Document], list[Document]] = ([], [])
    for side, decisions in zip(sides, (rec, liv), strict=True):
        for call in (c for d in decisions for c in d["tool_calls"]):
            args = call["arguments"]
            if rules is not None and isinstance(args, Mapping):
                args = {
                    k: v
                    for k, v in args.items()
                    if rules.judge("model.call", _argument_path(len(side), k)).verdict != "ignore"
                }
            side.append({"name": call["name"], "arguments": args})
    if rules is None or judging.judge is None:
        return sides
    for index, (r, lv) in enumerate(zip(*sides, strict=False)):
        if r["name"] != lv["name"] or not all(isinstance(s["arguments"], Mapping) for s in (r, lv)):
            continue
        for key, value in list(lv["arguments"].items()):
            rule = rules.judge("model.call", _argument_path(index, key)).rule
            recorded = r["arguments"].get(key)
            if rule.judge is None or recorded is None or recorded == value:
                continue
            verdict = judging.judge.verdict(str(recorded), str(value), *rule.judge)
            judged.append({"field": f"tool call {index + 1} {lv['name']}.{key}", **verdict})
            if verdict["pass"]:
                lv["arguments"] = {**lv["arguments"], key: recorded}
    return sides


def _argument_path(index: int, key: str) -> tuple[str, ...]:
    return ("data", "decision", "tool_calls", f"[{index}]", "arguments", key)


def _answer(final_r: str | None, final_l: str | None, judging: Judging, judged: list[Document]) -> Document:
    """Whether the live final answer is equivalent to the recorded one, under the answer's rule."""
    if final_r == final_l:
        score = 1.0
    else:
        score = 0.0 if final_r is None or final_l is None else similarity(final_r, final_l)
    out: Document = {"recorded": final_r, "live": final_l, "similarity": round(score, 3)}
    rule = judging.rules.judge("model.call", _TEXT) if judging.rules is not None else None
    if rule is not None and rule.rule.judge is not None and judging.judge is not None:
        if final_r is not None and final_l is not None and final_r != final_l:
            verdict = judging.judge.verdict(final_r, final_l, *rule.rule.judge)
            judged.append({"field": "final answer", **verdict})
            return {**out, "equivalent": verdict["pass"], "by": f"judge {rule.rule.judge[1]}"}
        return {**out, "equivalent": final_r == final_l, "by": f"judge {rule.rule.judge[1]}"}
    if rule is not None and rule.verdict == "ignore":
        return {**out, "equivalent": True, "by": "ignored by the rules"}
    if rule is not None and rule.rule.similarity is not None:
        threshold = rule.rule.similarity
        return {**out, "equivalent": score >= threshold, "by": f"similarity >= {threshold:g}"}
    return {**out, "equivalent": final_r == final_l, "by": "equality"}


def _budget_problems(rec: list[Document], liv: list[Document], rules: RuleSet | None) -> list[str]:
    """The calls whose live usage, cost or latency exceeds the recorded one by more than its rule allows."""
    if rules is None:
        return []
    problems = []
    for pseudo, (key, unit) in _BUDGETS.items():
        rule = rules.judge("model.call", (pseudo,)).rule
        if rule.max_increase is None:
            continue
        for n, (r, lv) in enumerate(zip(rec, liv, strict=False), start=1):
            before, after = r[key], lv[key]
            if before is None or after is None or before <= 0:
                continue
            if after > before * (1 + rule.max_increase):
                problems.append(
                    f"call {n}: {pseudo[1:]} {_amount(after, unit)} live vs {_amount(before, unit)} recorded "
                    f"(+{after / before - 1:.0%}), over {rule.describe()}"
                )
    return problems


def _amount(value: float, unit: str) -> str:
    if unit == "USD":
        return f"${value:.6f}"
    return f"{value:.0f} {unit}" if unit == "ms" else f"{int(value)} {unit}"


def compare_decisions(recorded: list[Event], live: list[Event], judging: Judging | None = None) -> Document:
    """The comparison of two lists of ``model.call`` events, paired in order."""
    judging = judging or Judging()
    rec = [_decision(e, judging.prices) for e in recorded]
    liv = [_decision(e, judging.prices) for e in live]
    calls: list[Document] = []
    differences: list[str] = []
    for n, (r, lv) in enumerate(zip_longest(rec, liv), start=1):
        if r is None or lv is None:
            agrees = same_args = False
            differences.append(f"call {n}: only the {'live' if r is None else 'recorded'} model made it")
        else:
            agrees = [c["name"] for c in r["tool_calls"]] == [c["name"] for c in lv["tool_calls"]]
            same_args = agrees and [c["arguments"] for c in r["tool_calls"]] == [
                c["arguments"] for c in lv["tool_calls"]
            ]
            if not same_args:
                # Shown only where the calls differ: a long run's arguments are costly to render.
                shown_r, shown_l = _call_text(r["tool_calls"]), _call_text(lv["tool_calls"])
                differences.append(
                    f"call {n}: recorded chose {shown_r}, live chose {shown_l}"
                    if not agrees
                    else f"call {n}: same tool, other arguments: recorded {shown_r}, live {shown_l}"
                )
        calls.append(
            {"n": n, "recorded": r, "live": lv, "tool_choice_agrees": agrees, "arguments_equal": same_args}
        )
    total = len(calls)
    choice_agree = sum(1 for c in calls if c["tool_choice_agrees"])
    args_equal = sum(1 for c in calls if c["arguments_equal"])
    final_r = next((d["text"] for d in reversed(rec) if d["text"]), None)
    final_l = next((d["text"] for d in reversed(liv) if d["text"]), None)
    judged: list[Document] = []
    path_r, path_l = _path_calls(rec, liv, judging, judged)
    answer = _answer(final_r, final_l, judging, judged)

    def total_of(side: list[Document], key: str) -> Any:
        return sum(d[key] for d in side)

    def cost_of(side: list[Document]) -> float | None:
        costs = [d["cost"] for d in side]
        return None if not costs or any(c is None for c in costs) else round(sum(costs), 6)

    return {
        "recorded_model": next((d["model"] for d in rec if d["model"]), None),
        "live_model": next((d["model"] for d in liv if d["model"]), None),
        "recorded_calls": len(rec),
        "live_calls": len(liv),
        "tool_choice_agreement": round(choice_agree / total, 3) if total else 1.0,
        "argument_equality": round(args_equal / total, 3) if total else 1.0,
        "agree": not differences,
        "recorded_path": _call_text(path_r, " > "),
        "path": _call_text(path_l, " > "),
        "path_agrees": path_r == path_l,
        "final_answer": {"recorded": final_r, "live": final_l, "similarity": answer["similarity"]},
        "answer": {k: answer[k] for k in ("equivalent", "by")},
        "judged": judged,
        "tokens": {
            "recorded": {"input": total_of(rec, "input_tokens"), "output": total_of(rec, "output_tokens")},
            "live": {"input": total_of(liv, "input_tokens"), "output": total_of(liv, "output_tokens")},
        },
        "cost": {"recorded": cost_of(rec), "live": cost_of(liv)},
        "latency_ms": {
            "recorded": round(total_of(rec, "latency_ms"), 1),
            "live": round(total_of(liv, "latency_ms"), 1),
        },
        "budget_problems": _budget_problems(rec, liv, judging.rules),
        "calls": calls,
        "differences": differences,
    }


def comparison_for(ctx: RunContext, judging: Judging | None = None) -> Document:
    """Recorded versus live decisions of a model-comparison run (JSON-able)."""
    recorded = [
        e for e in (ctx.recorded.events if ctx.recorded is not None else []) if e.type == "model.call"
    ]
    live = [e for e in ctx.recorder.events if e.type == "model.call"]
    out = compare_decisions(recorded, live, judging)
    out["test"] = ctx.settings.nodeid or ""
    # Live decisions the cassette could not serve a tool result for: reported, never executed.
    unserved = [f for f in ctx.failures if isinstance(f, UnmatchedRequestError)]
    out["unserved_tool_calls"] = [{"headline": f.headline, "closest": list(f.evidence)} for f in unserved]
    if unserved:
        out["agree"] = False
        out["path_agrees"] = False
    out["diverged"] = _divergence(out, unserved)
    return out


def _divergence(c: Document, unserved: list[UnmatchedRequestError]) -> str | None:
    """Where the live run left the recorded path: the first differing call, or the unrecorded write it
    ended at (never sent)."""
    writes = [f for f in unserved if any(line.strip() == "classified as: write" for line in f.evidence)]
    if writes:
        return f"diverged at call {c['live_calls']}: unrecorded write ({writes[0].headline})"
    first = next((k for k in c["calls"] if not (k["tool_choice_agrees"] and k["arguments_equal"])), None)
    if first is not None:
        return f"diverged at call {first['n']}"
    if unserved:
        return f"diverged at call {c['live_calls']}: {unserved[0].headline}"
    return None


def budget_error(comparison: Document, ctx: RunContext) -> ComparisonError | None:
    """The failure for the calls over a ``max_increase`` rule, naming each call and its figures."""
    problems = comparison.get("budget_problems") or []
    if not problems:
        return None
    return ComparisonError(
        f"{len(problems)} live model call(s) of {ctx.settings.nodeid or 'the test'} over a budget rule",
        evidence=problems,
        cassette=ctx.cassette,
        mode="model-comparison",
        fixes=[
            "keep the recorded model, or accept the increase by raising max_increase on the rule",
        ],
    )


def render_comparison(comparison: Document) -> str:
    """The text of the test's ``agentreplay comparison`` report section."""
    c = comparison
    tokens = c["tokens"]
    cost = c.get("cost") or {}
    lines = [
        f"model comparison: recorded {c.get('recorded_model')} vs live {c.get('live_model')}",
        f"  model calls: recorded {c['recorded_calls']}, live {c['live_calls']}",
        f"  tool choice agreement: {c['tool_choice_agreement']:.0%}   "
        f"argument equality: {c['argument_equality']:.0%}",
        f"  final answer similarity: {c['final_answer']['similarity']:.0%}",
        f"  tokens in/out: recorded {tokens['recorded']['input']}/{tokens['recorded']['output']}, "
        f"live {_count(tokens['live']['input'])}/{_count(tokens['live']['output'])}"
        + (" (mean of a run)" if c.get("runs", 1) > 1 else ""),
        f"  cost: recorded {_dollars(cost.get('recorded'))}, live {_dollars(cost.get('live'))}",
        f"  latency: recorded {c['latency_ms']['recorded']:.0f} ms, live {c['latency_ms']['live']:.0f} ms",
    ]
    if c.get("runs", 1) > 1:
        lines.extend(render_repeats(c))
        lines.append("  run 1 in detail:")
    for call in c["calls"]:
        mark = "==" if call["tool_choice_agrees"] and call["arguments_equal"] else "!="
        left, right = _decided(call["recorded"]), _decided(call["live"])
        lines.append(f"  {call['n']:>3}. recorded {left}  {mark}  live {right}")
    if c["differences"]:
        lines.append("  where they differ:")
        lines.extend(f"    - {d}" for d in c["differences"])
    if c.get("diverged"):
        lines.append(f"  {c['diverged']}")
    for item in c.get("unserved_tool_calls") or []:
        lines.append(f"  not executed: {item['headline']}")
        lines.extend(f"      {line}" for line in item["closest"])
    for judged in c.get("judged") or []:
        source = "stored verdict" if judged["stored"] else "judge"
        outcome = "pass" if judged["pass"] else "fail"
        lines.append(f"  judged {judged['field']}: {outcome} ({source}): {judged['reason']}")
    lines.extend(f"  over budget: {p}" for p in c.get("budget_problems") or [])
    if not c["differences"] and not c.get("unserved_tool_calls"):
        lines.append("  the live model decided the same as the recorded one")
    return "\n".join(lines)


def _decided(decision: Document | None) -> str:
    if not decision:
        return "(none)"
    if not decision["tool_calls"] and decision.get("text"):
        return f"answer {decision['text']!r}"
    return _call_text(decision["tool_calls"])


def _dollars(value: object) -> str:
    return f"${value:.6f}" if isinstance(value, int | float) else "unknown (no price for the model)"


def _count(value: float) -> str:
    # A repeated test's live tokens are the mean of its runs: a fraction only then.
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"


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
        f"  tokens recorded {_count(tok_r)}, live {_count(tok_l)}; "
        f"latency recorded {lat_r:.0f} ms, live {lat_l:.0f} ms",
    ]
    for c in differing:
        if c.get("runs", 1) > 1:
            continue
        first = (c["differences"] or [u["headline"] for u in c.get("unserved_tool_calls") or []] or ["?"])[0]
        lines.append(f"  differs: {c.get('test') or '?'}: {first}")
    for c in items:
        if c.get("runs", 1) > 1:
            lines.append(f"  {c.get('test') or '?'}: {verdict_line(c)}")
    return lines
