"""Replaying a run against its cassette: the replay policy (serve, send or refuse each call), the HTTP
replay index, recorded tool results, the modes (regression, model comparison, sandbox with faults, audit),
the replayed history as the comparison sees it, model-comparison summaries and accepted updates. Builds on
the core, HTTP, cassette and diff layers; the client interceptors above it call its policy."""
