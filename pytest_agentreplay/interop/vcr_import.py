"""Convert vcrpy / pytest-recording cassettes into this format (``agentreplay import-vcr``): each file
becomes one run, recorded as live recording would, labelled ``source: vcr`` and, in pytest-recording's
layout, written where this plugin looks for its test.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..cassette.read import LoadedCassette
from ..cassette.validation import read_regular_file
from ..cassette.write import save_cassette
from ..core.canonical import sha256_hex
from ..core.constants import DEFAULT_TRANSPORT_HEADERS
from ..core.paths import item_cassette_path
from ..core.run_settings import RunSettings
from ..exceptions import CassetteCorruptError, CassetteError, CassetteLimitError
from ..redaction import Redactor
from .vcr_format import (
    MAX_VCR_BYTES,
    AliasBombError,
    VcrInteraction,
    first_line,
    interactions_to_events,
    load_vcr,
    vcrpy_run,
)

VCR_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True, slots=True)
class VcrTest:
    """The test a pytest-recording cassette belongs to."""

    module_path: Path  # the test module, relative to the root directory when it lies below it
    cls: str | None  # the class of a test method (pytest-recording names the innermost one)
    test: str  # the test name with its parametrize id: ``test_x[case]``
    rootdir: Path  # what ``module_path`` is relative to

    @property
    def nodeid(self) -> str:
        parts = [self.module_path.as_posix(), *([self.cls] if self.cls else []), self.test]
        return "::".join(parts)

    @property
    def qualified_name(self) -> str:
        """``Class.test`` (the cassette file name this plugin and pytest-recording both use)."""
        return f"{self.cls}.{self.test}" if self.cls else self.test


_ROOT_MARKERS = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")


def project_root(test_dir: Path, cwd: Path | None = None) -> Path:
    """The root directory node ids are relative to: ``cwd`` when the tests lie below it, else found as
    pytest finds its rootdir."""
    resolved = Path(test_dir).resolve()
    if cwd is not None:
        base = Path(cwd).resolve()
        if resolved == base or base in resolved.parents:
            return base
    for folder in (resolved, *resolved.parents):
        if any((folder / name).is_file() for name in _ROOT_MARKERS):
            return folder
    return resolved.parent


def pytest_recording_test(source: Path, rootdir: Path | None = None) -> VcrTest | None:
    """The test of ``source`` in pytest-recording's layout, ``<test dir>/cassettes/<module>/[<Class>.]<test>``
    (None outside it)."""
    source = Path(source)
    if source.suffix.lower() not in VCR_SUFFIXES or source.parent.parent.name != "cassettes":
        return None
    module = source.parent.name
    test_dir = source.parent.parent.parent
    name = source.name[: -len(source.suffix)]
    head, bracket, param = name.partition("[")
    cls: str | None = None
    if "." in head:
        cls, _, head = head.rpartition(".")
    if not head or not module:
        return None
    module_path = test_dir / f"{module}.py"
    root = project_root(test_dir, rootdir)
    with contextlib.suppress(ValueError):
        module_path = module_path.resolve().relative_to(root)
    return VcrTest(module_path, cls or None, head + bracket + param, root)


LAYOUTS = ("test", "mirror")
"""``--layout``: ``test`` (default) writes a pytest-recording cassette where this plugin looks for its test
(other files as ``mirror``), ``mirror`` keeps the input's relative path; anything with ``{`` is a template
with ``{module_path}`` (``tests/test_m``), ``{module}``, ``{cls}``, ``{test}``, ``{name}`` (``Class.test``),
``{stem}`` and ``{relpath}`` (the mirror path without suffix)."""


def _mirror(source: Path, bases: list[Path]) -> Path:
    for base in bases:
        if base.is_dir():
            try:
                return source.relative_to(base).with_suffix(".json")
            except ValueError:
                continue
    return Path(source.name).with_suffix(".json")


def import_target(
    source: Path, out_dir: Path, *, bases: list[Path], rootdir: Path, layout: str = "test"
) -> tuple[Path, VcrTest | None]:
    if "{" not in layout and layout not in LAYOUTS:
        raise ValueError(f"unknown --layout {layout!r}; use one of {', '.join(LAYOUTS)} or a template")
    test = pytest_recording_test(source, rootdir)
    mirror = _mirror(source, bases)
    if "{" in layout:
        module_path = test.module_path.with_suffix("").as_posix() if test else mirror.parent.as_posix()
        fields = {
            "module_path": module_path,
            "module": test.module_path.stem if test else source.parent.name,
            "cls": (test.cls or "") if test else "",
            "test": test.test if test else source.stem,
            "name": test.qualified_name if test else source.stem,
            "stem": source.stem,
            "relpath": mirror.with_suffix("").as_posix(),
        }
        try:
            relative = layout.format(**fields)
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(f"bad --layout template {layout!r}: {exc!r}") from None
        if not relative.endswith(".json"):
            relative += ".json"
        return out_dir / relative, test
    if layout == "mirror" or test is None:
        return out_dir / mirror, test
    return item_cassette_path(out_dir, test.rootdir, test.rootdir / test.module_path, test.nodeid), test


def _read_interactions(source: Path) -> list[VcrInteraction]:
    fixes = [
        "check that it is a vcrpy / pytest-recording cassette (a YAML or JSON file with `interactions`)",
        "re-record it with vcrpy, or record the test with pytest-agentreplay directly",
    ]
    try:
        return load_vcr(source)
    except FileNotFoundError:
        raise CassetteCorruptError(f"{source} does not exist", cassette=source, fixes=fixes[:1]) from None
    except CassetteError:
        raise
    except AliasBombError as exc:
        raise CassetteLimitError(
            f"cannot import {source.name}: {exc}",
            cassette=source,
            fixes=[
                "expand the anchors by hand where they are really meant to be shared, or re-record the "
                "cassette with vcrpy",
                *fixes[1:],
            ],
        ) from None
    except Exception as exc:  # YAML/JSON syntax, wrong shape, undecodable body
        raise CassetteCorruptError(
            f"cannot import {source.name}: {first_line(exc)}",
            cassette=source,
            fixes=fixes,
        ) from None


def import_vcr_file(
    source: Path,
    target: Path,
    *,
    settings: Mapping[str, object] | None = None,
    redaction: Mapping[str, object] | None = None,
    blob_dir: Path | None = None,
    test: str | None = None,
    transport_headers: str = DEFAULT_TRANSPORT_HEADERS,
) -> LoadedCassette:
    """Convert one vcrpy cassette at ``source`` into a cassette at ``target``; ``settings`` / ``redaction``:
    ``[tool.agentreplay]``'s HTTP settings and ``redact_*`` keys."""
    source = Path(source)
    interactions = _read_interactions(source)
    digest = sha256_hex(read_regular_file(source, limit=MAX_VCR_BYTES, label=f"vcrpy cassette {source.name}"))
    run = vcrpy_run(f"vcr-{digest[:24]}", test, source.name)
    run_settings = RunSettings.from_mapping(dict(settings or {}))
    events = interactions_to_events(interactions, run_settings, run, framed=True, cassette=str(target))
    models = [e for e in events if e.type == "model.call"]
    if models:
        first = models[0].data
        run = run.model_copy(update={"provider": first.get("provider"), "model": first.get("model")})
    redactor = Redactor.from_config({k: v for k, v in (redaction or {}).items() if k.startswith("redact_")})
    return save_cassette(
        Path(target),
        run,
        events,
        redactor=redactor,
        blob_dir=blob_dir,
        transport_headers=transport_headers,
        keep_headers={run_settings.idempotency_header},
    )
