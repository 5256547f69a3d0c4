"""The session controller: the one object that owns a pytest session's agent-replay bookkeeping.

Under xdist each worker collects the whole suite and runs part of it: workers send their collection facts
(:meth:`worker_output`) to the controller process, statuses arrive with the test reports, and only the
controller (the process without ``workerinput``) decides session-wide questions.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from os.path import join
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ..cassette.unused import is_cassette_file, remove, unused_cassettes
from ..core.config import Settings
from ..core.constants import BLOB_DIR_NAME, CASSETTE_SUFFIX
from ..core.documents import Document
from ..core.paths import module_cassette_dir, recorded_nodeid
from ..exceptions import ReportError
from ..report.status import Status, TestStatus
from ..report.summary import NetworkGuard, summary_lines, tolerated_lines

if TYPE_CHECKING:
    from ..guard.session_namespace import Isolation
    from ..report.comparison_table import Comparison

WORKER_OUTPUT_KEY = "agentreplay"


# A NamedTuple, not a dataclass: this module is imported at every pytest start-up.
class CollectedTest(NamedTuple):
    """A collected test that uses agent replay, and where its cassette is."""

    nodeid: str
    module: Path
    # None when a project's ``agentreplay_cassette_path`` fixture override decides it at run time.
    cassette: Path | None


class CollectionFacts:
    """What one process learnt at collection; merged across xdist workers."""

    def __init__(self) -> None:
        self.known: set[str] = set()
        self.module_dirs: set[str] = set()
        # Node ids whose cassette only a fixture override knows (resolved only if the test runs).
        self.runtime_placed: set[str] = set()
        # Refusals made for tests that had already ended (stray threads, late child processes).
        self.strays: list[str] = []
        self.collected = False

    def merge(self, other: Mapping[str, object]) -> None:
        for name in _FACT_SETS:
            getattr(self, name).update(_strings(other.get(name)))
        self.strays.extend(_strings(other.get("strays")))
        self.collected = self.collected or bool(other.get("collected"))

    def to_dict(self) -> Document:
        sets: Document = {name: sorted(getattr(self, name)) for name in _FACT_SETS}
        return {**sets, "strays": list(self.strays), "collected": self.collected}


_FACT_SETS = ("known", "module_dirs", "runtime_placed")


class SessionController:
    def __init__(self, settings: Settings, rootdir: Path, *, is_worker: bool) -> None:
        self.settings = settings
        self.rootdir = rootdir
        self.is_worker = is_worker
        self.facts = CollectionFacts()
        self.statuses: list[TestStatus] = []
        self._status_index: dict[str, int] = {}
        self.comparisons: list[Document] = []
        # What each replaying test served instead of spending (``replay.modes.not_spent``).
        self.not_spent: list[Mapping[str, object]] = []
        # (node id, call) of the calls refused without failing their test (``tolerated_hosts``).
        self.tolerated: list[tuple[str, str]] = []
        self.unused: list[str] = []
        self.removed: list[str] = []
        # JSON files in cassette folders that are not cassettes (golden files...): never unused, named only
        # when --agentreplay-update removes unused cassettes beside them.
        self.kept_not_cassettes: list[str] = []
        self.unused_skipped_reason: str | None = None
        self.failed_only_by_unused = False
        self.report_error: str | None = None
        # What --agentreplay-isolate did (plugin.py decides it before conftest files load); None: off.
        self.isolation: Isolation | None = None

    def collected(self, tests: Iterable[CollectedTest], partial_modules: set[Path]) -> None:
        # A module's cassette directory, once per module (None: only some of its tests were collected).
        module_dirs: dict[Path, str | None] = {}
        for test in tests:
            if test.cassette is None:
                self.facts.runtime_placed.add(test.nodeid)
            else:
                self.facts.known.add(str(test.cassette))
            if test.module not in module_dirs:
                whole = test.module.resolve() not in partial_modules
                found = module_cassette_dir(self.settings.cassette_dir, self.rootdir, test.module)
                module_dirs[test.module] = str(found) if whole else None
            directory = module_dirs[test.module]
            if directory is not None:
                self.facts.module_dirs.add(directory)
        self.facts.collected = True

    def worker_output(self, output: dict[str, object]) -> None:
        output[WORKER_OUTPUT_KEY] = self.facts.to_dict()

    def merge_worker(self, output: Mapping[str, object] | None) -> None:
        facts = output.get(WORKER_OUTPUT_KEY) if output else None
        if isinstance(facts, Mapping):
            self.facts.merge(facts)

    def add_status(self, status: TestStatus) -> None:
        # A test run again (pytest-rerunfailures) reports again: its last attempt is its verdict.
        nodeid = status.nodeid
        index = self._status_index.setdefault(nodeid, len(self.statuses)) if nodeid else len(self.statuses)
        self.statuses[index : index + 1] = [status]

    @property
    def red(self) -> list[TestStatus]:
        return [s for s in self.statuses if s.red]

    def finish(self, *, session_failed: bool, exit_ok: bool) -> bool:
        """Decide unused cassettes; whether a session that passed so far fails."""
        if self.is_worker:
            return False
        self.unused = [str(p) for p in self._find_unused(session_failed=session_failed)]
        if self.unused:
            if self.settings.update:
                self.removed = [str(p) for p in remove(Path(p) for p in self.unused)]
                self.unused = []
            elif self.settings.fail_on_unused and exit_ok:
                self.failed_only_by_unused = True
        if self.settings.report is not None:
            from ..report import write_report  # heavy: the redactor and the writer (~0.2 s at start-up)

            try:
                write_report(
                    self.settings.report,
                    self.statuses,
                    unused=self.unused,
                    network=self.network(),
                    comparison=self._comparison(),
                )
            except ReportError as exc:
                # Said in the summary and in the exit status: a CI job must not pass without its report.
                self.report_error = str(exc)
        failed = self.failed_only_by_unused or self.red or self.facts.strays or self.report_error is not None
        return exit_ok and bool(failed)

    def _comparison(self) -> Comparison | None:
        if not (self.comparisons or self.not_spent):
            return None
        from ..report.comparison_table import Comparison, NotSpent, table_rows

        return Comparison(table_rows(self.comparisons), NotSpent.total(self.not_spent))

    def _find_unused(self, *, session_failed: bool) -> list[Path]:
        if session_failed or not self.facts.collected:
            # A crashed or failing session says nothing reliable about which cassettes are still wanted.
            return []
        used = {s.cassette for s in self.statuses if s.cassette}
        ran = {s.nodeid for s in self.statuses if s.status not in (Status.SKIPPED, Status.XFAILED)}
        unresolved = sorted(self.facts.runtime_placed - ran)
        if unresolved:
            self.unused_skipped_reason = (
                f"{len(unresolved)} test(s) that did not run place their cassette through an "
                f"agentreplay_cassette_path fixture override (e.g. {unresolved[0]}): "
                "unused cassettes are not judged in this session"
            )
            return []
        keep = {Path(p) for p in self.facts.known | used}
        unused = unused_cassettes((Path(d) for d in self.facts.module_dirs), keep)
        found = unused.cassettes
        self.kept_not_cassettes = [str(p) for p in unused.not_cassettes]
        found_set = {p.resolve() for p in found}
        for path in self._orphans(keep):
            if path.resolve() not in found_set:
                found.append(path)
        return sorted(found)

    def _orphans(self, keep: set[Path]) -> list[Path]:
        """Cassettes whose recorded test's module no longer exists (a deleted or renamed test module)."""
        kept = {str(p) for p in keep}
        keep_resolved: set[Path] | None = None  # resolving reads every folder on the way: only if asked
        orphans = []
        # The blob store and hidden folders are pruned, not walked: a suite's cassettes are many files.
        for folder, folders, names in os.walk(self.settings.cassette_dir):
            folders[:] = [f for f in folders if f != BLOB_DIR_NAME and not f.startswith(".")]
            for name in names:
                # A kept cassette's own string needs no Path: the walk's folder is joined as pathlib would.
                if not name.endswith(CASSETTE_SUFFIX) or name.startswith(".") or join(folder, name) in kept:
                    continue
                path = Path(folder, name)
                if str(path) in kept or not path.is_file() or path.is_symlink():
                    continue
                if keep_resolved is None:
                    keep_resolved = {p.resolve() for p in keep}
                if path.resolve() in keep_resolved:
                    continue
                nodeid = recorded_nodeid(path)
                if not nodeid or not is_cassette_file(path):
                    continue
                module = nodeid.split("::", 1)[0]
                if module and not (self.rootdir / module).exists():
                    orphans.append(path)
        return orphans

    @property
    def network_isolation(self) -> Isolation:
        if self.isolation is None:
            # heavy: the guard; a session with a summary ran tests that imported it already
            from ..guard.session_namespace import OFF, Isolation

            self.isolation = Isolation(self.settings.isolate, OFF)
        return self.isolation

    def _guarded(self, modes: Iterable[str]) -> bool:
        return self.settings.block_network or any(mode != "record" for mode in modes)

    def network_level(self, mode: str) -> str:
        return self.network_isolation.level(self._guarded([mode]))

    def _session_guarded(self) -> bool:
        modes = [s.mode for s in self.statuses] or ([] if self.settings.record == "all" else ["replay"])
        return self._guarded(modes)

    def network(self) -> NetworkGuard:
        isolation = self.network_isolation
        level = isolation.level(self._session_guarded())
        return NetworkGuard(
            level, isolation.state, isolation.setting, isolation.reason, [*isolation.unreachable]
        )

    def summary_lines(self) -> list[str]:
        lines = summary_lines(self.statuses, unused=self.unused)
        lines.append(f"network guard: {self.network_isolation.describe(self._session_guarded())}")
        lines.extend(f"  removed unused cassette: {path}" for path in self.removed)
        if self.settings.update:
            lines.extend(f"  kept (not a cassette): {path}" for path in self.kept_not_cassettes)
        if self.unused_skipped_reason:
            lines.append(f"  note: {self.unused_skipped_reason}")
        if self.comparisons:
            # heavy: the comparison imports the diff package (~0.3 s at every start-up otherwise)
            from ..replay.comparison import summary_lines as comparison_lines

            lines.extend(comparison_lines(self.comparisons))
        if self.not_spent:
            from ..report.comparison_table import NotSpent  # the price table, only when a test replayed

            served = NotSpent.total(self.not_spent).line()
            lines.extend([served] if served else [])
        lines.extend(tolerated_lines(self.tolerated))
        for message in self.facts.strays:
            lines.append(f"  FAILED network access after the test ended: {message.splitlines()[0]}")
        if self.report_error is not None:
            lines.extend(
                f"  {line}" if i else f"FAILED: {line}"
                for i, line in enumerate(self.report_error.splitlines())
            )
        if self.failed_only_by_unused:
            lines.append(
                f"session FAILED only because of {len(self.unused)} unused cassette(s): remove them with "
                "`pytest --agentreplay-update` (whole suite), or set agentreplay_fail_on_unused = false"
            )
        return lines

    @property
    def has_summary(self) -> bool:
        return bool(
            self.statuses
            or self.unused
            or self.removed
            or self.unused_skipped_reason
            or self.facts.strays
            or self.tolerated
            or self.report_error
        )


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


def _strings(values: object) -> list[str]:
    return [str(v) for v in values] if isinstance(values, list | tuple | set) else []


def partial_modules(invocation_dir: Path, args: Sequence[str]) -> set[Path]:
    """Modules named with ``::`` on the command line were collected only in part: never judged."""
    return {(invocation_dir / arg.split("::", 1)[0]).resolve() for arg in args if "::" in arg}


# A rule path naming one request header (or a pattern of names): ``input_ref.headers.accept``.
_REQUEST_HEADER_PATH = r"(?:input_ref|\*\*?)\.headers\.([^.\[]+)"


def parse_project_rules(settings: Settings, rootpath: Path) -> list[str]:
    """Parse ``[tool.agentreplay.rules]`` once, at start-up, into ``settings.rules``; returns a warning for
    each rule comparing a transport request header, which cassettes leave out (``stored_form.py``)."""
    if settings.rules is None:
        return []
    # heavy: the diff package, only for a project with rules
    from ..cassette.stored_form import is_transport_header
    from ..diff.rules import parse_rules

    where = f"[tool.agentreplay.rules] of {rootpath / 'pyproject.toml'}"
    settings.rules = tuple(parse_rules(settings.rules, source="project", place=where))
    if settings.transport_headers == "keep":
        return []
    kept = settings.http.idempotency_header
    warnings = []
    for rule in settings.rules:
        found = re.fullmatch(_REQUEST_HEADER_PATH, rule.path)
        name = found.group(1).lower() if found else ""
        if rule.verdict != "ignore" and name and name != kept and is_transport_header(name):
            warnings.append(
                f'{where}: "{rule.selector}" compares the transport header {name}, which cassettes leave '
                f'out (transport_headers = "{settings.transport_headers}"): it compares nothing. Set '
                'transport_headers = "keep" in [tool.agentreplay] and record again, or remove the rule.'
            )
    return warnings
