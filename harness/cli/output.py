"""``--json``: one switch for every command, and one place that writes its document.

The contract (README, "Scripting with --json"): with ``--json``, stdout carries exactly one JSON
document, the command's result or ``{"error": {"type", "message", "exit_code"}}``, and the exit
code is the one the command exits with without ``--json``. Everything a command says to a person
(progress, notes, per-file lines) goes to stderr meanwhile. :func:`session` (entered by
``scalerl.harness.cli.main``) owns that swap, so a command only calls :func:`emit` with its
result; one that never does still leaves a document (``{"command", "exit_code"}``) on stdout, so
a script never reads an empty stdout as success.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TextIO

FLAG = "--json"

# The terminal-safe layer every command's output goes through (one sanitizer, below the CLI so
# the progress display uses it too).
from scalerl.harness.terminal import neutralise, raw, terminal_safe  # noqa: E402

__all__ = ["emit", "emit_error", "neutralise", "raw", "session", "stdout", "terminal_safe"]
HELP = "print the result (or the error) as one JSON document on stdout; human text goes to stderr"


@dataclass
class _Session:
    """The one JSON document of a ``--json`` command: where it goes, and whether it went."""

    out: TextIO
    emitted: bool = False
    command: str = ""


_session: _Session | None = None


def stdout() -> TextIO:
    """Where results go: stdout (under ``--json``, the real one, not the stderr prints go to)."""
    return sys.stdout if _session is None else _session.out


def emit(document: Any) -> None:
    """Write the command's result. Under ``--json`` it is the one document on stdout (a second
    call is a bug, so it raises); without it, the document is printed as JSON all the same (the
    commands that print JSON only on request call this under ``args.json``)."""
    text = json.dumps(document, indent=2, default=str)
    if _session is None:
        print(text)
        return
    if _session.emitted:
        raise RuntimeError("a --json command emitted two documents")
    _session.out.write(text + "\n")
    _session.out.flush()
    _session.emitted = True


def error_document(kind: str, message: str, exit_code: int) -> dict[str, Any]:
    return {"error": {"type": kind, "message": message, "exit_code": exit_code}}


def emit_error(kind: str, message: str, exit_code: int) -> None:
    """Under ``--json``, the error as the command's document (a no-op otherwise). A command that
    failed after emitting its result keeps that result (its exit code says it failed)."""
    if _session is not None and not _session.emitted:
        emit(error_document(kind, message, exit_code))


def usage_error(message: str) -> None:
    """argparse's usage error (exit 2) as the document: it comes before any session exists."""
    sys.stdout.write(json.dumps(error_document("UsageError", message, 2)) + "\n")
    sys.stdout.flush()


@contextlib.contextmanager
def session(command: str) -> Iterator[None]:
    """Run a command under ``--json``: ``print`` goes to stderr, :func:`emit` to the real stdout."""
    global _session
    outer = _session
    _session = _Session(out=sys.stdout, command=command)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        _session = outer


def finish(exit_code: int) -> None:
    """End of a ``--json`` command: if it printed no document, leave the plain one."""
    if _session is not None and not _session.emitted:
        emit({"command": _session.command, "exit_code": exit_code})


def add_json_flags(parser: argparse.ArgumentParser) -> None:
    """Give every command parser under ``parser`` a ``--json`` (those with their own keep theirs),
    so ``scalerl COMMAND --help`` lists it; :func:`lift` makes it work before the command too."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                group = any(isinstance(a, argparse._SubParsersAction) for a in sub._actions)
                if not group and FLAG not in sub._option_string_actions:
                    sub.add_argument(FLAG, action="store_true", help=HELP)
                add_json_flags(sub)


def lift(tokens: list[str]) -> tuple[list[str], bool]:
    """``--json`` wherever it stands before ``--`` (``scalerl --json ls`` as ``scalerl ls --json``)."""
    end = tokens.index("--") if "--" in tokens else len(tokens)
    wanted = FLAG in tokens[:end]
    return [t for i, t in enumerate(tokens) if i >= end or t != FLAG], wanted
