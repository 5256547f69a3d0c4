"""One owner per set of patches (``core.patching``): nested installs share one, the last release restores
every attribute as it was, a library waiting for its import is patched when it runs, and a kept set stays."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from pytest_agentreplay.core.patching import AfterImport, Library, Owner, Patches, genuine


class Base:
    def greet(self) -> str:
        return "base"


class Child(Base):
    def own(self) -> str:
        return "own"


def _loud(patches: Patches, _module: ModuleType | None) -> None:
    patches.set(Child, "greet", lambda self: "patched")
    patches.set(Child, "own", lambda self: "patched")


def test_nested_installs_share_one_and_the_last_release_restores_each_attribute() -> None:
    applied: list[int] = []

    def counting(patches: Patches, module: ModuleType | None) -> None:
        applied.append(1)
        _loud(patches, module)

    own = Child.__dict__["own"]
    owner = Owner(Library(counting))
    outer = owner.acquire()
    inner = owner.acquire()
    assert applied == [1] and Child().greet() == "patched" and owner.installed()
    assert genuine(Child.__dict__["own"]) is own  # the replacement names what it replaced
    inner()
    inner()  # a release called twice acts once
    assert Child().own() == "patched"
    outer()
    assert not owner.patched and not owner.installed()
    # Put back as found: an inherited method is inherited again, the class's own is its own again.
    assert "greet" not in Child.__dict__ and Child.__dict__["own"] is own


def test_an_attribute_is_patched_once_while_the_owner_replacement_is_in_place() -> None:
    owner = Owner(Library(_loud), Library(_loud))  # as httpx aliased to httpx2: the same classes twice
    release = owner.acquire()
    first = Child.__dict__["greet"]
    assert Child().greet() == "patched"
    release()
    assert "greet" not in Child.__dict__ and first.__agentreplay_original__ is Base.greet


def test_a_failing_install_restores_what_it_did_and_counts_no_holder() -> None:
    def broken(patches: Patches, _module: ModuleType | None) -> None:
        raise AttributeError("SomeClient has no attribute '_send'")

    owner = Owner(Library(_loud), Library(broken))
    with pytest.raises(AttributeError, match="_send"):
        owner.acquire()
    assert "greet" not in Child.__dict__ and not owner.patched and not owner.installed()


def test_kept_patches_outlive_their_holders_until_taken_off() -> None:
    owner = Owner(Library(_loud))
    release = owner.acquire()
    owner.keep()
    release()
    assert owner.patched and Child().greet() == "patched"
    owner.restore()
    assert not owner.patched and "greet" not in Child.__dict__


def test_busy_keeps_the_patches_until_settled() -> None:
    busy = [True]
    owner = Owner(Library(_loud), busy=lambda: busy[0])
    owner.acquire()()
    assert owner.patched and not owner.installed()
    busy[0] = False
    owner.settle()
    assert not owner.patched and "greet" not in Child.__dict__


@pytest.fixture
def late_module(tmp_path: Path) -> Iterator[str]:
    name = "late_patched_module_for_test"
    (tmp_path / f"{name}.py").write_text("def value():\n    return 1\n")
    sys.path.insert(0, str(tmp_path))
    yield name
    sys.path.remove(str(tmp_path))
    sys.modules.pop(name, None)


def test_a_library_is_patched_when_its_trigger_runs_and_again_when_it_runs_anew(late_module: str) -> None:
    def patch(patches: Patches, module: ModuleType | None) -> None:
        assert module is not None
        patches.set(module, "value", lambda: 2)

    owner = Owner(Library(patch, (late_module,)))
    release = owner.acquire()
    try:
        assert late_module not in sys.modules  # waiting imports nothing
        first = importlib.import_module(late_module)
        assert first.value() == 2
        del sys.modules[late_module]  # as pytester drops the modules an inner session imported
        second = importlib.import_module(late_module)
        assert second is not first and second.value() == 2
    finally:
        release()
    assert first.value() == 1 and second.value() == 1
    assert not any(isinstance(f, AfterImport) and late_module in f.callbacks for f in sys.meta_path)
    importlib.reload(second)
    assert second.value() == 1  # released: a module run again is left alone
