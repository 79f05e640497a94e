"""Runners registry: ``reference`` (the built-in trainer), ``command`` (a lab's own script),
``replay`` (a recorded curve replayed as if training) and ``trl`` (TRL's GRPOTrainer)."""

from scalerl.harness.execution.runners import command, reference, replay, trl
from scalerl.harness.execution.runners.base import RUNNERS, Outcome, RunContext, Runner, Sink, get_runner

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
    "trl",
]
