"""Runners registry: ``reference`` (the built-in trainer) and ``command`` (a lab's own script)."""

from harness.execution.runners import command, reference
from harness.execution.runners.base import RUNNERS, Outcome, RunContext, Runner, Sink, get_runner

__all__ = ["RUNNERS", "Outcome", "RunContext", "Runner", "Sink", "command", "get_runner", "reference"]
