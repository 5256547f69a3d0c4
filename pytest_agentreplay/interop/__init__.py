"""Other tools' formats and protocols: vcrpy/pytest-recording cassettes (read, served, imported),
OpenTelemetry export of a run, and syrupy snapshots of a history. Builds on the core, the cassette, replay
and diff layers; nothing below imports it."""
