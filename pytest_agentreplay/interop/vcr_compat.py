"""vcrpy / pytest-recording compatibility (no pytest import): a vcr-marked test's cassette paths, its
merged ``vcr_config`` and record mode (a command-line record mode is never overridden by a marker, unlike
pytest-recording), and :class:`VcrReplay`, which reads those cassettes in place through vcrpy's own
serializer, filters and ``match_on``. Unlike vcrpy, an undecodable cassette is an error, never "empty".
"""

from __future__ import annotations

import copy
import hashlib
import inspect
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from ..core.documents import Document
from ..exceptions import ConfigError
from ..http.exchange import HttpRequest, HttpResponse
from .vcr_format import Persister, ProjectPersister, VcrInteraction, request_from_vcr, response_from_vcr
from .vcr_options import PLACE, PYTEST_RECORDING_KEYS, check_vcr_options, host_names, split_patterns

VCR_RECORD_MODES: Final = ("none", "once", "new_episodes", "all", "rewrite")
DEFAULT_RECORD_MODE: Final = "none"  # pytest-recording's --record-mode default
DEFAULT_SERIALIZER: Final = "yaml"
# pytest-recording replaces these in a default cassette name ("test_a[x/y]" -> "test_a[x-y]").
_FORBIDDEN_NAME_CHARS: Final = "<>?%*:|\"'/\\"
AgentReplayRecord = Literal["none", "missing", "all"]


def default_cassette_dir(test_file: str | Path) -> Path:
    """pytest-recording's ``vcr_cassette_dir`` fixture: ``<test dir>/cassettes/<module name>``."""
    path = Path(test_file)
    return path.parent / "cassettes" / path.stem


def default_cassette_name(test_name: str, class_name: str | None = None) -> str:
    """pytest-recording's ``default_cassette_name`` fixture: ``[<Class>.]<test name>`` (``test_name`` is
    the item name with its parametrize id) with characters a file name cannot hold replaced by ``-``."""
    name = f"{class_name}.{test_name}" if class_name else test_name
    for ch in _FORBIDDEN_NAME_CHARS:
        name = name.replace(ch, "-")
    return name


@dataclass(frozen=True)
class VcrCassettePaths:
    """The cassettes of one vcr-marked test: ``primary``, pytest-recording's own, and ``extras``, the shared
    ones named on the markers."""

    directory: Path
    primary: Path
    extras: tuple[Path, ...] = ()

    @property
    def all(self) -> tuple[Path, ...]:
        return tuple(dict.fromkeys((self.primary, *self.extras)))

    def existing(self) -> tuple[Path, ...]:
        return tuple(p for p in self.all if p.is_file())


def cassette_paths(
    test_file: str | Path,
    test_name: str,
    *,
    class_name: str | None = None,
    marker_args: Sequence[str | os.PathLike[str]] = (),
    vcr_cassette_dir: str | os.PathLike[str] | None = None,
    default_cassette_name: str | None = None,
    config: Mapping[str, object] | None = None,
) -> VcrCassettePaths:
    """pytest-recording's cassette paths for a test: ``marker_args`` are its vcr markers' extra cassettes."""
    directory = Path(vcr_cassette_dir) if vcr_cassette_dir is not None else default_cassette_dir(test_file)
    name = default_cassette_name
    if name is None:
        name = _default_cassette_name(test_name, class_name)
    suffix = f".{(config or {}).get('serializer') or DEFAULT_SERIALIZER}"
    try:
        limit = int(os.pathconf(".", "PC_NAME_MAX"))
    except (AttributeError, ValueError, OSError):
        limit = 255
    if len(name) + len(suffix) > limit:
        digest = hashlib.md5(name.encode()).hexdigest()
        name = f"{name[: limit - len(suffix) - len(digest) - 3]}...{digest}"
    primary = _primary(directory, name, suffix, config or {})
    extras = tuple(
        Path(arg) if os.path.isabs(os.fspath(arg)) else directory / os.fspath(arg) for arg in marker_args
    )
    return VcrCassettePaths(directory, primary, extras)


_default_cassette_name = default_cassette_name  # the function, which a parameter of cassette_paths shadows


def _primary(directory: Path, name: str, suffix: str, config: Mapping[str, object]) -> Path:
    """vcrpy's path of the cassette named ``name``, as ``VCR.get_merged_config`` builds it."""
    transformer = config.get("path_transformer")
    library = config.get("cassette_library_dir") or directory
    if transformer is None:
        path = name if name.endswith(suffix) else name + suffix
    elif callable(transformer):
        try:
            path = os.fspath(transformer(name))
        except Exception as exc:
            raise ConfigError(
                f"vcr_config's path_transformer failed on the cassette name {name!r}: "
                f"{type(exc).__name__}: {exc}",
                place=PLACE,
                fixes=("make it return a path for a cassette name (vcrpy calls it the same way)",),
            ) from None
    else:
        raise ConfigError(
            f"vcr_config's path_transformer is not callable: {transformer!r}",
            place=PLACE,
            fixes=("give a function of the cassette name, e.g. vcr.VCR.ensure_suffix('.yaml')",),
        )
    if not isinstance(library, str | os.PathLike):
        raise ConfigError(
            f"vcr_config's cassette_library_dir is not a path: {library!r}",
            place=PLACE,
            fixes=("give a folder, e.g. cassette_library_dir='tests/cassettes'",),
        )
    folder = os.fspath(library)
    return Path(path if path.startswith(folder) else os.path.join(folder, path))


def merge_vcr_config(
    vcr_config: Mapping[str, object] | None, marker_kwargs: Sequence[Mapping[str, object]] = ()
) -> Document:
    """The ``vcr_config`` fixture's dict updated with the markers' keyword arguments (``marker_kwargs``
    closest first, in ``iter_markers`` order), the closest winning, as pytest-recording merges them."""
    merged = copy.deepcopy(dict(vcr_config or {}))
    for kwargs in reversed(list(marker_kwargs)):
        merged.update(kwargs)
    return merged


def resolve_record_mode(merged: Mapping[str, object], cli_record_mode: str | None = None) -> str:
    """The vcr record mode: the command line's, else the merged config's, else ``none``."""
    mode = cli_record_mode if cli_record_mode is not None else merged.get("record_mode", DEFAULT_RECORD_MODE)
    mode = getattr(mode, "value", mode)  # vcr.record_mode.RecordMode members
    if mode not in VCR_RECORD_MODES:
        raise ConfigError(
            f"unknown vcr record_mode {mode!r}",
            evidence=(f"valid record modes: {', '.join(VCR_RECORD_MODES)}",),
            place="@pytest.mark.vcr(record_mode=...) or the vcr_config fixture",
            fixes=("use one of the valid record modes, e.g. record_mode='none' to replay only",),
        )
    return str(mode)


def agentreplay_record_mode(vcr_record_mode: str) -> AgentReplayRecord:
    """The ``--agentreplay-record`` equivalent of a vcr record mode."""
    if vcr_record_mode == "none":
        return "none"
    if vcr_record_mode in ("once", "new_episodes"):
        return "missing"
    return "all"


def allowed_hosts(merged: Mapping[str, object]) -> tuple[str, ...]:
    return host_names(split_patterns(merged.get("allowed_hosts")), "allowed_hosts in vcr_config")


def vcr_options(merged: Mapping[str, object]) -> Document:
    """The merged config without the keys pytest-recording interprets itself (what vcrpy gets)."""
    return {k: v for k, v in merged.items() if k not in PYTEST_RECORDING_KEYS}


@dataclass
class VcrMatch:
    """A played interaction: its index among the test's interactions and the response to serve."""

    response: HttpResponse
    index: int


def to_vcr_request(request: HttpRequest) -> Any:
    from vcr.request import Request  # heavy: vcrpy, only where one of its cassettes is served

    return Request(request.method, request.url, request.body or None, dict(request.headers))


class VcrReplay:
    """The recorded interactions of one vcr-marked test, replayed with vcrpy's matching. ``vcr``: the
    session's ``vcr.VCR``, whose registered matchers, serializers and persister apply."""

    def __init__(
        self,
        paths: VcrCassettePaths | Sequence[str | os.PathLike[str]],
        merged_config: Mapping[str, object] | None = None,
        *,
        vcr: Any = None,
    ) -> None:
        from vcr.cassette import Cassette  # heavy: vcrpy, only where one of its cassettes is served
        from vcr.config import VCR  # heavy: likewise
        from vcr.persisters.filesystem import FilesystemPersister  # heavy: likewise

        files = paths.all if isinstance(paths, VcrCassettePaths) else tuple(Path(p) for p in paths)
        if not files:
            raise ValueError("VcrReplay needs at least one cassette path")
        config = dict(merged_config or {})
        check_vcr_options(config)
        options = vcr_options(config)
        base = vcr if vcr is not None else VCR(record_mode="none")
        given = options.pop("persister", None)
        if given is None and base.persister is not FilesystemPersister:
            given = base.persister
        persister = Persister(files) if given is None else ProjectPersister(given, files[0])
        self._persister: Persister | ProjectPersister = persister
        try:
            merged = base.get_merged_config(
                path=os.fspath(files[0]),
                persister=persister,
                serializer=config.get("serializer", DEFAULT_SERIALIZER),
                record_mode="none",  # served in place, never recorded into
                **options,
            )
        except KeyError as exc:  # an unknown matcher or serializer name
            raise ConfigError(
                f"vcr_config names an unknown vcrpy matcher or serializer: {exc}",
                evidence=(
                    f"config: {sorted(options)}",
                    f"registered matchers: {', '.join(sorted(base.matchers))}",
                    f"registered serializers: {', '.join(sorted(base.serializers))}",
                ),
                place=PLACE,
                fixes=(
                    "use vcrpy's names (match_on=['method', 'uri', 'body', ...])",
                    "register your own in a conftest.py: def pytest_recording_configure(config, vcr): "
                    "vcr.register_matcher(name, fn)",
                ),
            ) from None
        except (TypeError, ValueError) as exc:  # a value vcrpy refuses (a record mode, skip_patchers...)
            raise ConfigError(
                f"vcrpy refuses this vcr_config: {type(exc).__name__}: {exc}",
                evidence=(f"config: {sorted(options)}",),
                place=PLACE,
                fixes=("give the option a value vcrpy takes (see vcrpy's use_cassette options)",),
            ) from None
        accepted = inspect.signature(Cassette.__init__).parameters
        self._cassette = Cassette.load(**{k: v for k, v in merged.items() if k in accepted})
        self.paths = files
        self.config = config

    @property
    def found(self) -> tuple[Path, ...]:
        return tuple(self._persister.found)

    def unplayed(self) -> list[tuple[str, str]]:
        counts = self._cassette.play_counts
        return [(r.method, r.uri) for i, (r, _) in enumerate(self._cassette.data) if counts[i] == 0]

    def interactions(self) -> list[VcrInteraction]:
        """The recorded interactions after loading (``before_record_*`` applied), in this project's shapes."""
        return [
            VcrInteraction(request_from_vcr(r.method, r.uri, dict(r.headers), r.body), response_from_vcr(x))
            for r, x in self._cassette.data
        ]

    def ignored(self, request: HttpRequest) -> bool:
        """True when vcrpy would send the request live, unrecorded (``ignore_hosts``, a filter)."""
        return self._cassette.filter_request(to_vcr_request(request)) is None

    def play(self, request: HttpRequest) -> VcrMatch | None:
        from vcr.errors import UnhandledHTTPRequestError  # heavy: vcrpy, as above

        counts = self._cassette.play_counts
        before = dict(counts)
        try:
            raw = self._cassette.play_response(to_vcr_request(request))
        except UnhandledHTTPRequestError:
            return None
        # The interaction played is the one whose count went up (vcrpy does not say which it picked).
        index = next((int(i) for i, n in counts.items() if n != before.get(i, 0)), -1)
        return VcrMatch(response_from_vcr(raw), index)

    def closest(self, request: HttpRequest, limit: int = 3) -> list[str]:
        """The recorded requests closest to ``request``, with the matchers that failed (for errors)."""
        from vcr.matchers import get_matchers_results  # heavy: vcrpy, as above

        cassette = self._cassette
        live = cassette.filter_request(to_vcr_request(request))
        if live is None:
            return []
        scored: list[tuple[int, int, str]] = []
        for index, (stored, _) in enumerate(cassette.data):
            ok, failed = get_matchers_results(live, stored, cassette._match_on)
            played = " (already played)" if cassette.play_counts[index] else ""
            names = ", ".join(name for name, _ in failed) or "none"
            scored.append((len(ok), -index, f"{stored.method} {stored.uri}{played}: differs in {names}"))
        scored.sort(reverse=True)
        return [text for _, _, text in scored[:limit]]
