"""The cassette on disk: reading (``read``, ``parsing``, ``loaded``), writing (``write``, ``atomic``), the
format (``stored_form``, ``stored_decode``, ``chain``, ``migrations``, ``validation``), the blob store
(``blobs``) and folder maintenance (``maintenance``, ``prune``, ``unused``). Builds on
:mod:`pytest_agentreplay.core` and on the shape of HTTP exchanges; knows nothing of replay or pytest.
"""
