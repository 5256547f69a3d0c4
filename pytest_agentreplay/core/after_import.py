"""Running code the moment a module has been imported, without importing it ahead of time (patching a
library a test may never use would otherwise import it: ~0.2 s for aiohttp). The module gets its genuine
loader back before it runs, so a removed finder leaves nothing behind. No ``importlib.abc`` base: the
guard installs one in every Python child, which should not import more."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from importlib.abc import Loader
    from importlib.machinery import ModuleSpec


class AfterImport:
    """A ``sys.meta_path`` finder calling ``callbacks[name](module)`` each time a module of one of those
    names has run (pytester drops modules, so one may run again while the finder stays)."""

    def __init__(self, callbacks: Mapping[str, Callable[[ModuleType], None]]) -> None:
        self.callbacks = dict(callbacks)
        # Per thread: another copy of this finder (pytester re-imports this package) asks the other
        # finders, this one included, while this one asks them.
        self._asking = threading.local()

    def install(self) -> None:
        sys.meta_path.insert(0, self)

    def remove(self) -> None:
        """Out of ``sys.meta_path``, and no callback runs any more (not even for an import under way)."""
        self.callbacks.clear()
        with suppress(ValueError):
            sys.meta_path.remove(self)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname not in self.callbacks or getattr(self._asking, "busy", False):
            return None
        self._asking.busy = True
        try:
            finders = [f for f in list(sys.meta_path) if f is not self and hasattr(f, "find_spec")]
            spec = next((s for f in finders if (s := f.find_spec(fullname, path, target)) is not None), None)
        finally:
            self._asking.busy = False
        if spec is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = cast("Loader", _ThenCallBack(spec.loader, self.callbacks))
        return spec


class _ThenCallBack:
    """The loader the other finders found, running the module and then the finder's callback."""

    def __init__(self, loader: Any, callbacks: dict[str, Callable[[ModuleType], None]]) -> None:
        self.loader = loader
        self.callbacks = callbacks

    def __getattr__(self, name: str) -> Any:
        # create_module, get_source...: whoever asks the spec's loader gets the real answers.
        return getattr(self.loader, name)

    def exec_module(self, module: ModuleType) -> None:
        module.__loader__ = self.loader
        if module.__spec__ is not None:
            module.__spec__.loader = self.loader
        self.loader.exec_module(module)
        # Looked up now: a finder removed meanwhile has no callbacks left.
        callback = self.callbacks.get(module.__name__)
        if callback is not None:
            callback(module)
