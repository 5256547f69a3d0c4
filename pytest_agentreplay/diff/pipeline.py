"""The comparison of a replayed run with its recording in one call: the rules of every layer, payloads read
from the recording, then ``compare_histories``. Both histories come as JSON documents redacted the way a
saved cassette is (the replayed side by ``replay.replayed_history.ReplayedHistory``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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

    def resolve(ref: Mapping[str, object]) -> object:
        # Asked only for a ref that holds no inline payload: a blob is read where the recording keeps it.
        return payloads.payload(PayloadRef.model_validate(ref)) if ref.get("sha256") else ref.get("inline")

    names = InputNames.declared(inputs)
    return compare_histories(
        recorded, replayed, rules=rules_for(layers, labels), resolve=resolve, names=names
    )
