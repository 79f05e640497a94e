"""Reading a user-named file with bounds: a regular file, of at most a known size.

``/dev/zero``, a FIFO or ``/dev/stdin`` has no end a reader can wait for, and a multi-gigabyte file
named by mistake fills memory before any parser sees a line. Every file the product reads whole
because a user named it (recipes, sweeps, profiles, mapping files, imported curve files) is checked
here first, so such a file fails at once with an error naming it, its size and the limit.

``error(reason, fix)`` builds the caller's own exception (a ConfigError naming the file, an
ImportFormatError...), so each surface keeps its exit code and message shape.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

from scalerl.harness.errors import HarnessError

MiB = 1 << 20
ErrorFactory = Callable[[str, str], HarnessError]


def check_regular(path: Path, limit: int, what: str, error: ErrorFactory, *, fix: str) -> int:
    """The size of ``path`` if it is a regular file of at most ``limit`` bytes; else raises."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise error("file not found", "check the path") from None
    except OSError as err:
        raise error(f"cannot read: {err.strerror}", "check the path and its permissions") from None
    if stat.S_ISDIR(st.st_mode):
        raise error(f"a directory, not a {what}", "name the file")
    if not stat.S_ISREG(st.st_mode):
        # A device, FIFO or socket: reading it may never end (``/dev/zero``) or block forever.
        raise error(
            f"not a regular file (a device, pipe or socket), so not a {what}",
            "write what it holds to a regular file and name that",
        )
    if st.st_size > limit:
        raise error(f"{st.st_size:,} bytes, more than the {limit:,} a {what} may be", fix)
    return int(st.st_size)


def read_text(path: Path, limit: int, what: str, error: ErrorFactory, *, fix: str) -> str:
    """The UTF-8 text of a regular file of at most ``limit`` bytes (see :func:`check_regular`).
    Reads at most ``limit + 1`` bytes, so a file that grows after the check cannot run past it."""
    check_regular(path, limit, what, error, fix=fix)
    try:
        with path.open("rb") as fh:
            data = fh.read(limit + 1)
    except OSError as err:
        raise error(f"cannot read: {err.strerror}", "check the path and its permissions") from None
    if len(data) > limit:
        raise error(f"more than the {limit:,} bytes a {what} may be", fix)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise error(
            f"not UTF-8 text (byte {err.start}: {data[err.start : err.start + 1]!r})",
            f"save the {what} as UTF-8",
        ) from None
