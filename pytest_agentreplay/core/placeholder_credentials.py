"""Placeholder SDK credentials while a test replays (the SDKs refuse to build a client without one, though
nothing is sent): an unset credential variable is set, then removed; one the environment sets is never
touched. Recording and model-comparison never invent one. The session keeps them from one replaying test to
the next (cheaper than setting nine variables per test), and removes them before a test that does not get
them and after the last test."""

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
    """The placeholders set for the replaying tests; :meth:`remove` takes them back out (those still holding
    ours)."""

    __slots__ = ("_environ", "names")

    def __init__(self, environ: MutableMapping[str, str] | None = None) -> None:
        self._environ = os.environ if environ is None else environ
        # The variables holding a placeholder this object set (and has not removed since).
        self.names: tuple[str, ...] = ()

    def provide(self) -> tuple[str, ...]:
        """Set every unset (or empty) credential variable to the placeholder; the names holding ours. A
        placeholder still set from the last call is kept as it is: the same as removing it and setting it
        again, without changing the environment."""
        env, held = self._environ, self.names
        names = []
        for name in CREDENTIAL_VARIABLES:
            value = env.get(name)
            if not value:
                env[name] = PLACEHOLDER
            elif value != PLACEHOLDER or name not in held:
                # The environment's value, or one a test set: never ours to change.
                continue
            names.append(name)
        self.names = tuple(names)
        return self.names

    def remove(self) -> None:
        env = self._environ
        for name in self.names:
            # The test may have set its own value meanwhile: that one is the test's to keep or clean.
            if env.get(name) == PLACEHOLDER:
                del env[name]
        self.names = ()
