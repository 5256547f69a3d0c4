"""What a person calls a step of a history: the words differences and drift reports name events by."""

from __future__ import annotations

from collections.abc import Mapping


def event_label(event: Mapping[str, object]) -> str:
    """What a person calls the step: tool name, model, policy, effect kind and target, HTTP request."""
    etype = event.get("type")
    data = event.get("data") if isinstance(event.get("data"), Mapping) else {}
    tool = event.get("tool") if isinstance(event.get("tool"), Mapping) else {}
    effect = event.get("effect") if isinstance(event.get("effect"), Mapping) else {}
    assert isinstance(data, Mapping) and isinstance(tool, Mapping) and isinstance(effect, Mapping)
    parts: list[object]
    if etype in ("tool.call", "tool.result"):
        parts = [tool.get("name")]
    elif etype == "model.call":
        model = data.get("model")
        where = " ".join(str(p) for p in (data.get("provider"), data.get("endpoint")) if p)
        parts = [model, f"({where})" if where and model else where]
    elif etype == "effect":
        parts = [effect.get("kind"), f"-> {effect['target']}" if effect.get("target") else None]
    elif etype == "policy.decision":
        parts = [data.get("policy")]
    elif etype == "approval":
        parts = [data.get("subject")]
    elif etype == "http":
        parts = [data.get("method"), data.get("url")]
    elif etype == "retrieval":
        parts = [data.get("corpus_version")]
    elif etype == "error":
        parts = [data.get("kind") or data.get("type")]
    elif etype == "state.update":
        parts = [data.get("node") or data.get("label")]
    else:
        parts = []
    if tool.get("idempotency_key") and etype in ("effect", "tool.call"):
        parts.append(f"[key {tool['idempotency_key']}]")
    return " ".join(str(p) for p in parts if p)


def identity_text(event: object) -> str:
    """A whole event as a difference shows it: its type and label."""
    if not isinstance(event, Mapping):  # never: the callers pass one side's event, not ABSENT
        return str(event)
    return f"{event.get('type')} {event_label(event)}".strip()
