"""The cassette on disk: its stored form and format versions (migrations), reading with validation of
hostile input, the integrity chain, content-addressed blobs, atomic locked writes, and unused-cassette
detection. Builds on :mod:`pytest_agentreplay.core`; knows nothing of HTTP, replay or pytest."""
