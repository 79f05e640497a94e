"""What the CLI writes to a terminal: shown, never executed.

A store is shared (sweeps, knobs, runs and errors written by other people and other programs),
and a name such as ``"\\x1b]52;c;...\\x07"`` printed raw would write to a reader's clipboard,
retitle their window or hide a line. :func:`neutralise` writes every such character as its
escape; :func:`terminal_safe` (entered by ``scalerl.harness.cli.main`` for every command) puts
a :class:`TerminalSafe` over stdout and stderr, so no print, log line or error of any command
escapes it. JSON output is unaffected: ``json.dumps`` escapes these characters already.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any, TextIO

# What never reaches a terminal as itself (:func:`neutralise`): C0 controls but tab and newline
# (ESC starts every escape sequence: a title, a clipboard write, a cursor move that hides a line),
# DEL, C1 controls (U+0080-U+009F: CSI and OSC in one character), the bidirectional overrides that
# reorder what a line shows, and lone surrogates (no encoding can print them: a traceback).
_UNSAFE: dict[int, str] = {
    c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F, *range(0x80, 0xA0)) if c not in (0x09, 0x0A)
}
_UNSAFE.update({c: f"\\u{c:04x}" for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))})
_UNSAFE.update({c: f"\\u{c:04x}" for c in range(0xD800, 0xE000)})
_KEEP_CR = {**_UNSAFE}
del _KEEP_CR[0x0D]


def neutralise(text: str, *, keep_cr: bool = False) -> str:
    """``text`` with every character that could act on a terminal written as its escape
    (``\\x1b``, ``\\u202e``), so what a store holds (a sweep, knob or run name, an error) is shown,
    never executed. ``keep_cr``: a carriage return passes (a job's own log, whose progress bars
    redraw their line with it)."""
    return text.translate(_KEEP_CR if keep_cr else _UNSAFE)


class TerminalSafe:
    """A text stream whose writes pass through :func:`neutralise`: ``scalerl.harness.cli.main``
    puts one over stdout and stderr for every command, so no print, log line or error message
    of any command can write an escape sequence. ``raw_stream`` is the stream below it, for the
    one writer that sends escape sequences of its own (the live progress display)."""

    def __init__(self, stream: TextIO) -> None:
        self.raw_stream = stream

    def write(self, text: str) -> int:
        return self.raw_stream.write(neutralise(text))

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:  # flush, isatty, fileno, encoding, ...
        return getattr(self.raw_stream, name)


def raw(stream: TextIO) -> TextIO:
    """The stream under a :class:`TerminalSafe` (``stream`` itself otherwise)."""
    inner: TextIO = getattr(stream, "raw_stream", stream)
    return inner


@contextlib.contextmanager
def terminal_safe() -> Iterator[None]:
    """For the duration of a command, stdout and stderr neutralise what they are given."""
    before = sys.stdout, sys.stderr
    sys.stdout = TerminalSafe(sys.stdout)
    sys.stderr = TerminalSafe(sys.stderr)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = before
