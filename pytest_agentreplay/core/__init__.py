"""The core every other folder builds on: the event model and its constants, canonical JSON, the recorder
(the active run and the order of its events), settings, cassette paths, redaction, the runtime values a run
reads, and the commands messages print. Imports nothing above it: only the standard library, pydantic (the
records, :mod:`.events`) and :mod:`pytest_agentreplay.exceptions`."""
