"""The event-history model (runs, events, payload references, the cassette document and its schema):
strict, closed, frozen pydantic records, as the cassette format specifies; the containers they hold are
shared with the recorder and read only."""

import functools
from typing import Annotated, Any, Literal, Self, get_args

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

# The event vocabularies (``Actor``, ``EventClass``, ``EventType``) are written once, in constants, beside
# the tuples of their values; re-exported here, where the model uses them.
from .constants import FORMAT_NAME, FORMAT_VERSION
from .constants import Actor as Actor
from .constants import EventClass as EventClass
from .constants import EventType as EventType
from .documents import Document

DataClass = Literal["public", "internal", "personal"]
HEX64 = r"^[0-9a-f]{64}$"


_set = object.__setattr__
_new = object.__new__
# The names of each record class's fields: a trusted record's set of fields is a copy (its own set: pydantic
# adds to a copy's in ``model_copy(update=...)``), which costs less than hashing the names again.
_FIELD_NAMES: dict[type, frozenset[str]] = {}


class Record(BaseModel):
    """Base of the event-history records: strict, closed, frozen."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True, defer_build=True)

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        _FIELD_NAMES[cls] = frozenset(cls.model_fields)

    @classmethod
    def construct_trusted(cls, values: dict[str, object]) -> Self:
        """A record of values this package built itself, unchecked: ``values`` names every field in
        declaration order and becomes the record's own. ``model_construct`` costs five times the rest of
        recording a call (issue 28); ``tests/test_model.py`` holds the result to the validated record."""
        # ``object.__new__``, as ``model_construct``'s ``cls.__new__`` is for a record (none defines one).
        record = _new(cls)
        _set(record, "__dict__", values)
        _set(record, "__pydantic_fields_set__", set(_FIELD_NAMES[cls]))
        _set(record, "__pydantic_extra__", None)
        _set(record, "__pydantic_private__", None)
        return record


class ToolInfo(Record):
    name: str
    schema_version: str | None = None
    idempotency_key: str | None = None


class EffectInfo(Record):
    kind: str
    target: str | None = None
    receipt: Any = None
    committed: bool = False


class PayloadRef(Record):
    """A payload either inline (``inline``) or in the blob store (``sha256``), tagged with a data class."""

    sha256: str | None = Field(default=None, pattern=HEX64)
    inline: Any = None
    data_class: DataClass = "internal"
    media_type: str | None = None
    size: int | None = Field(default=None, ge=0)
    key_order: dict[str, list[str]] | None = Field(
        default=None,
        description="A value replay hands back (a tool result): the recorded key order of each of its "
        "objects whose keys were not sorted, by JSON pointer; the payload itself is stored with sorted keys.",
    )


class Event(Record):
    run_id: str
    seq: int = Field(ge=0)
    ts: str
    type: EventType
    actor: Actor
    # ``class`` on disk (a Python keyword, so not the attribute's name); either name is accepted on input,
    # both at once is one too many.
    event_class: EventClass = Field(
        validation_alias=AliasChoices("class", "event_class"), serialization_alias="class"
    )
    trace_id: str | None = None
    span_id: str | None = None
    state_hash: str | None = None
    policy_version: str | None = None
    tool: ToolInfo | None = None
    input_ref: PayloadRef | None = None
    output_ref: PayloadRef | None = None
    effect: EffectInfo | None = None
    # Type-specific fields (model, decision, usage, verdict, document ids...).
    data: Document = Field(default_factory=dict)


class RunMeta(Record):
    run_id: str
    agent: str | None = None
    code_version: str | None = None
    provider: str | None = None
    model: str | None = None
    decoding: Document = Field(default_factory=dict)
    tool_schema_versions: dict[str, str] = Field(default_factory=dict)
    policy_versions: dict[str, str] = Field(default_factory=dict)
    corpus_version: str | None = None
    test: str | None = None
    recorded_at: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)


class RuntimeValuesData(Record):
    """``data`` of a ``runtime.values`` event (actor ``runtime``, class ``input``; one per run, before
    ``run.end``, only when the run read any): the clock, uuid, random and ``record_value`` values the run
    read, per stream (``main``, ``thread:<name>#<n>``, ``task:<coroutine>#<n>``), served back in replay."""

    sources: list[Literal["clock", "uuid", "random"]] = Field(
        description="The sources recorded and served for this run (runtime_values setting)."
    )
    reads: Document = Field(
        description="How many values were read: clock/uuid -> stream -> module -> count; "
        "values -> name -> stream -> count. Compared (rule runtime.values:data.reads, expected)."
    )
    clock: Document | None = Field(
        default=None,
        description="start (ISO 8601 UTC), start_us (epoch microseconds) and streams: stream -> module -> "
        "the offsets in microseconds as one space-separated string, each from the previous read of that "
        "stream and module (the first from start).",
    )
    uuid: dict[str, dict[str, list[str]]] | None = Field(
        default=None, description="stream -> module -> the UUIDs drawn (uuid1/uuid4/uuid6/uuid7), in order."
    )
    random: Document | None = Field(
        default=None,
        description="seed: the seed of the random module's generator for the run; state_after: a digest of "
        "its state after the run (present only when the run drew from it).",
    )
    values: dict[str, dict[str, list[object]]] | None = Field(
        default=None, description="record_value(name, fn): name -> stream -> the values, in order."
    )
    key_order: dict[str, dict[str, dict[str, dict[str, list[str]]]]] | None = Field(
        default=None,
        description="record_value values whose objects' keys were not sorted: name -> stream -> index of the "
        "value -> JSON pointer -> the keys in their recorded order (served back in that order).",
    )


class CassetteDoc(Record):
    """The whole cassette file."""

    format: Literal["pytest-agentreplay"] = FORMAT_NAME
    version: Literal[4] = FORMAT_VERSION
    run: RunMeta
    events: list[Event]
    event_count: int = Field(ge=0, description="How many events the file holds.")
    event_digests: list[Annotated[str, Field(pattern=HEX64)]] = Field(
        description="Per event, in order: sha256 of the compact canonical JSON of the event as stored (see "
        "stored_form: request deltas, defaults left out), without its seq. "
        "An accepted change to one event changes only its own line here."
    )
    head_hash: str = Field(
        pattern=HEX64,
        description="sha256 of the compact canonical JSON of {version, run, event_count, event_digests}: "
        "binds the run header, the count and the order of the events.",
    )


def event_to_dict(event: Event) -> Document:
    """The event as its JSON object (JSON names, ``None`` fields left out): a copy, free to change."""
    return event.model_dump(mode="json", by_alias=True, exclude_none=True)


_JSON_NAMES = {name: f.serialization_alias for name, f in Event.model_fields.items() if f.serialization_alias}
# The fields holding a record (tool, refs, effect), from the declarations.
_RECORD_FIELDS = tuple(
    name
    for name, info in Event.model_fields.items()
    if any(isinstance(option, type) and issubclass(option, Record) for option in get_args(info.annotation))
)


def event_to_shared_dict(event: Event, twin: tuple[Event, Document] | None = None) -> Document:
    """:func:`event_to_dict` without the copies (a conversation's requests share their history: copying
    would cost the square of the conversation): the values are the event's own objects, only the records
    around them become dicts. For readers only: do not modify the result.

    ``twin``: another event and its dict made here. A record this event shares with it (the very object:
    records are frozen) is that dict's, the same object (a replayed exchange served from the recording)."""
    # A model's ``__dict__`` holds its fields by name, in declaration order (pydantic's documented layout).
    out = {_JSON_NAMES.get(name, name): value for name, value in event.__dict__.items() if value is not None}
    for name in _RECORD_FIELDS:
        record = out.get(name)
        if record is None:
            continue
        if twin is not None and record is twin[0].__dict__.get(name):
            out[name] = twin[1][name]
        else:
            out[name] = {k: v for k, v in record.__dict__.items() if v is not None}
    return out


def cassette_json_schema() -> Document:
    """JSON Schema (draft 2020-12) of the current cassette format, generated by pydantic from the records."""
    schema = CassetteDoc.model_json_schema(by_alias=True, mode="validation")
    defs = schema.setdefault("$defs", {})
    # The file holds events in their stored form (see stored_form): what repeats is left out there.
    for name, field_name in (("Event", "run_id"), ("ToolInfo", "name")):
        model = defs.get(name, {})
        if field_name in model.get("required", []):
            model["required"] = [f for f in model["required"] if f != field_name]
            model["properties"][field_name]["description"] = (
                "left out of the file when it repeats what the event says elsewhere; restored on load"
            )
    # Documents the data of the runtime.values event type (Event.data stays a free-form object).
    defs["RuntimeValuesData"] = RuntimeValuesData.model_json_schema(by_alias=True, mode="validation")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        **schema,
        "title": f"{FORMAT_NAME} cassette, format version {FORMAT_VERSION}",
    }


@functools.cache
def build_validators() -> None:
    """Build the deferred validators once per process, when a run begins: built later, inside the user's
    clock patch (``freezegun`` swaps ``datetime``), pydantic could not generate schemas for the fake types."""
    # Nested records first, so their schemas are reused (the other way round, each nested record's schema
    # is generated again: 21 M instructions, not 14).
    for model in (ToolInfo, EffectInfo, PayloadRef, Event, RunMeta, CassetteDoc):
        model.model_rebuild(force=True)
