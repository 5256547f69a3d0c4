"""Runtime values (clock, ``uuid``, ``random``, ``record_value()``) recorded and served back: per run in
:mod:`.values`, the process-wide patches in :mod:`.patches`, the stored form in :mod:`.data`. This
``__init__`` imports nothing, so reading :mod:`.data` (a report's timeline) loads no patch.
"""
