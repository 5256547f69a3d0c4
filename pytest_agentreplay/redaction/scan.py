"""The final scan: where a value still holds what redaction would change, as JSON paths.

Defined through redaction itself (a value and its redacted form compared), so the scan before a write,
``agentreplay verify`` and the reports see the same decoded views (base64 decoded, nested JSON, joined
streams, multipart parts) and can never disagree with it.
"""

from __future__ import annotations

import json
import re

from ..core.constants import REDACTED
from .protocol import Redacting
from .rules import BODY_KINDS, is_body, is_header_pair

_PLAIN_KEY = re.compile(r"[A-Za-z_$][A-Za-z0-9_\-$]*")


def changed_paths(redactor: Redacting, value: object, redacted: object, path: str, found: list[str]) -> None:
    if value == redacted:
        return
    if isinstance(value, dict) and isinstance(redacted, dict):
        if is_body(value):
            changed = [k for k in BODY_KINDS if k in value and redacted.get(k) != value[k]]
            found.extend(_child_path(path, k) for k in changed or ["content_type"])
            return
        for k, v in value.items():
            child = _child_path(path, str(k))
            new_key = redactor.redact_string(k, keys=False) if isinstance(k, str) else k
            if new_key != k:
                found.append(f"{child} (key)")
            changed_paths(redactor, v, redacted.get(new_key), child, found)
        return
    if isinstance(value, list) and isinstance(redacted, list) and len(value) == len(redacted):
        if is_header_pair(value) and redacted[1] == REDACTED:
            found.append(f"{path or '$'}[1]")
            return
        for i, (v, r) in enumerate(zip(value, redacted, strict=True)):
            changed_paths(redactor, v, r, f"{path}[{i}]", found)
        return
    found.append(path or "$")


def _child_path(path: str, key: str) -> str:
    if _PLAIN_KEY.fullmatch(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{json.dumps(key, ensure_ascii=False)}]"


def merge_spans(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(s for s in spans if s[1] > s[0]):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged
