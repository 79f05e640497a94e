"""``arith``: running sums modulo 10, thought through step by step.

Prompt ``"a3b5c2d9="`` (each term carries a letter label); the reference thinking writes, for each
next term, its label and the running sum (``"b8c0d9"``), then ``</think>``, then the answer
(``"9"``). The labels make every step a lookup a 2-layer model can learn in a few hundred
supervised steps (find the label's digit, add it to the sum two tokens back) instead of counting
positions. A problem with ``n`` terms needs ``2(n-1)`` thinking tokens, so the difficulty mix
(``n_min..n_max`` terms) interacts with the thinking budget: under forced interruption, problems
longer than the budget are answered blind, which puts the ceiling below 1. ``trace_noise`` makes
the warm-start traces slip at that rate per step (the trace carries on from the slip), so the
starting policy is reliably imperfect and RL has something to sharpen (R0 well below the plateau).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from scalerl.harness.errors import ConfigError
from scalerl.harness.rl.tasks.base import THINK_END, Problem, Task, register_task

LABELS = "abcdefghijklmnopqrstuvwxyz"


@register_task
@dataclass(frozen=True)
class Arith(Task):
    name = "arith"
    n_min: int = 2
    n_max: int = 8
    modulus: int = 10
    trace_noise: float = 0.15

    def __post_init__(self) -> None:
        if not 2 <= self.n_min <= self.n_max:
            raise ConfigError(
                "need 2 <= n_min <= n_max",
                field="task.params.n_min",
                value=(self.n_min, self.n_max),
                fix="set n_min >= 2 and n_max >= n_min",
            )
        if self.n_max > len(LABELS):
            raise ConfigError(
                "at most 26 terms (one letter label each)",
                field="task.params.n_max",
                value=self.n_max,
                fix="use n_max <= 26",
            )
        if not 2 <= self.modulus <= 10:
            raise ConfigError(
                "modulus must be in 2..10 (one-digit answers)",
                field="task.params.modulus",
                value=self.modulus,
                fix="use a modulus between 2 and 10",
            )
        if not 0.0 <= self.trace_noise < 1.0:
            raise ConfigError(
                "trace_noise must be in [0, 1)",
                field="task.params.trace_noise",
                value=self.trace_noise,
                fix="use a probability such as 0.15",
            )

    def problems(self, n: int, rng: random.Random) -> list[Problem]:
        out = []
        for _ in range(n):
            k = rng.randint(self.n_min, self.n_max)
            terms = [rng.randrange(self.modulus) for _ in range(k)]
            prompt = "".join(f"{LABELS[i]}{t}" for i, t in enumerate(terms)) + "="
            out.append(Problem(prompt, str(sum(terms) % self.modulus), k))
        return out

    def trace(self, problem: Problem, rng: random.Random) -> str:
        terms = [int(t) for t in problem.prompt.rstrip("=")[1::2]]
        acc = terms[0]
        steps: list[str] = []
        for t in terms[1:]:
            acc = (acc + t) % self.modulus
            shown = acc
            if rng.random() < self.trace_noise:
                # A slip the trace then carries on from, as a careless solver would.
                shown = (acc + rng.randrange(1, self.modulus)) % self.modulus
                acc = shown
            steps.append(f"{LABELS[len(steps) + 1]}{shown}")
        return "".join(steps) + THINK_END + str(acc)
