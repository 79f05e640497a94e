"""Off-policy pipelines: how generation and optimizer steps interleave (the ``pipeline`` knob).

Both are deterministic single-process event schedules (no threads), so a CPU run is exactly
reproducible and resumable; the interleaving they produce is the one the real systems produce.

- **PipelineRL-k** (ScaleRL's choice): the generator keeps up to ``k + 1`` batches (cohorts) in
  flight, starting at most one per *tick* and advancing every in-flight cohort by
  ``ceil(max_len / (k + 1))`` tokens per tick. After each tick the trainer consumes finished
  batches in the order they were started; every optimizer step pushes its weights into the
  generator at once, so sequences still being generated continue from their next token with the
  new weights (their KV cache stays as computed, as in PipelineRL) and each token records the
  policy version that sampled it. The trainer waits (the generator ticks on) while the oldest
  batch is unfinished. With at most ``k + 1`` batches pending and first-in-first-out
  consumption, at most ``k`` optimizer steps happen between a batch's first token and its own
  step: the lag ``step - oldest token version`` never exceeds ``k``.
- **PPO-off-policy-k**: generate one batch with the frozen policy, split its prompts into ``k``
  minibatches and take one optimizer step on each (lags 0..k-1), then generate the next.

Schedules are pickled whole into the checkpoint (in-flight cohorts, KV caches included).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable

import numpy as np
import torch

from scalerl.harness.recipe.schema import PipelineKnob
from scalerl.harness.rl.generation.base import Cohort, Generator, Rollouts

# Starts a cohort of n prompts x generations on the generator; None when no prompt is left.
CohortFactory = Callable[[int], Cohort | None]


class Schedule(ABC):
    """Yields one optimizer step's batch at a time, generating as much as that needs."""

    @abstractmethod
    def next_batch(self, gen: Generator, factory: CohortFactory, rng: torch.Generator) -> Rollouts | None:
        """The next batch to train on (None when the prompts ran out)."""

    @abstractmethod
    def lag_bound(self) -> int:
        """The largest ``step - min token version`` this schedule allows."""


class PipelineRL(Schedule):
    def __init__(self, k: int, prompts_per_batch: int, max_len: int) -> None:
        self.k = k
        self.prompts = prompts_per_batch
        self.chunk = max(1, math.ceil(max_len / (k + 1)))
        self.pending: list[Cohort] = []  # in start order; finished ones stay until consumed
        self.exhausted = False
        self.ticks = 0

    def lag_bound(self) -> int:
        return self.k

    def next_batch(self, gen: Generator, factory: CohortFactory, rng: torch.Generator) -> Rollouts | None:
        while not (self.pending and self.pending[0].done()):
            if not self.pending and self.exhausted:
                return None
            self._tick(gen, factory, rng)
        return self.pending.pop(0).result()

    def _tick(self, gen: Generator, factory: CohortFactory, rng: torch.Generator) -> None:
        if len(self.pending) < self.k + 1 and not self.exhausted:
            cohort = factory(self.prompts)
            if cohort is None:
                self.exhausted = True
            else:
                self.pending.append(cohort)
        for c in self.pending:
            if not c.done():
                gen.advance(c, self.chunk, rng)
        self.ticks += 1


class PPOOffPolicy(Schedule):
    def __init__(self, k: int, prompts_per_batch: int, generations: int, max_len: int) -> None:
        self.k = k
        self.prompts = prompts_per_batch
        self.generations = generations
        self.max_len = max_len
        self.queue: list[Rollouts] = []
        self.batches_generated = 0

    def lag_bound(self) -> int:
        return self.k - 1

    def next_batch(self, gen: Generator, factory: CohortFactory, rng: torch.Generator) -> Rollouts | None:
        if not self.queue:
            cohort = factory(self.prompts)
            if cohort is None:
                return None
            while not cohort.done():
                gen.advance(cohort, self.max_len, rng)
            self.batches_generated += 1
            full = cohort.result()
            groups = np.asarray(full.meta["group"])
            ids = list(dict.fromkeys(groups.tolist()))
            for part in np.array_split(np.asarray(ids), min(self.k, len(ids))):
                rows = [i for i, g in enumerate(groups.tolist()) if g in set(part.tolist())]
                meta = {key: [val[i] for i in rows] for key, val in full.meta.items()}
                self.queue.append(full.select(rows, meta))
        return self.queue.pop(0)


def make_schedule(knob: PipelineKnob, prompts_per_batch: int, generations: int, max_len: int) -> Schedule:
    """The schedule ``knobs.pipeline`` selects (registry keyed by the choice)."""
    factories: dict[str, Callable[[], Schedule]] = {
        "pipeline_rl": lambda: PipelineRL(knob.alternatives.pipeline_rl.k, prompts_per_batch, max_len),
        "ppo_off_policy": lambda: PPOOffPolicy(
            knob.alternatives.ppo_off_policy.k, prompts_per_batch, generations, max_len
        ),
    }
    return factories[knob.choice]()
