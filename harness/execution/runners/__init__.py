"""Runners registry: ``reference`` (the built-in trainer), ``command`` (a lab's own script) and
``replay`` (a recorded curve replayed as if training)."""

from harness.execution.runners import command, reference, replay
from harness.execution.runners.base import RUNNERS, Outcome, RunContext, Runner, Sink, get_runner

__all__ = [
    "RUNNERS",
    "Outcome",
    "RunContext",
    "Runner",
    "Sink",
    "command",
    "get_runner",
    "reference",
    "replay",
]
