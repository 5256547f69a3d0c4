"""Interception held across the tests of a session (light: the interceptors load when first held)."""

from __future__ import annotations

from collections.abc import Callable


class HeldInterception:
    """Interception installed once and held from one agentreplay test to the next, so that each run only
    counts itself in rather than patching and restoring every intercepted library; released before any
    other test (which sees the libraries as they are) and at the end of the session."""

    def __init__(self) -> None:
        self._uninstall: Callable[[], None] | None = None
        # Why the install failed: the test that needed it fails with it, at its run's start.
        self.error: Exception | None = None

    def hold(self) -> None:
        if self._uninstall is None:
            from ..intercept import install  # heavy: the interceptors, only once a test replays

            try:
                self._uninstall = install()
                self.error = None
            except Exception as exc:
                self.error = exc

    def release(self) -> None:
        uninstall = self._uninstall
        self._uninstall = None
        if uninstall is not None:
            uninstall()
