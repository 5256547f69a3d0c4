"""HTTP capture and replay: interception of httpx, httpx2, requests/urllib3 and aiohttp, SSE
streaming, classification of exchanges, and the fail-closed network guard.

Importing this package imports no HTTP client: :func:`install` imports and patches those installed.
Each intercepted call with no active run (:func:`pytest_agentreplay.capture.current_run`) is left
untouched; otherwise :func:`pytest_agentreplay.replay.policy.decide` returns the action (serve,
send and capture, or refuse) and the interceptor (``intercept_*``) translates it for its library.
Imports go one way: interceptors -> ``replay.policy`` -> the library-neutral modules here.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Callable

from .classify import Classification, classify_exchange, register_classifier
from .exchange import HttpRequest, HttpResponse

__all__ = [
    "Classification",
    "HttpRequest",
    "HttpResponse",
    "classify_exchange",
    "install",
    "installed",
    "register_classifier",
]

_LOCK = threading.Lock()
_REFS = 0
_RESTORES: list[Callable[[], None]] = []


def _available(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _patch_all() -> list[Callable[[], None]]:
    from . import guard

    restores = [guard.install()]
    for name in ("httpx", "httpx2"):
        if _available(name):
            from . import intercept_httpx

            restores.append(intercept_httpx.patch(importlib.import_module(name)))
    if _available("urllib3"):
        from . import intercept_urllib3

        restores.append(intercept_urllib3.patch())
    if _available("aiohttp"):
        from . import intercept_aiohttp

        restores.append(intercept_aiohttp.patch())
    return restores


def install() -> Callable[[], None]:
    """Install interception and the network guard (reference-counted); returns the uninstall callable.

    Calling the returned function more than once has no further effect.
    """
    global _REFS
    with _LOCK:
        _REFS += 1
        if _REFS == 1:
            try:
                _RESTORES.extend(_patch_all())
            except BaseException:
                _REFS -= 1
                _restore_all()
                raise
    done = threading.Event()

    def uninstall() -> None:
        global _REFS
        with _LOCK:
            if done.is_set():
                return
            done.set()
            _REFS -= 1
            if _REFS == 0:
                _restore_all()

    return uninstall


def _restore_all() -> None:
    while _RESTORES:
        _RESTORES.pop()()


def installed() -> bool:
    return _REFS > 0
