"""What a model call costs: US dollars per million tokens by the longest table key the model name starts
with (a Bedrock id without its region and vendor prefixes), built-in list prices as of :data:`PRICES_DATE`
under the project's ``[tool.agentreplay.prices]``. A model the table lacks has no cost, never a guess."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from . import settings_check as check

PRICES_DATE: Final = "2025-09-01"


class Price:
    """US dollars per million tokens of one model."""

    __slots__ = ("cached", "input", "output")

    def __init__(self, input: float, output: float, cached: float | None = None) -> None:
        self.input = input
        self.output = output
        self.cached = input if cached is None else cached


# fmt: off
_ROWS: Final[dict[str, tuple[float, float, float | None]]] = {
    # OpenAI
    "gpt-5": (1.25, 10.0, 0.125), "gpt-5-mini": (0.25, 2.0, 0.025), "gpt-5-nano": (0.05, 0.4, 0.005),
    "gpt-4.1": (2.0, 8.0, 0.5), "gpt-4.1-mini": (0.4, 1.6, 0.1), "gpt-4.1-nano": (0.1, 0.4, 0.025),
    "gpt-4o": (2.5, 10.0, 1.25), "gpt-4o-mini": (0.15, 0.6, 0.075),
    "o3": (2.0, 8.0, 0.5), "o3-mini": (1.1, 4.4, 0.55), "o4-mini": (1.1, 4.4, 0.275),
    # Anthropic
    "claude-opus-4": (15.0, 75.0, 1.5), "claude-sonnet-4": (3.0, 15.0, 0.3),
    "claude-sonnet-4-5": (3.0, 15.0, 0.3), "claude-haiku-4-5": (1.0, 5.0, 0.1),
    "claude-3-7-sonnet": (3.0, 15.0, 0.3), "claude-3-5-sonnet": (3.0, 15.0, 0.3),
    "claude-3-5-haiku": (0.8, 4.0, 0.08), "claude-3-haiku": (0.25, 1.25, 0.03),
    # Gemini (prompts up to 200k tokens)
    "gemini-2.5-pro": (1.25, 10.0, 0.31), "gemini-2.5-flash": (0.3, 2.5, 0.075),
    "gemini-2.5-flash-lite": (0.1, 0.4, 0.025), "gemini-2.0-flash": (0.1, 0.4, 0.025),
    # Bedrock's own models (Anthropic, Meta and Mistral ones on Bedrock are found by their model names)
    "amazon.nova-pro": (0.8, 3.2, 0.2), "amazon.nova-lite": (0.06, 0.24, 0.015),
    "amazon.nova-micro": (0.035, 0.14, 0.00875), "llama3-1-70b-instruct": (0.72, 0.72, None),
    "llama3-1-8b-instruct": (0.22, 0.22, None),
    # Mistral
    "mistral-large": (2.0, 6.0, None), "mistral-medium": (0.4, 2.0, None), "mistral-small": (0.1, 0.3, None),
    "codestral": (0.3, 0.9, None), "mistral.mistral-large": (2.0, 6.0, None),
}
# fmt: on
BUILT_IN: Final = MappingProxyType({name: Price(*row) for name, row in _ROWS.items()})

# Bedrock model ids: an inference profile's region, then the vendor.
_REGIONS: Final = ("us.", "eu.", "apac.", "global.")
_VENDORS: Final = ("anthropic.", "meta.", "mistral.", "cohere.", "ai21.")

EXAMPLE: Final = '"gpt-4o" = {input = 2.5, output = 10.0, cached = 1.25}'


def parse_prices(value: object, origin: check.Origin) -> Mapping[str, Price]:
    """``[tool.agentreplay.prices]``: model -> {input, output, cached?}, dollars per million tokens."""
    if not isinstance(value, Mapping):
        raise check.invalid(origin, value, f"a table of model = prices, e.g. {EXAMPLE}")
    out: dict[str, Price] = {}
    for model, row in value.items():
        where = check.Origin(f"{origin.key}.{model}", origin.place)
        if not isinstance(row, Mapping) or not {"input", "output"} <= set(row) or set(row) - set(_KEYS):
            raise check.invalid(where, row, f"a table with input, output and optionally cached: {EXAMPLE}")
        numbers = {}
        for key in _KEYS:
            number = row.get(key)
            if number is None:
                continue
            if isinstance(number, bool) or not isinstance(number, int | float) or number < 0:
                raise check.invalid(where, row, f"{key}: US dollars per million tokens, a number >= 0")
            numbers[key] = float(number)
        out[str(model)] = Price(numbers["input"], numbers["output"], numbers.get("cached"))
    return MappingProxyType(out)


_KEYS: Final = ("input", "output", "cached")


class PriceTable:
    """The built-in prices with the project's on top (the project's win)."""

    __slots__ = ("prices",)

    def __init__(self, project: Mapping[str, Price] | None = None) -> None:
        # Without project prices, the built-in table itself (read only): not a copy of it per test.
        self.prices: Mapping[str, Price] = {**BUILT_IN, **project} if project else BUILT_IN

    def price_of(self, model: object) -> Price | None:
        if not isinstance(model, str) or not model:
            return None
        name = model.lower()
        found = self.prices.get(model) or self.prices.get(name)
        if found is not None:
            return found
        for prefix in _REGIONS:
            name = name.removeprefix(prefix)
        candidates = (name, *(name.removeprefix(v) for v in _VENDORS if name.startswith(v)))
        best = ""
        for key in self.prices:
            low = key.lower()
            if len(low) > len(best) and any(c.startswith(low) for c in candidates):
                best = key
        return self.prices[best] if best else None

    def cost(self, model: object, usage: Mapping[str, object]) -> float | None:
        """US dollars of one call's ``usage`` (a model call event's ``data.usage``); None: no price known."""
        price = self.price_of(model)
        if price is None:
            return None
        inp, out = _int(usage.get("input_tokens")), _int(usage.get("output_tokens"))
        # OpenAI, Gemini and Bedrock count cached input inside the input; Anthropic counts reads beside it.
        cached = _int(usage.get("cached_input_tokens"))
        plain = max(inp - cached, 0)
        cached += _int(usage.get("cache_read_input_tokens"))
        plain += _int(usage.get("cache_creation_input_tokens"))
        return (plain * price.input + cached * price.cached + out * price.output) / 1_000_000


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def tokens_of(usage: Mapping[str, object]) -> int:
    """Every token a call's usage counts (input, cache reads and writes, output)."""
    return sum(
        _int(usage.get(k))
        for k in ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    )
