"""The task interface and registry: procedurally generated prompts plus a verifier.

A task turns a seed into problems (prompt text and reference answer), scores a completion
(1.0 correct, 0.0 not), and writes reference traces ("thinking, then answer") for the short
supervised warm start of the tiny policy. A lab adds its own task by subclassing :class:`Task`
and calling :func:`register_task`; recipes select it by ``task.name`` and pass ``task.params``.

Completions follow one convention: ``<thinking> </think> <answer>``; only the text after the last
end-of-thinking marker is the answer, so a forced interruption phrase that ends in ``</think>``
works unchanged.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from scalerl.harness.errors import ConfigError

THINK_END = "</think>"


@dataclass(frozen=True)
class Problem:
    """One prompt with its reference answer; ``difficulty`` is task-defined (for reports).

    ``system`` is a system prompt for checkpoints with a chat template (the trainer renders
    ``system`` + ``prompt`` through it); ``solution`` a reference completion when the data has one.
    """

    prompt: str
    answer: str
    difficulty: int
    system: str | None = None
    solution: str | None = None
    # Where the problem was read (``data.jsonl:12``), for errors about it; None when generated.
    # Not part of equality: the same prompt read from another line is the same problem.
    where: str | None = field(default=None, compare=False)


class Task(ABC):
    """A verifiable reasoning task. Implementations are pure functions of their params and seed."""

    name: ClassVar[str]

    @abstractmethod
    def problems(self, n: int, rng: random.Random) -> list[Problem]:
        """``n`` problems drawn iid from the task's difficulty mix."""

    @abstractmethod
    def trace(self, problem: Problem, rng: random.Random) -> str:
        """A reference completion (thinking, ``</think>``, answer) used for the warm start."""

    def score(self, problem: Problem, completion: str) -> float:
        """1.0 if the text after the last ``</think>`` equals the answer, else 0.0."""
        if THINK_END not in completion:
            return 0.0
        answer = completion.rsplit(THINK_END, 1)[1].strip()
        return 1.0 if answer == problem.answer else 0.0

    def score_many(
        self, problems: Sequence[Problem], completions: Sequence[str], think_end: str = THINK_END
    ) -> list[float]:
        """:meth:`score` for each pair; a task whose verifier is expensive batches it here.
        ``think_end`` is the model's end-of-thinking marker (the built-in generated tasks use the
        tiny tokenizer's ``</think>`` and ignore it)."""
        return [self.score(p, c) for p, c in zip(problems, completions, strict=True)]

    def split(self, n_train: int, n_val: int, seed: int) -> Split:
        """Train and validation problems drawn iid from the same mix; validation never trains."""
        rng = random.Random(seed)
        problems = self.problems(n_train + n_val, rng)
        return Split(train=tuple(problems[:n_train]), val=tuple(problems[n_train:]))

    def counters(self) -> dict[str, int]:
        """Running totals the trainer reports as ``diag/<name>`` (e.g. verifier timeouts)."""
        return {}

    def fingerprint(self) -> str | None:
        """A digest of the task's external data (None: the task is a pure function of its params).
        A checkpoint records it, so resuming on changed data is refused rather than mixed."""
        return None

    def paths(self) -> dict[str, str]:
        """The local files the task reads, by parameter name (``scalerl config`` checks them)."""
        return {}

    def close(self) -> None:
        """Release what the task holds (a verifier's worker process); idempotent."""
        return None


@dataclass(frozen=True)
class Split:
    """The train/validation split of a task, fixed by ``task.seed`` (not the run seed)."""

    train: tuple[Problem, ...]
    val: tuple[Problem, ...]


TASKS: dict[str, type[Task]] = {}


def register_task(cls: type[Task]) -> type[Task]:
    """Class decorator: make ``cls`` selectable as ``task.name: <cls.name>``."""
    TASKS[cls.name] = cls
    return cls


def make_task(name: str, params: Mapping[str, Any]) -> Task:
    """Instantiate a registered task; unknown names and bad params raise :class:`ConfigError`."""
    from scalerl.harness.rl.tasks import arith, dataset  # noqa: F401  (registers the built-in tasks)

    if name not in TASKS:
        raise ConfigError("unknown task", field="task.name", value=name, fix=f"use one of {sorted(TASKS)}")
    try:
        return TASKS[name](**params)
    except TypeError as err:
        raise ConfigError(
            f"bad parameters for task {name!r}: {err}",
            field="task.params",
            value=dict(params),
            fix=f"see the parameters of {TASKS[name].__name__}",
        ) from None


def make_split(task: Task, n_train: int, n_val: int, seed: int) -> Split:
    """The task's train/validation split (:meth:`Task.split`), fixed by ``task.seed``."""
    return task.split(n_train, n_val, seed)
