"""What an executor ships to a job: one run of a sweep, fully resolved and self-contained.

A :class:`RunSpec` is plain data (JSON-serialisable, picklable) so the same object can be pickled
by submitit for Slurm, written to a spec file for a local subprocess, or passed in-process to the
debug executor. It carries everything the job body needs and nothing that depends on the machine
that submitted it, except ``workdir`` (which must be on a filesystem the job can see).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from scalerl.harness.errors import ExecutionError
from scalerl.harness.recipe.schema import Recipe


@dataclass(frozen=True)
class Resources:
    """The resource shape of one run; runs with equal shapes share one job array."""

    gpus_per_node: int = 0
    cpus_per_task: int = 1
    mem_gb: float | None = None
    timeout_min: int = 60
    nodes: int = 1
    tasks_per_node: int = 1

    def key(self) -> tuple[int, int, float | None, int, int, int]:
        return (
            self.gpus_per_node,
            self.cpus_per_task,
            self.mem_gb,
            self.timeout_min,
            self.nodes,
            self.tasks_per_node,
        )


@dataclass(frozen=True)
class RunSpec:
    """One run of a sweep as a job sees it.

    ``recipe`` is the full recipe (``Recipe.model_dump(mode="json")``), not only its resolved
    identity, so the job can rebuild the typed :class:`Recipe`. ``db_url`` is ``None`` when the
    job should use ``$SCALERL_DB_URL`` / the default store (keeps passwords out of spec files).

    ``provenance``: the code the submission captured (:mod:`scalerl.harness.execution.provenance`),
    recorded on the run by the attempt that runs it. ``restart_after``: set when a resubmission
    reruns the run under new code (``on_code_change: rerun``): the run's attempt count at that
    moment; the next attempt (only that one, not a later requeue) discards the run's points and
    checkpoint and starts from scratch.
    """

    sweep: str
    variant: str
    knob: str | None
    alternative: str | None
    seed: int
    run_id: str
    recipe: dict[str, Any]
    workdir: str
    db_url: str | None = None
    resources: Resources = field(default_factory=Resources)
    checkpoint_grace_s: float = 60.0
    provenance: dict[str, Any] | None = None
    restart_after: int | None = None

    def __post_init__(self) -> None:
        from scalerl.db.engine import refuse_secret

        refuse_secret(self.db_url, where="the run's spec file")

    def typed_recipe(self) -> Recipe:
        return Recipe.model_validate(self.recipe)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> RunSpec:
        data = json.loads(text)
        data["resources"] = Resources(**data.get("resources", {}))
        return cls(**data)

    def write(self, path: Path) -> None:
        """Write the spec file atomically, readable only by its owner (it may carry a DB URL)."""
        from scalerl.harness.atomicio import PRIVATE, write_atomic

        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, self.to_json(), mode=PRIVATE)

    @classmethod
    def read(cls, path: Path) -> RunSpec:
        try:
            return cls.from_json(path.read_text())
        except (OSError, ValueError, TypeError) as err:
            raise ExecutionError(
                f"{path}: cannot read the run spec ({err}); fix: resubmit the sweep with `scalerl sweep`"
            ) from err
