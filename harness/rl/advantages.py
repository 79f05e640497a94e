"""Advantages: group-centred rewards, scaled by the advantage-normalisation knob.

Every mode first centres each reward on its prompt group's mean, ``A_i = r_i - mean_{g in
group(i)} r_g`` (GRPO's baseline; the group is the G generations of one prompt). The modes then
differ only in the divisor:

- ``batch`` (ScaleRL): divide by the standard deviation of the *centred* advantages over the whole
  batch, ``A_i / (std_batch({A_j}) + eps)``. This is the paper's batch-level normalisation (after
  Hu et al.'s REINFORCE++): as we read its final objective, ScaleRL writes
  ``Â_norm = Â / (Â_std + eps)`` with ``Â_std`` taken over the batch of group-centred
  advantages. We deliberately do not use the std of the *raw* rewards: that would add the
  between-prompt spread of difficulty to the divisor, which the centring has just removed, and
  make the scale depend on how easy the batch's prompts are.
- ``prompt`` (GRPO): divide by the std of the rewards within the prompt's own group.
- ``none`` (Dr. GRPO): no division.

Standard deviations are population ones (``correction=0``): a group's spread is a property of the
G samples in hand, and it keeps a group of two binary rewards at exactly ±1. A zero-variance group
centres to exactly 0 and stays 0 in every mode; where a divisor std is 0 the division is skipped,
so even ``eps=0`` gives no NaN.

The batch is whatever the caller passes: to normalise over ScaleRL's effective batch, apply the
zero-variance filter (:func:`scalerl.harness.rl.filters.zero_variance_keep`) first. Rewards should already
include any length-control adjustment (:meth:`scalerl.harness.rl.length.LengthControl.reward_adjustment`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar, Literal

import torch
from torch import Tensor

from scalerl.harness.errors import ConfigError, HarnessError
from scalerl.harness.rl.filters import zero_variance_keep

__all__ = ["ADVANTAGE_NORMS", "AdvantageMode", "AdvantageNorm", "compute_advantages", "group_centered"]

AdvantageMode = Literal["batch", "prompt", "none"]


def _group_index(group: Tensor) -> tuple[Tensor, int]:
    _, index = torch.unique(group, return_inverse=True)
    return index, (int(index.max()) + 1 if index.numel() else 0)


def _group_mean(values: Tensor, index: Tensor, n_groups: int) -> Tensor:
    """Each element's group mean, broadcast back to [B]."""
    sums = torch.zeros(n_groups, dtype=values.dtype, device=values.device).index_add(0, index, values)
    counts = torch.zeros(n_groups, dtype=values.dtype, device=values.device).index_add(
        0, index, torch.ones_like(values)
    )
    return (sums / counts)[index]


def group_centered(rewards: Tensor, group: Tensor) -> Tensor:
    """``r_i - mean of r over i's prompt group``, shape [B]; exactly 0 in all-equal groups.

    The explicit zero matters for non-binary rewards: (0.1+0.1+0.1)/3 is not 0.1 in floating
    point, and a 1e-17 residue divided by a 1e-17 group std would be a spurious ±1 advantage.
    """
    index, n_groups = _group_index(group)
    centered = rewards - _group_mean(rewards, index, n_groups)
    return torch.where(zero_variance_keep(rewards, group), centered, torch.zeros_like(centered))


def _safe_divide(centered: Tensor, std: Tensor, eps: float) -> Tensor:
    """``centered / (std + eps)``, and exactly 0 where ``std`` is 0 (so ``eps=0`` gives no NaN)."""
    return torch.where(std > 0, centered / (std + eps), torch.zeros_like(centered))


class AdvantageNorm(ABC):
    """Scale group-centred advantages [B]; returns [B]. Pure and stateless."""

    name: ClassVar[str]

    @abstractmethod
    def scale(self, centered: Tensor, group: Tensor, eps: float) -> Tensor:
        """The normalised advantages given the centred ones and the prompt ids."""


class BatchNorm(AdvantageNorm):
    """ScaleRL: divide by the std of the centred advantages across the batch."""

    name: ClassVar[str] = "batch"

    def scale(self, centered: Tensor, group: Tensor, eps: float) -> Tensor:
        return _safe_divide(centered, centered.std(correction=0).expand_as(centered), eps)


class PromptNorm(AdvantageNorm):
    """GRPO: divide by the std of the rewards within the prompt's group."""

    name: ClassVar[str] = "prompt"

    def scale(self, centered: Tensor, group: Tensor, eps: float) -> Tensor:
        index, n_groups = _group_index(group)
        # The centred values have group mean 0, so their group mean square is the group variance.
        std = _group_mean(centered * centered, index, n_groups).sqrt()
        return _safe_divide(centered, std, eps)


class NoNorm(AdvantageNorm):
    """Dr. GRPO: centred rewards, unscaled."""

    name: ClassVar[str] = "none"

    def scale(self, centered: Tensor, group: Tensor, eps: float) -> Tensor:
        return centered


ADVANTAGE_NORMS: dict[str, AdvantageNorm] = {n.name: n for n in (BatchNorm(), PromptNorm(), NoNorm())}


def compute_advantages(rewards: Tensor, group: Tensor, mode: AdvantageMode, eps: float = 1e-6) -> Tensor:
    """One advantage per sequence [B] from its reward [B] and prompt id ``group`` [B].

    Centred on the prompt-group mean, then scaled as ``mode`` says (see the module docstring).
    Returned without gradient history (rewards are data, not a function of the policy).
    """
    try:
        norm = ADVANTAGE_NORMS[mode]
    except KeyError:
        raise ConfigError(
            "unknown advantage normalisation",
            field="knobs.advantage_norm.choice",
            value=mode,
            fix=f"use one of {sorted(ADVANTAGE_NORMS)}",
        ) from None
    if rewards.dim() != 1 or group.shape != rewards.shape:
        raise HarnessError(
            f"compute_advantages: rewards {tuple(rewards.shape)} and group {tuple(group.shape)} "
            "must both be [B]; fix the caller"
        )
    if rewards.numel() == 0:
        return rewards.detach().clone()
    out_dtype = rewards.dtype if rewards.is_floating_point() else torch.get_default_dtype()
    r = rewards.detach().to(torch.float64)  # float64 so int or low-precision rewards centre cleanly
    return norm.scale(group_centered(r, group), group, eps).to(out_dtype)
