"""The cassette on disk. Builds on :mod:`pytest_agentreplay.core` and on the shape of HTTP exchanges
(:mod:`pytest_agentreplay.http`); knows nothing of replay or pytest.

- reading: ``read`` (a load: header, integrity, events decoded and validated), ``parsing`` (a file's bytes
  and their parse), ``document_checks`` (header and schema failures, located), ``loaded``
  (``LoadedCassette``: payloads resolved lazily, ``verify``'s problems);
- writing: ``write`` (redaction, blobs, the secret scan, the atomic write) and ``document`` (a run's
  current-format document, shared with reading);
- the format: ``stored_form`` and ``stored_decode`` (events as stored: request deltas, defaults left out),
  ``chain`` (event and head digests), ``migrations`` (older versions, in memory), ``validation`` (file
  checks, limits, payload shapes);
- storage: ``blobs`` (the content-addressed payload store) and ``atomic`` (crash-safe writes, locks);
- folders: ``maintenance`` (``agentreplay migrate``), ``prune``, ``unused`` (cassettes no test uses).
"""
