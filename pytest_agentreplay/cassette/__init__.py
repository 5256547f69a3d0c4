"""The cassette on disk. Builds on :mod:`pytest_agentreplay.core` and on the shape of HTTP exchanges
(:mod:`pytest_agentreplay.http`); knows nothing of replay or pytest.

- ``read``: loading a cassette (the header and the integrity chain checked, events decoded and validated);
  ``load_unchecked`` for the commands that audit a cassette whose chain is broken;
- ``parsing``: a cassette file's bytes (hostile files refused) and their parse, failures located;
- ``document_checks``: the header (format, version) and the schema failures, located;
- ``loaded``: ``LoadedCassette``, what a load gives (payloads resolved lazily, ``verify``'s problems);
- ``write``: saving one (redaction and the project's hook, payloads moved to blobs, the secret scan, the
  atomic write);
- ``document``: the current-format document of a run, its run-header redaction and secret scan (shared by
  reading and writing);
- ``stored_form``: events as stored (requests as deltas over earlier ones, defaults left out), and
  ``stored_decode``, which reads them back;
- ``migrations``: upgrades of older format versions, in memory;
- ``chain``: the integrity chain (event digests, head digest);
- ``validation``: file checks, size and depth limits, payload shapes;
- ``blobs``: the content-addressed payload store;
- ``atomic``: crash-safe writes and cross-process locks;
- ``maintenance``: keeping a folder current (``agentreplay migrate``);
- ``unused``: finding cassettes no test uses.
"""
