"""Crash-safe file writes and cross-process locks for cassette and blob files."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import socket
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from ..exceptions import CassetteNotSavedError

# Loaders skip files with this prefix: a SIGKILL between create and rename can leave one behind; the next
# write into the same folder removes it (see ``remove_stale_parts``).
TEMP_PREFIX = ".agentreplay-tmp-"
TEMP_SUFFIX = ".part"
LOCK_DIR_NAME = "pytest-agentreplay-locks"
LOCK_TIMEOUT_S = 300.0
# A temp file this old is left over whoever wrote it: a write takes milliseconds, not minutes.
STALE_PART_AGE_S = 300.0
# Temp names carry the writer: ``<prefix><host tag>-<pid>-<random>.part``. The pid is only meaningful on
# the same host (a shared folder may be written from containers or machines with their own pids).
_HOST_TAG = hashlib.sha256(socket.gethostname().encode("utf-8", "surrogatepass")).hexdigest()[:8]


# mkstemp creates 0600 files; cassettes are shared artefacts, so honour the umask like open() does.
_UMASK = os.umask(0)
os.umask(_UMASK)
_FILE_MODE = 0o666 & ~_UMASK


def _fsync_dir(directory: Path) -> None:
    # Makes the rename itself durable; not every platform can open a directory.
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data``: readers see the old file or the new one, never a part."""
    path = Path(path)
    directory = path.parent
    directory.mkdir(parents=True, exist_ok=True)
    remove_stale_parts(directory)
    fd, tmp_name = tempfile.mkstemp(
        prefix=f"{TEMP_PREFIX}{_HOST_TAG}-{os.getpid()}-", suffix=TEMP_SUFFIX, dir=directory
    )
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), _FILE_MODE)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    _fsync_dir(directory)


def _writer_alive(name: str) -> bool | None:
    """Whether the process that created temp file ``name`` still runs; None when that cannot be told
    (no writer in the name, another host, or this process, whose threads may be writing now)."""
    host, _, rest = name[len(TEMP_PREFIX) :].partition("-")
    pid_text, _, _ = rest.partition("-")
    if host != _HOST_TAG or not pid_text.isdigit():
        return None
    pid = int(pid_text)
    if pid == os.getpid():
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: it exists, owned by someone else
        pass
    return True


def remove_stale_parts(directory: Path) -> list[str]:
    """Remove (and name) the temp files a killed writer left in ``directory``: those whose writer is gone or
    older than ``STALE_PART_AGE_S``; never a live writer's, so safe without a lock."""
    removed: list[str] = []
    try:
        entries = os.scandir(directory)
    except OSError:
        return removed
    now = time.time()
    with entries:
        for entry in entries:
            name = entry.name
            if not (name.startswith(TEMP_PREFIX) and name.endswith(TEMP_SUFFIX)):
                continue
            with contextlib.suppress(OSError):
                age = now - entry.stat(follow_symlinks=False).st_mtime
                if _writer_alive(name) is False or age > STALE_PART_AGE_S:
                    os.unlink(entry.path)
                    removed.append(name)
    return removed


def lock_path_for(path: Path) -> Path:
    """Where the lock of ``path`` lives: outside the cassette folder so reviews see no lock files."""
    digest = hashlib.sha256(str(Path(path).resolve()).encode("utf-8", "surrogatepass")).hexdigest()
    return Path(tempfile.gettempdir()) / LOCK_DIR_NAME / f"{digest}.lock"


def write_locked(path: Path, content: Callable[[], bytes | None]) -> bool:
    """Replace ``path`` atomically with ``content()`` (None: nothing), both under its lock, so ``content``
    may read the file and store the new one's blobs first; whether anything was written."""
    with path_lock(path):
        try:
            data = content()
            if data is not None:
                atomic_write_bytes(path, data)
        except OSError as exc:
            raise save_failed(path, exc) from None
    return data is not None


@contextlib.contextmanager
def path_lock(path: Path) -> Iterator[None]:
    """Serialise writers of one file across threads, processes and pytest-xdist workers."""
    import filelock  # here: a replay that writes nothing does not pay its import (~10 ms)

    lock_file = lock_path_for(path)
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with filelock.FileLock(str(lock_file), timeout=LOCK_TIMEOUT_S):
        yield


_NO_PERMISSION = (errno.EACCES, errno.EPERM, errno.EROFS)
_IN_THE_WAY = (errno.ENOTDIR, errno.EEXIST, errno.EISDIR)


def save_failed(path: Path, exc: OSError) -> CassetteNotSavedError:
    """A failed write of cassette ``path`` or its blobs as this package's error, the likeliest fix first."""
    code = exc.errno
    name = errno.errorcode.get(code, f"errno {code}") if code is not None else type(exc).__name__
    text = exc.strerror or str(exc) or type(exc).__name__
    # A failed rename names its target second: that, not the temporary file, is what was being written.
    failed = Path(exc.filename2 or exc.filename or path)
    folder = path.parent
    space = f"free space on the disk holding {folder} (`df -h {folder}`), then try again"
    access = (
        f"make {folder} and its blob store writable for this user (permissions, ownership, a read-only "
        "mount), then try again"
    )
    elsewhere = (
        "or write cassettes to a writable folder: `--agentreplay-cassette-dir DIR` "
        "(ini `agentreplay_cassette_dir`, `[tool.agentreplay] cassette_dir`)"
    )
    # ENOSPC, EDQUOT, EIO...: space first.
    fixes = [access, space, elsewhere] if code in _NO_PERMISSION + _IN_THE_WAY else [space, access, elsewhere]
    if code in _IN_THE_WAY:
        fixes.insert(
            0, f"a file stands where a folder is needed (or the reverse) on the way to {failed}: move it away"
        )
    return CassetteNotSavedError(
        f"cassette {path.name} {CassetteNotSavedError.MARK} with {name} ({text})",
        evidence=[
            f"writing {failed}: [Errno {code}] {name}: {text}",
            "nothing was replaced: the cassette already at this path (if any) and its blobs are unchanged",
        ],
        cassette=path,
        fixes=fixes,
    )
