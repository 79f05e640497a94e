"""Task registry: procedurally generated, verifiable reasoning tasks (see :mod:`.base`)."""

from scalerl.harness.rl.tasks.base import (
    TASKS,
    THINK_END,
    Problem,
    Split,
    Task,
    make_split,
    make_task,
    register_task,
)

__all__ = ["TASKS", "THINK_END", "Problem", "Split", "Task", "make_split", "make_task", "register_task"]
