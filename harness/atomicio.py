"""Replacing a file atomically when more than one process may write it at once.

The write goes to a temporary file of its own beside the target, then ``os.replace`` swaps it in,
so a reader sees the old file or the new one, never half of one. The temporary name is unique per
call: two writers that shared one fixed name (``state.tmp``) could rename each other's file away,
and the second ``os.replace`` then fails with FileNotFoundError. That happens for real when a run's
superseded attempt is still stopping while its successor checkpoints into the same folder.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

PRIVATE = 0o600


def _umask() -> int:
    # Read by setting it (there is no getter); restored at once.
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomic(path: Path, text: str, *, mode: int | None = None, durable: bool = False) -> None:
    """Replace ``path`` with ``text`` (UTF-8) atomically.

    ``mode``: the file's permission bits; None gives what ``open()`` would (0o666 less the umask),
    ``PRIVATE`` keeps it to its owner from the first byte (a file that may carry a database URL).
    ``durable``: fsync the file and its folder, so the new content survives a power cut.
    Nothing is left behind when the write fails.
    """
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
