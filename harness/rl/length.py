"""Length control: ScaleRL's forced interruption, and DAPO's overlong length penalty.

Both alternatives answer the same two questions for the trainer (:class:`LengthControl`):

- ``thinking_budget(gen)``: how many thinking tokens this sample may use before generation is
  interrupted, or ``None`` for no interruption.
- ``reward_adjustment(lengths)``: what to add to each sequence's task reward, from its response
  length in tokens, before advantages are computed.

``interruption`` (ScaleRL, after Qwen3): each sample draws a budget uniformly in
``[budget_min, budget_max]``; a sample still thinking at its budget gets ``phrase`` appended and
may then write ``answer_tokens`` more. It changes generation only: its reward adjustment is
exactly 0, and the phrase's tokens must be masked out of the loss (mask 0) because the policy did
not sample them.

``length_penalty`` (DAPO's soft overlong punishment): no interruption; the reward gets
:func:`overlong_penalty`. It changes rewards only: it inserts no tokens and masks nothing.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor

from scalerl.harness.errors import ConfigError
from scalerl.harness.recipe.schema import InterruptionParams, LengthControlKnob, LengthPenaltyParams

__all__ = [
    "LENGTH_CONTROLS",
    "Interruption",
    "LengthControl",
    "LengthPenalty",
    "interruption_point",
    "make_length_control",
    "overlong_penalty",
]


def overlong_penalty(lengths: Tensor, l_max: int, l_cache: int) -> Tensor:
    """DAPO's soft overlong punishment of each response length (float tensor, lengths' shape).

    ``0`` for ``len <= l_max - l_cache``; ``(l_max - l_cache - len) / l_cache`` (linear from 0
    down to -1) for ``l_max - l_cache < len <= l_max``; ``-1`` beyond ``l_max``.
    """
    if not 0 < l_cache < l_max:
        raise ConfigError(
            "need 0 < l_cache < l_max",
            field="knobs.length_control.alternatives.length_penalty",
            value={"l_max": l_max, "l_cache": l_cache},
            fix="make l_cache positive and smaller than l_max",
        )
    soft_start = l_max - l_cache
    ramp = (soft_start - lengths.to(torch.float64)) / l_cache
    penalty = ramp.clamp(min=-1.0, max=0.0)  # 0 before the window, -1 at and beyond l_max
    dtype = lengths.dtype if lengths.is_floating_point() else torch.get_default_dtype()
    return penalty.to(dtype)


def interruption_point(generator: torch.Generator, budget_min: int, budget_max: int) -> int:
    """A thinking budget drawn uniformly from the integers in ``[budget_min, budget_max]``.

    Deterministic given the generator's state (consumes one draw from it).
    """
    if not 0 < budget_min <= budget_max:
        raise ConfigError(
            "need 0 < budget_min <= budget_max",
            field="knobs.length_control.alternatives.interruption",
            value={"budget_min": budget_min, "budget_max": budget_max},
            fix="make budget_min positive and at most budget_max",
        )
    return int(torch.randint(budget_min, budget_max + 1, (1,), generator=generator).item())


class LengthControl(ABC):
    """What the trainer asks the length-control knob. Frozen and pure (randomness comes only from
    the generator passed in)."""

    name: ClassVar[str]

    @abstractmethod
    def thinking_budget(self, gen: torch.Generator) -> int | None:
        """Thinking tokens before a forced interruption for one sample; None = never interrupt."""

    @abstractmethod
    def reward_adjustment(self, lengths: Tensor) -> Tensor:
        """Added to the task rewards [B] given response lengths [B] in tokens."""


@dataclass(frozen=True)
class Interruption(LengthControl):
    """ScaleRL: interrupt at a random budget, append ``phrase``, let the model answer."""

    name: ClassVar[str] = "interruption"
    params: InterruptionParams

    @property
    def phrase(self) -> str:
        return self.params.phrase

    @property
    def answer_tokens(self) -> int:
        return self.params.answer_tokens

    def thinking_budget(self, gen: torch.Generator) -> int | None:
        return interruption_point(gen, self.params.budget_min, self.params.budget_max)

    def reward_adjustment(self, lengths: Tensor) -> Tensor:
        dtype = lengths.dtype if lengths.is_floating_point() else torch.get_default_dtype()
        return torch.zeros(lengths.shape, dtype=dtype, device=lengths.device)


@dataclass(frozen=True)
class LengthPenalty(LengthControl):
    """DAPO: no interruption; overlong responses are penalised in the reward."""

    name: ClassVar[str] = "length_penalty"
    params: LengthPenaltyParams

    def thinking_budget(self, gen: torch.Generator) -> int | None:
        return None

    def reward_adjustment(self, lengths: Tensor) -> Tensor:
        return overlong_penalty(lengths, self.params.l_max, self.params.l_cache)


LENGTH_CONTROLS: dict[str, Callable[[LengthControlKnob], LengthControl]] = {
    Interruption.name: lambda knob: Interruption(knob.alternatives.interruption),
    LengthPenalty.name: lambda knob: LengthPenalty(knob.alternatives.length_penalty),
}


def make_length_control(knob: LengthControlKnob) -> LengthControl:
    """The length control the recipe's ``knobs.length_control`` selects."""
    return LENGTH_CONTROLS[knob.choice](knob)
