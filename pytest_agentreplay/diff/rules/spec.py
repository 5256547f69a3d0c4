"""Diff rules: which differences between a recorded and a replayed history are ignored, expected or
regressions.

Rule format
===========

A rule has a **selector** ``EVENT:PATH`` and a **verdict**:

- ``EVENT`` is an event type or a glob over event types: ``model.call``, ``tool.*``, ``*``.
- ``PATH`` is a field path glob inside the event (the JSON form of the event): ``data.decision.text``,
  ``tool.name``, ``ts``, ``input_ref.body.json.messages[*].content``, ``**.id``.
  ``.`` separates keys, ``[3]`` is a list index, ``[*]`` any index, ``*`` any part of one key and
  ``**`` any number of keys. ``input_ref`` / ``output_ref`` paths address the *payload* the reference
  points to (e.g. the HTTP request of a model call: ``input_ref.body.json.messages[0].content``).
  Matching is case-insensitive (HTTP header names) and a rule on a path also covers everything below
  it (``data.usage`` covers ``data.usage.total_tokens``).
  Two pseudo paths judge whole events: ``@presence`` (an event only in the recorded history,
  *missing*, or only in the replayed one, *inserted*) and ``@order`` (an event that is in both
  histories but moved relative to the other steps).
  A selector without ``:`` is a path for every event type (``"ts"`` is ``"*:ts"``), unless it names
  event types (``"http"`` is ``"http:**"``). With ``:``, the event type before it is not empty (write
  ``*`` for every type) and the path after it holds no second ``:`` (``"::::"`` is refused).
- ``verdict`` is ``ignore`` (volatile, not reported), ``expected`` (reported, does not fail) or
  ``regression`` (fails the test).

Tolerances (optional) make near-equal values equal; what is still different gets the verdict:

- ``epsilon = 0.01``: numbers whose absolute difference is ``<= epsilon`` are equal;
- ``similarity = 0.9``: texts whose similarity ratio (difflib, over words) is ``>= similarity`` are
  equal;
- ``order_insensitive = true``: lists under the path are compared as multisets. On ``@order`` it makes
  consecutive events of the selected types one order-insensitive group (events sharing the same
  ``data.group`` value always form one);
- ``normalize = ["req_[0-9a-z]+", "\\d{4}-\\d{2}-\\d{2}T[0-9:.]+Z?"]``: regular expressions whose matches
  are replaced by a placeholder in both texts before comparing;
- ``presence_only = true``: two present values are equal whatever they hold (secret headers, redacted on
  both sides); only a value present on one side is a difference;
- ``unrecorded = "ignore"``: the verdict for a value the recording does not have at all (a header an
  imported recording never stored); a value the replay lacks keeps the rule's verdict;
- ``modes = ["model-comparison"]``: the rule applies only in these replay modes.

A rule without ``verdict`` takes the verdict of the next matching rule below it (so a project can add
a tolerance without restating the verdict).

In ``pyproject.toml``::

    [tool.agentreplay.rules]
    "model.call:data.decision.text" = "expected"
    "*:**.request_id" = "ignore"
    "retrieval:data.scores" = { epsilon = 0.001 }
    "tool.call:@order" = { order_insensitive = true }
    "model.call:input_ref.body.json.messages[*].content" = { normalize = ["\\d{4}-\\d{2}-\\d{2}"] }

or as an array of tables (``event`` defaults to ``*``)::

    [[tool.agentreplay.rules]]
    event = "model.call"
    path = "data.decision.text"
    verdict = "expected"
    similarity = 0.85
    modes = ["model-comparison"]

The marker takes the same shapes: ``@pytest.mark.agentreplay(rules={"model.call:data.decision.text":
"expected"})`` or a list of rule dicts; the ``pytest_agentreplay_diff_rules`` hook returns the same.

Project rules are parsed once, at start-up: a bad one is a usage error before any test runs. A marker's
(or an ``agentreplay_config`` fixture's) rules are parsed when the test sets up and fail that test.

Precedence: per-mode defaults < project config < marker < hook. A matching rule of a later layer wins
over every rule of an earlier layer; within one layer the most specific selector wins (more literal
path keys first, then an exact event type over a glob), and on a tie the rule written last.

Per-mode defaults (``default_rules(mode)``): every mode ignores ``ts``, ``seq``, ``run_id``,
``trace_id``, ``span_id``, ``prev_hash``, ``data.group``, response ids (``data.response_id``,
``output_ref.body.json.id``, ``**.created``, ``system_fingerprint``), latencies and volatile HTTP headers
(``date``, ``request-id``, ``x-request-id``, ``set-cookie``, rate-limit headers...; never
``idempotency-key``); token usage is ``expected``; everything else is a ``regression``. Request headers:
transport headers the HTTP stack or SDK version picks (``TRANSPORT_HEADERS``: ``accept-encoding``,
``user-agent``, ``content-length``, ``connection``, ``x-stainless-*``...) are ignored; secret headers
(``SECRET_REQUEST_HEADERS``) are compared by presence only (``presence_only``) and one the recording lacks
is ignored (``unrecorded``); every other request header (``anthropic-beta``, ``openai-beta``, the agent's
own ``extra_headers``) is ``expected``, except ``idempotency-key``, a regression.
Recordings imported from vcrpy (``default_rules(mode, imported=True)``, for runs labelled
``source: vcr``) additionally expect request-body changes (and the model-call fields derived from the
body: decoding, tools hash, model, streaming) and moved events (``@order``: vcrpy matched each request on
its own), and do not compare headers the recording lacks. Inserted or
missing events are regressions, except ``http`` exchanges (writes also appear as ``effect`` events,
which are regressions) and ``state.update`` checkpoints (the state hashes of matched updates are still
compared), which are ``expected``. Moved events (``@order``) of other recordings are regressions.
``runtime.values`` (the
clock, uuid, random and ``record_value`` values the run read) are served, not compared: only a different
number of reads (``data.reads``, per source and stream), another random state after the run
(``data.random``) or another set of sources is reported, as ``expected``; a value that changed what the
agent sends fails where it is sent.
``model-comparison`` additionally expects different model wording (``data.decision.text`` with
similarity 0.8), model name (requested and answered), provider URL,
stop reason, streaming flag, request model, raw response payload,
conversation messages (they carry the live model's earlier answers) and state hashes, and ignores
provider tool-call ids; tool calls, their arguments, system prompt, tools and decoding stay
regressions. ``sandbox`` additionally expects tool results and errors, ``http`` and ``retrieval``
responses, effect receipts and the conversation messages that carry them to the model (the services
are fakes). ``audit`` compares nothing.
"""
