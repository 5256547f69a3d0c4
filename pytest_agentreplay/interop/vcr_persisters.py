"""The read-only vcrpy persisters behind :class:`~.vcr_compat.VcrReplay` (recording writes this format)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..cassette.validation import read_regular_file
from ..core.documents import Document
from ..exceptions import CassetteCorruptError, CassetteError
from .vcr_format import MAX_VCR_BYTES, VcrFormat, read_vcr_document


class VcrCassetteError(CassetteCorruptError):
    """A vcrpy cassette that vcrpy's own serializer cannot read (vcrpy would treat it as empty)."""


class _AlreadyParsed:
    """A vcrpy serializer for a document :func:`~.vcr_format.read_vcr_document` has already read."""

    @staticmethod
    def deserialize(document: Document) -> Document:
        return document


@dataclass
class _ReadOnly:
    """A persister that reads: the cassette files it found, and the file of each interaction read."""

    origins: list[Path] = field(default_factory=list, kw_only=True)
    found: list[Path] = field(default_factory=list, kw_only=True)

    def save_cassette(self, cassette_path: str, cassette_dict: object, serializer: object) -> None:
        raise AssertionError("vcr_compat never writes vcrpy cassettes")  # recording writes this format


@dataclass
class Persister(_ReadOnly):
    """vcrpy persister reading every cassette of a test, like pytest-recording's ``CombinedPersister``,
    but failing on an undecodable file instead of treating it as empty."""

    paths: tuple[Path, ...]

    def load_cassette(self, cassette_path: str, serializer: object) -> tuple[list[object], list[object]]:
        from vcr.serialize import deserialize  # heavy: vcrpy, only where one of its cassettes is read

        fmt = _builtin_format(serializer)
        requests: list[object] = []
        responses: list[object] = []
        for path in self.paths:
            try:
                if fmt is None:  # a serializer the project registered: its own text format
                    label = f"vcrpy cassette {path.name}"
                    text = read_regular_file(path, limit=MAX_VCR_BYTES, label=label, cassette=path)
                    reqs, resps, *_ = deserialize(text.decode("utf-8"), serializer)
                else:
                    reqs, resps, *_ = deserialize(read_vcr_document(path, fmt), _AlreadyParsed)
            except FileNotFoundError:
                continue
            except CassetteError:
                raise  # not a regular file, too large: said as such
            except Exception as exc:  # YAML/JSON syntax, alias bomb, old format, wrong shape, not UTF-8
                raise VcrCassetteError(
                    f"cannot read the vcrpy cassette {path.name}: {_first_line(exc)}",
                    cassette=path,
                    fixes=(
                        "fix or delete the file, then re-record the test (vcrpy would have treated it as "
                        "empty and overwritten it)",
                        "or convert it once: agentreplay import-vcr PATH",
                    ),
                ) from None
            self.found.append(path)
            requests.extend(reqs)
            responses.extend(resps)
            self.origins.extend([path] * len(reqs))
        return requests, responses


def _first_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def _builtin_format(serializer: object) -> VcrFormat | None:
    """``yaml`` / ``json`` for vcrpy's own serializers, None for one a project registered."""
    from vcr.serializers import jsonserializer, yamlserializer  # heavy: vcrpy, as above

    if serializer is yamlserializer:
        return "yaml"
    if serializer is jsonserializer:
        return "json"
    return None


_PLACE = "persister in the vcr_config fixture, or register_persister in pytest_recording_configure"


@dataclass
class ProjectPersister(_ReadOnly):
    """A persister the project gave: it loads the test's cassette (not the markers' extra ones, as under
    pytest-recording); anything it raises but "not found" is an error, never "empty"."""

    persister: Any
    path: Path

    def load_cassette(self, cassette_path: str, serializer: object) -> tuple[object, ...]:
        from vcr.persisters.filesystem import CassetteNotFoundError  # heavy: vcrpy, as above

        name = getattr(self.persister, "__name__", type(self.persister).__name__)
        try:
            loaded = tuple(self.persister.load_cassette(cassette_path, serializer=serializer))
        except (CassetteNotFoundError, FileNotFoundError):
            return [], []
        except Exception as exc:
            raise VcrCassetteError(
                f"the vcrpy persister {name} cannot load {self.path.name}: {_first_line(exc)}",
                cassette=self.path,
                place=_PLACE,
                fixes=(
                    "fix the persister or the cassette (vcrpy would have treated it as empty and recorded "
                    "over it)",
                ),
            ) from None
        if len(loaded) < 2 or not all(isinstance(part, list | tuple) for part in loaded[:2]):
            raise VcrCassetteError(
                f"the vcrpy persister {name} returned {type(loaded).__name__} of {len(loaded)} item(s) for "
                f"{self.path.name}, not (requests, responses)",
                cassette=self.path,
                place=_PLACE,
                fixes=(
                    "return (requests, responses) from load_cassette, as vcrpy's FilesystemPersister does",
                ),
            )
        self.found.append(self.path)
        self.origins.extend([self.path] * len(loaded[0]))
        return loaded
