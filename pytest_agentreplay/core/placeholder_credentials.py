"""Placeholder SDK credentials while a test replays (the SDKs refuse to build a client without one, though
nothing is sent): an unset credential variable is set for the test's duration, then removed; one the
environment sets is never touched. Recording and model-comparison never invent one."""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from typing import Final

# A value no provider issues, named so that one met in a log or an error says where it came from.
PLACEHOLDER: Final = "agentreplay-placeholder-not-a-key"

# The SDKs' own variables, by provider (the order the README lists them).
CREDENTIAL_VARIABLES: Final = (
    "OPENAI_API_KEY",  # openai
    "AZURE_OPENAI_API_KEY",  # openai's AzureOpenAI
    "ANTHROPIC_API_KEY",  # anthropic
    "GEMINI_API_KEY",  # google-genai
    "GOOGLE_API_KEY",  # google-genai (the older name)
    "MISTRAL_API_KEY",  # mistralai
    "CO_API_KEY",  # cohere
    "AWS_ACCESS_KEY_ID",  # boto3 (Bedrock)
    "AWS_SECRET_ACCESS_KEY",  # boto3 (Bedrock)
)


class PlaceholderCredentials:
    """The placeholders one test set; :meth:`remove` takes them back out (those still holding ours)."""

    __slots__ = ("_environ", "names")

    def __init__(self, environ: MutableMapping[str, str] | None = None) -> None:
        self._environ = os.environ if environ is None else environ
        self.names: tuple[str, ...] = ()

    def provide(self) -> tuple[str, ...]:
        """Set every unset (or empty) credential variable to the placeholder; the names set."""
        env = self._environ
        names = tuple(name for name in CREDENTIAL_VARIABLES if not env.get(name))
        for name in names:
            env[name] = PLACEHOLDER
        self.names = names
        return names

    def remove(self) -> None:
        env = self._environ
        for name in self.names:
            # The test may have set its own value meanwhile: that one is the test's to keep or clean.
            if env.get(name) == PLACEHOLDER:
                del env[name]
        self.names = ()
