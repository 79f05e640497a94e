"""Replacing a file atomically when more than one process may write it at once.

The write goes to a temporary file of its own beside the target, then ``os.replace`` swaps it in,
so a reader sees the old file or the new one, never half of one. The temporary name is unique per
call: two writers that shared one fixed name (``state.tmp``) could rename each other's file away,
and the second ``os.replace`` then fails with FileNotFoundError. That happens for real when a run's
superseded attempt is still stopping while its successor checkpoints into the same folder.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path

PRIVATE = 0o600


def _umask() -> int:
    # Read by setting it (there is no getter); restored at once.
    mask = os.umask(0)
    os.umask(mask)
    return mask


_KINDS = (
    (stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
)  # fmt: skip


class NotRegularFileError(OSError):
    """The target of an atomic write exists and is not a regular file: it is never replaced."""


def replaceable(path: Path) -> Path:
    """The file an atomic write of ``path`` replaces: ``path`` itself when it is missing or a
    regular file, the regular file a symlink points to (the link stays), else
    :class:`NotRegularFileError`. ``os.replace`` would swap a device node, a FIFO or a socket for
    a regular file (run as root, ``-o /dev/null`` destroyed the system's null device)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return path
    target = path
    if stat.S_ISLNK(st.st_mode):
        target = Path(os.path.realpath(path))
        try:
            st = os.stat(target)
        except FileNotFoundError:
            raise NotRegularFileError(
                errno.ENOENT, f"{path} is a symlink to {target}, which does not exist; not followed"
            ) from None
    if stat.S_ISREG(st.st_mode):
        return target
    kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a regular file")
    where = f"{path} (-> {target})" if target != path else str(path)
    raise NotRegularFileError(errno.EEXIST, f"{where} is {kind}, not a regular file; it is never replaced")


def write_atomic(path: Path, text: str, *, mode: int | None = None, durable: bool = False) -> None:
    """Replace ``path`` with ``text`` (UTF-8) atomically.

    ``mode``: the file's permission bits; None gives what ``open()`` would (0o666 less the umask),
    ``PRIVATE`` keeps it to its owner from the first byte (a file that may carry a database URL).
    ``durable``: fsync the file and its folder, so the new content survives a power cut.
    Nothing is left behind when the write fails. Only a regular file is ever replaced (a symlink
    to one is written through): anything else raises :class:`NotRegularFileError` (an OSError)
    before a byte is written (:func:`replaceable`).
    """
    path = replaceable(path)
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            os.fchmod(fh.fileno(), (0o666 & ~_umask()) if mode is None else mode)
            fh.write(text)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if durable:
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
