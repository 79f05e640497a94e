"""The local files a reference-trainer recipe reads (a checkpoint, a dataset) and their state.

``scalerl config`` validates a recipe on any machine, the laptop where it is written included,
so nothing here opens a file: it says, per field, whether the path is still a placeholder
(``<...>``, as the examples ship), missing, or present. The trainer itself refuses a placeholder
or a missing path with a :class:`~scalerl.harness.errors.ConfigError` when a run starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from scalerl.harness.recipe.schema import Recipe, ReferenceRunnerConfig, TrlRunnerConfig

State = Literal["placeholder", "missing", "present"]


@dataclass(frozen=True)
class LocalPath:
    field: str  # as written in a recipe: model.path, task.params.path, ...
    path: str
    state: State


def local_paths(recipe: Recipe) -> list[LocalPath]:
    """Every local path the recipe's trainer reads, with its state; validates the task's params
    (a bad one raises :class:`~scalerl.harness.errors.ConfigError`) without reading its files."""
    from scalerl.harness.rl.tasks import make_task
    from scalerl.harness.rl.tasks.records import is_placeholder

    if not isinstance(recipe.runner, ReferenceRunnerConfig | TrlRunnerConfig):
        return []
    fields: list[tuple[str, str]] = []
    if recipe.model.path is not None:
        fields.append(("model.path", recipe.model.path))
    task = make_task(recipe.task.name, recipe.task.params)
    try:
        fields += [(f"task.params.{name}", path) for name, path in task.paths().items()]
    finally:
        task.close()
    out = []
    for name, path in fields:
        state: State = "present" if Path(path).exists() else "missing"
        if is_placeholder(path):
            state = "placeholder"
        out.append(LocalPath(name, path, state))
    return out
