"""Progress for the commands that take a while (``fit``, ``import``, ``report``), on a terminal only.

:func:`activity` shows what the command is doing, on stderr, through ``rich`` (a spinner with the
current step, and a bar where the work is counted: the runs an import writes). Nothing is shown
when stderr is not a terminal (a log, CI, a pipe) or under ``--json``: stdout never carries it, and
a script reading the command's output sees exactly what it saw before. ``rich`` comes with the
``analysis`` extra those commands need anyway, and is imported only when a terminal will show it.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any


class Activity:
    """What a command reports while it works: :meth:`step` names the current step, :meth:`count`
    advances a counted step. Both are no-ops when nothing is shown."""

    def __init__(self, progress: Any = None, task: Any = None) -> None:
        self._progress = progress
        self._task = task

    @property
    def shown(self) -> bool:
        return self._progress is not None

    def step(self, text: str) -> None:
        if self._progress is not None:
            self._progress.update(self._task, description=text, total=None, completed=0)

    def count(self, done: int, total: int, text: str) -> None:
        if self._progress is not None:
            self._progress.update(self._task, description=text, total=total, completed=done)


def on_terminal(as_json: bool) -> bool:
    """Whether progress is shown: stderr is a terminal and the command is not under ``--json``."""
    isatty = getattr(sys.stderr, "isatty", None)
    return not as_json and bool(isatty and isatty())


@contextlib.contextmanager
def activity(first: str, *, as_json: bool = False) -> Iterator[Activity]:
    """Show ``first`` (then what :class:`Activity` is told) on stderr while the block runs, on a
    terminal; the line is cleared when the block ends, so the command's own output follows."""
    if not on_terminal(as_json):
        yield Activity()
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn

    console = Console(file=sys.stderr)
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task(first, total=None)
        yield Activity(progress, task)
