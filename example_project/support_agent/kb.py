"""The knowledge base: a small local corpus shipped as data and a deterministic keyword search."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data" / "kb.json"
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    {"a", "an", "the", "of", "to", "is", "for", "and", "or", "by", "up", "in", "on", "no", "we"}
)


@dataclass(frozen=True)
class Document:
    id: str
    title: str
    body: str


@dataclass(frozen=True)
class KnowledgeBase:
    version: str
    documents: tuple[Document, ...]

    def search(self, query: str, limit: int = 3) -> list[tuple[Document, float]]:
        """Documents sharing words with ``query``, best first (tf-idf-like score, ties by id)."""
        terms = _terms(query)
        n = len(self.documents)
        scored: list[tuple[Document, float]] = []
        for doc in self.documents:
            words = _terms(doc.title + " " + doc.title + " " + doc.body)
            score = 0.0
            for term in set(terms):
                tf = words.count(term)
                if tf:
                    df = sum(1 for d in self.documents if term in _terms(d.title + " " + d.body))
                    score += tf * math.log(1 + n / df)
            if score > 0:
                scored.append((doc, round(score, 4)))
        scored.sort(key=lambda item: (-item[1], item[0].id))
        return scored[:limit]


def _terms(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP]


@cache
def load_kb(path: Path = DATA) -> KnowledgeBase:
    raw: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    docs = tuple(Document(d["id"], d["title"], d["body"]) for d in raw["documents"])
    return KnowledgeBase(str(raw["version"]), docs)
