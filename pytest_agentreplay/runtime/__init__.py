"""Runtime values: the wall clock, ``uuid`` and ``random`` values a run reads, and ``record_value()``,
recorded and served back.

- :mod:`.values`: per-run recording and serving (streams, the ``runtime.values`` event, ``record_value``);
- :mod:`.patches`: the process-wide patches (time-machine traveller, uuid trampolines, random reseeders);
- :mod:`.data`: the event's stored form read back, and its line in a timeline.

The sources a setting may name live in core (:mod:`..core.runtime_sources`): the settings check them. This
``__init__`` imports nothing, so reading :mod:`.data` (a report's timeline) loads no patch.
"""
