"""The comparison of a replayed run with its recording, in one call: the rules of every layer, the
payload resolver, the alignment and the judgement (``compare_histories``).

The caller hands over both histories as JSON documents, each redacted the way a saved cassette is (the
replayed side by ``replay.replayed_history.redacted_replay``), and the sources of the rule layers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple, Protocol

from ..core.documents import Document
from ..core.events import PayloadRef
from ..http.providers.interface import InputFields
from .carried import InputNames
from .compare import compare_histories
from .result import DriftResult
from .rules import RuleSet, RuleSpec, is_imported


class PayloadSource(Protocol):
    """Where a recorded payload stored by reference is read (a loaded cassette, a played history)."""

    def payload(self, ref: PayloadRef | None) -> object: ...


class RuleLayers(NamedTuple):
    """The rules a run is judged by, lowest precedence first after the mode's defaults: ``project``
    (``[tool.agentreplay.rules]``, the ``agentreplay_config`` fixture), ``marker`` (``rules=``), ``hook``
    (``pytest_agentreplay_diff_rules``) and ``extra``: what the mode and its settings add (layer
    ``default``)."""

    mode: str
    project: RuleSpec = None
    marker: RuleSpec = None
    hook: RuleSpec = None
    extra: RuleSpec = None


def rules_for(layers: RuleLayers, labels: Mapping[str, object] | None) -> RuleSet:
    """The rule set of a run whose recording carries ``labels`` (an imported one is judged leniently)."""
    return RuleSet.from_layers(**layers._asdict(), imported=is_imported(labels))


def payload_resolver(source: PayloadSource) -> Callable[[object], object]:
    """The resolver ``compare_histories`` reads a differing payload ref with (a ref in JSON form)."""

    def resolve(ref: object) -> object:
        if ref is None:
            return None
        if isinstance(ref, dict):
            if ref.get("sha256"):
                return source.payload(PayloadRef.model_validate(ref))
            return ref.get("inline")
        return source.payload(ref if isinstance(ref, PayloadRef) else None)

    return resolve


def compare_run(
    recorded: Sequence[Document],
    replayed: Sequence[Document],
    *,
    layers: RuleLayers,
    labels: Mapping[str, object] | None,
    payloads: PayloadSource,
    inputs: InputFields | None = None,
) -> DriftResult:
    """The drift of ``replayed`` from ``recorded``, judged by the rules of ``layers``; ``inputs``: what the
    run's providers declare as a model's input (named so in the differences)."""
    rules = rules_for(layers, labels)
    return compare_histories(
        recorded,
        replayed,
        rules=rules,
        resolve=payload_resolver(payloads),
        names=InputNames.declared(inputs),
    )
