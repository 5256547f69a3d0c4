"""The cassette on disk. Builds on :mod:`pytest_agentreplay.core` and on the shape of HTTP exchanges
(:mod:`pytest_agentreplay.http`); knows nothing of replay or pytest.

- ``read``: loading a cassette (hostile files refused, parse and schema failures located, the header and
  the integrity chain checked, events decoded) and ``LoadedCassette``, what a load gives; ``load_unchecked``
  for the commands that audit a cassette whose chain is broken;
- ``write``: saving one (redaction and the project's hook, payloads moved to blobs, the secret scan, the
  atomic write);
- ``document``: the current-format document of a run, its run-header redaction and secret scan (shared by
  reading and writing);
- ``stored_form``: events as stored (requests as deltas over earlier ones, defaults left out);
- ``migrations``: upgrades of older format versions, in memory;
- ``chain``: the integrity chain (event digests, head digest);
- ``validation``: file checks, size and depth limits, payload shapes;
- ``blobs``: the content-addressed payload store;
- ``atomic``: crash-safe writes and cross-process locks;
- ``maintenance``: keeping a folder current (``agentreplay migrate``);
- ``unused``: finding cassettes no test uses.
"""
