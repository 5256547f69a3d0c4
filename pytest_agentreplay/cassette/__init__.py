"""The cassette on disk: its stored form (requests stored as deltas over earlier ones, defaults left out)
and format versions (migrations), reading hostile files safely, the integrity chain, content-addressed
blobs, atomic locked writes, keeping a folder current (migrate) and finding unused cassettes. Builds on
:mod:`pytest_agentreplay.core` and on the shape of HTTP exchanges (:mod:`pytest_agentreplay.http`); knows
nothing of replay or pytest."""
