"""Every patch the package puts on a library: a :class:`Library` declaration each, one :class:`Owner` per
set installing, counting and restoring it. A replacement names what it replaced (:func:`genuine`), so a
second copy of the package (pytester) calls and restores the genuine functions beneath. A library may wait
for its trigger modules' import (:class:`AfterImport`) rather than import one a test may never use (~0.2 s
for aiohttp). No ``importlib.abc`` base: the guard installs one in every Python child, which should not
import more."""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final, NamedTuple, cast

if TYPE_CHECKING:
    from importlib.abc import Loader
    from importlib.machinery import ModuleSpec

Undo = Callable[[], None]
Setter = Callable[[Any, str, object], None]

_ORIGINAL_ATTR: Final = "__agentreplay_original__"
_FOUND: Final = object()


def genuine(value: object) -> object:
    """``value`` without the replacements stacked on it (each names what it replaced)."""
    for _ in range(16):
        under = getattr(value, _ORIGINAL_ATTR, None) if callable(value) else None
        if under is None:
            return value
        value = under
    return value


def genuine_function(value: object) -> Callable[..., Any]:
    found = genuine(value)
    if not callable(found):
        raise TypeError(f"cannot patch {value!r}: not callable")
    return found


def once(fn: Undo) -> Undo:
    """``fn`` made idempotent and thread-safe: an uninstall or release called twice acts once."""
    lock = threading.Lock()
    pending = [fn]

    def call() -> None:
        with lock:
            if not pending:
                return
            todo = pending.pop()
        todo()

    return call


# A NamedTuple, not a dataclass: never changed once made, and far cheaper to create at start-up.
class _Swap(NamedTuple):
    target: Any
    name: str
    value: object
    # What goes back; _FOUND: nothing (the attribute was a class's inherited one: deleted again).
    restore: object
    set_attribute: Setter

    def undo(self) -> None:
        if self.restore is _FOUND:
            delattr(self.target, self.name)
        else:
            self.set_attribute(self.target, self.name, self.restore)


class Patches:
    """What an owner changed: each attribute it replaced and each undo it was handed, undone last first."""

    __slots__ = ("_done", "_swaps")

    def __init__(self) -> None:
        self._done: list[_Swap | Undo] = []
        self._swaps: dict[tuple[int, str], _Swap] = {}

    def set(
        self,
        target: Any,
        name: str,
        value: object,
        *,
        original: object = _FOUND,
        set_attribute: Setter = setattr,
    ) -> None:
        """``target.name = value``, restored to ``original`` (default: what was there), once per attribute:
        while this owner's replacement is there (httpx aliased as httpx2 hands over the same classes twice)
        nothing changes; a module run again in place is patched anew."""
        found = getattr(target, name)
        # By key, not a scan of what was done: the guard installs some 20 patches at every test's start.
        key = (id(target), name)
        earlier = self._swaps.get(key)
        if earlier is not None:
            if found is earlier.value:
                return
            self._done.remove(earlier)
        replaced = found if original is _FOUND else original
        # Inherited: the class gets its parent's again.
        restore = _FOUND if isinstance(target, type) and name not in target.__dict__ else replaced
        if callable(value):  # what genuine() follows
            # Not contextlib.suppress: three Python calls, some 20 times at every test's start.
            try:  # noqa: SIM105
                setattr(value, _ORIGINAL_ATTR, replaced)
            except (AttributeError, TypeError):
                pass
        set_attribute(target, name, value)
        self._swaps[key] = swap = _Swap(target, name, value, restore, set_attribute)
        self._done.append(swap)

    def add(self, undo: Undo) -> None:
        self._done.append(undo)

    def restore(self) -> None:
        self._swaps.clear()
        while self._done:
            done = self._done.pop()
            done.undo() if isinstance(done, _Swap) else done()


class Library(NamedTuple):
    """One patched library. ``apply(patches, module)`` patches it through ``patches``; ``triggers``: the
    modules whose import it waits for (``module`` is the one that ran); none: patched at install
    (``module`` None)."""

    apply: Callable[[Patches, ModuleType | None], None]
    triggers: tuple[str, ...] = ()


class Owner:
    """A set of patches and who holds it: installed by the first holder, restored (in reverse order) when
    the last one lets go and ``busy()`` is false (a thread a replaying test started still runs), or kept."""

    def __init__(self, *libraries: Library, busy: Callable[[], bool] = lambda: False) -> None:
        # Re-entrant: a patch may run while it is held (an import a patch makes triggers another library;
        # a patched call, a thread start or a fork hook, runs in the middle of an install).
        self.lock = threading.RLock()
        self.libraries = list(libraries)
        self.busy = busy
        self.refs = 0
        self.kept = False
        self.patches: Patches | None = None
        self._waiting: dict[str, Library] = {}
        self._due: list[tuple[Library, ModuleType]] | None = None

    def declare(self, *libraries: Library) -> None:
        with self.lock:
            self.libraries.extend(libraries)

    @property
    def patched(self) -> bool:
        return self.patches is not None

    def installed(self) -> bool:
        return self.refs > 0

    def acquire(self) -> Undo:
        """Hold the patches (installing them if they are not); returns the release, idempotent."""
        with self.lock:
            self.refs += 1
            try:
                self._install()
            except BaseException:
                self.refs -= 1
                raise
        return once(self._release)

    def keep(self) -> None:
        """Install the patches for the process's lifetime, whoever holds them."""
        with self.lock:
            self._install()
            self.kept = True

    def settle(self) -> None:
        """Restore the patches once nothing needs them: no holder, not kept, ``busy()`` false."""
        with self.lock:
            if self.patches is not None and self.refs == 0 and not self.kept and not self.busy():
                self.restore()

    def restore(self) -> None:
        """Take the patches off now, held or kept."""
        with self.lock:
            patches, self.patches, self.kept = self.patches, None, False
            if patches is not None:
                patches.restore()

    def _release(self) -> None:
        with self.lock:
            self.refs -= 1
        self.settle()

    def _install(self) -> None:
        if self.patches is not None:
            return
        patches = Patches()
        waiting: dict[str, Library] = {}
        applied: list[ModuleType] = []
        try:
            for library in self.libraries:
                if not library.triggers:
                    library.apply(patches, None)
                for trigger in library.triggers:
                    waiting[trigger] = library
                    if trigger in sys.modules:
                        # Waits for another thread still running the module (no finder of this owner,
                        # whose callback would need the lock, is in sys.meta_path yet).
                        applied.append(importlib.import_module(trigger))
                        library.apply(patches, applied[-1])
            if waiting:
                finder = AfterImport(dict.fromkeys(waiting, self._imported))
                finder.install()
                patches.add(finder.remove)
                # Imported by another thread between the check and the finder's insertion: patched here,
                # unless still running (waiting for it could deadlock with its import waiting for us).
                for trigger, library in waiting.items():
                    module = sys.modules.get(trigger)
                    spec = getattr(module, "__spec__", None)
                    running = getattr(spec, "_initializing", False)  # importlib's mark while a module runs
                    if module is not None and not any(module is m for m in applied) and not running:
                        library.apply(patches, module)
        except BaseException:
            patches.restore()
            raise
        self.patches, self._waiting = patches, waiting

    def _imported(self, module: ModuleType) -> None:
        with self.lock:
            library = self._waiting.get(module.__name__)
            if library is None or self.patches is None:
                return
            if self._due is not None:
                # Run by a patch under way (an adapter importing another trigger while it is half run):
                # patched once that patch is done.
                self._due.append((library, module))
                return
            self._due = [(library, module)]
            try:
                while self._due:
                    library, module = self._due.pop(0)
                    library.apply(self.patches, module)
            finally:
                self._due = None


# ------------------------------------------------------------------- code run after a module's import


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
        # The genuine loader back before the module runs: a removed finder leaves nothing behind.
        module.__loader__ = self.loader
        if module.__spec__ is not None:
            module.__spec__.loader = self.loader
        self.loader.exec_module(module)
        # Looked up now: a finder removed meanwhile has no callbacks left.
        callback = self.callbacks.get(module.__name__)
        if callback is not None:
            callback(module)
