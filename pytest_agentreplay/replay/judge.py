"""Judged values of a model comparison: a ``judge`` rule asks a judge model whether the live value passes
the rubric against the recorded one (docs/comparison.md, Judged answers). Asked after the run has ended,
so the call is never in the agent's history; the network guard lets only that host through.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

from .. import guard
from ..core.documents import Document
from ..exceptions import ConfigError

STORE_DIR: Final = ".agentreplay-judge"

_SYSTEM: Final = (
    "You grade an AI agent's output against a reference output. Apply the rubric strictly. Answer with one "
    'JSON object and nothing else: {"pass": true or false, "reason": "one sentence"}.'
)
# Where each provider's SDK takes its base URL from a call's URL (the part before the endpoint path).
_ENDPOINT_PATHS: Final = {"openai": ("/chat/completions", "/responses"), "anthropic": ("/v1/messages",)}
_KEYS: Final = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


def verdict_key(recorded: str, live: str, rubric: str, model: str) -> str:
    return hashlib.sha256(json.dumps([recorded, live, rubric, model]).encode("utf-8")).hexdigest()


@dataclass
class Judge:
    """Asks one provider's judge model, through a store of verdicts already given."""

    store: Path
    provider: str | None
    url: str | None
    _: KW_ONLY
    redact: Callable[[str], str] = lambda text: text
    cassette: str | None = None
    asked: int = field(default=0, init=False)

    def verdict(self, recorded: str, live: str, rubric: str, model: str) -> Document:
        """``{"pass": bool, "reason": str, "stored": bool}``: the stored verdict, else the judge's answer."""
        key = verdict_key(recorded, live, rubric, model)
        path = self.store / STORE_DIR / f"{key}.json"
        try:
            stored = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            stored = None
        if isinstance(stored, dict) and isinstance(stored.get("pass"), bool):
            return {"pass": stored["pass"], "reason": str(stored.get("reason") or ""), "stored": True}
        passed, reason = self._ask(recorded, live, rubric, model)
        self.asked += 1
        record = {"rubric": rubric, "judge_model": model, "pass": passed, "reason": self.redact(reason)}
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".tmp")
        partial.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        partial.replace(path)
        return {"pass": passed, "reason": record["reason"], "stored": False}

    def _ask(self, recorded: str, live: str, rubric: str, model: str) -> tuple[bool, str]:
        provider, base = self._where()
        prompt = f"Rubric: {rubric}\n\nReference output:\n{recorded}\n\nOutput to grade:\n{live}"
        key = os.environ.get(_KEYS[provider])
        if not key:
            raise self._error(
                f"the judge ({model}) needs {_KEYS[provider]} in the environment",
                [f"set {_KEYS[provider]} for the {provider} SDK the judge is asked through"],
            )
        with guard.permitting(urlsplit(base).hostname or ""):
            text = _call(provider, base, key, model, prompt)
        return _parse(text)

    def _where(self) -> tuple[str, str]:
        provider, url = self.provider, self.url
        if provider not in _ENDPOINT_PATHS or not url:
            raise self._error(
                "a judge rule needs the run's model calls to go to an OpenAI or Anthropic endpoint; this "
                f"run's went to {provider or 'no provider'}",
                ["judge the answers of an OpenAI or Anthropic agent, or remove the judge rule"],
            )
        for suffix in _ENDPOINT_PATHS[provider]:
            if suffix in url:
                return provider, url.split(suffix, 1)[0]
        return provider, url.rsplit("/", 1)[0]

    def _error(self, headline: str, fixes: list[str]) -> ConfigError:
        return ConfigError(headline, cassette=self.cassette, mode="model-comparison", fixes=fixes)


def _call(provider: str, base: str, key: str, model: str, prompt: str) -> str:
    """One judge call through the provider's SDK (imported here: only a comparison with judge rules)."""
    if provider == "anthropic":
        import anthropic

        client: Any = anthropic.Anthropic(base_url=base, api_key=key, max_retries=1)
        message = client.messages.create(
            model=model,
            max_tokens=300,
            temperature=0,
            system=_SYSTEM,
            messages=[{"role": "user", "content": prompt}],
        )
        return "".join(getattr(block, "text", "") for block in message.content)
    import openai

    client = openai.OpenAI(base_url=base, api_key=key, max_retries=1)
    completion = client.chat.completions.create(
        model=model,
        temperature=0,
        messages=[{"role": "system", "content": _SYSTEM}, {"role": "user", "content": prompt}],
    )
    return str(completion.choices[0].message.content or "")


_JSON_OBJECT: Final = re.compile(r"\{.*\}", re.DOTALL)


def _parse(text: str) -> tuple[bool, str]:
    """The judge's pass and reason; an answer that is not the asked-for JSON fails, saying so."""
    found = _JSON_OBJECT.search(text)
    try:
        answer = json.loads(found.group(0)) if found else None
    except ValueError:
        answer = None
    if isinstance(answer, dict) and isinstance(answer.get("pass"), bool):
        return answer["pass"], str(answer.get("reason") or "")
    return False, f"the judge did not answer with a verdict: {text[:200]!r}"
