"""Crash-safe file writes and cross-process locks for cassette and blob files."""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import filelock

# Loaders skip files with this prefix: a SIGKILL between create and rename can leave one behind.
TEMP_PREFIX = ".agentreplay-tmp-"
LOCK_DIR_NAME = "pytest-agentreplay-locks"
LOCK_TIMEOUT_S = 300.0


def _default_file_mode() -> int:
    # mkstemp creates 0600 files; cassettes are shared artefacts, so honour the umask like open() does.
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


_FILE_MODE = _default_file_mode()


def _fsync_dir(directory: Path) -> None:
    # Makes the rename itself durable; not every platform can open a directory.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that readers see either the old file or the new one, never a part."""
    path = Path(path)
    directory = path.parent
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=TEMP_PREFIX, suffix=".part", dir=directory)
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


def lock_path_for(path: Path) -> Path:
    """Where the lock of ``path`` lives: outside the cassette folder so reviews see no lock files."""
    digest = hashlib.sha256(str(Path(path).resolve()).encode("utf-8", "surrogatepass")).hexdigest()
    return Path(tempfile.gettempdir()) / LOCK_DIR_NAME / f"{digest}.lock"


@contextlib.contextmanager
def path_lock(path: Path, timeout: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """Serialise writers of one file across threads, processes and pytest-xdist workers."""
    lock_file = lock_path_for(path)
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with filelock.FileLock(str(lock_file), timeout=timeout):
        yield
