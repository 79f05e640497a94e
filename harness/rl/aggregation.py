"""Loss aggregation: how per-token loss terms become the scalar the optimiser steps on.

ScaleRL's choice is the prompt-level average (arXiv 2510.13786 §3.2, and the ``1/Σ_g|y_g|``
factor in its CISPO objective): within a prompt's group of generations, the sum of the token
terms divided by the group's total token count, then the plain mean over prompts. The
alternatives only change these weights:

- ``prompt_avg``: every prompt weighs the same; within a prompt every token weighs the same.
- ``sample_avg``: every sequence weighs the same (GRPO's per-sequence mean, then mean).
- ``token_avg``: every token in the batch weighs the same (DAPO's token-level mean).

With equal lengths everywhere and equal group sizes all three coincide; with unequal lengths they
differ, which is what the "loo-savg" variant measures.

Empty units (a sequence or a prompt group with no trained token, e.g. all tokens were the
interruption phrase) are left out of the mean they would have joined, so they neither add NaN nor
dilute the others. A batch with no trained token at all gives a 0 that is still connected to the
graph (``backward()`` works and yields zero gradients).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar, Literal

import torch
from torch import Tensor

from scalerl.harness.errors import ConfigError, HarnessError

__all__ = ["AGGREGATORS", "AggregationMode", "Aggregator", "aggregate"]

AggregationMode = Literal["prompt_avg", "sample_avg", "token_avg"]


class Aggregator(ABC):
    """Reduce per-token terms [B, T] to a scalar.

    ``terms`` are already zero where ``mask`` is 0 (the :class:`~scalerl.harness.rl.losses.PolicyLoss`
    contract); ``mask`` [B, T] float/bool marks trained tokens; ``group`` long [B] is each
    sequence's prompt id (any integers; equal ids = same prompt). Pure and stateless.
    """

    name: ClassVar[str]

    @abstractmethod
    def reduce(self, terms: Tensor, mask: Tensor, group: Tensor) -> Tensor:
        """The scalar loss (0-dim tensor, differentiable through ``terms``)."""


def _mean_of_ratios(sums: Tensor, counts: Tensor, anchor: Tensor) -> Tensor:
    """Mean over units of ``sums / counts``, skipping units with ``counts == 0``.

    ``anchor`` (the terms) keeps the result on the graph when every unit is empty.
    """
    nonempty = counts > 0
    n = int(nonempty.sum())
    if n == 0:
        return anchor.sum() * 0.0
    ratios = sums[nonempty] / counts[nonempty]
    return ratios.sum() / n


class PromptAverage(Aggregator):
    """ScaleRL: per prompt, Σ token terms / Σ_g |y_g| over its group; then mean over prompts."""

    name: ClassVar[str] = "prompt_avg"

    def reduce(self, terms: Tensor, mask: Tensor, group: Tensor) -> Tensor:
        m = mask.to(terms.dtype)
        _, index = torch.unique(group, return_inverse=True)
        n_groups = int(index.max()) + 1 if index.numel() else 0
        seq_sums = (terms * m).sum(dim=1)
        seq_counts = m.sum(dim=1)
        sums = torch.zeros(n_groups, dtype=terms.dtype, device=terms.device).index_add(0, index, seq_sums)
        counts = torch.zeros(n_groups, dtype=terms.dtype, device=terms.device).index_add(0, index, seq_counts)
        return _mean_of_ratios(sums, counts, terms)


class SampleAverage(Aggregator):
    """Mean over each sequence's trained tokens, then mean over sequences."""

    name: ClassVar[str] = "sample_avg"

    def reduce(self, terms: Tensor, mask: Tensor, group: Tensor) -> Tensor:
        m = mask.to(terms.dtype)
        return _mean_of_ratios((terms * m).sum(dim=1), m.sum(dim=1), terms)


class TokenAverage(Aggregator):
    """Σ of all token terms / number of trained tokens in the batch."""

    name: ClassVar[str] = "token_avg"

    def reduce(self, terms: Tensor, mask: Tensor, group: Tensor) -> Tensor:
        m = mask.to(terms.dtype)
        return _mean_of_ratios((terms * m).sum().reshape(1), m.sum().reshape(1), terms)


AGGREGATORS: dict[str, Aggregator] = {a.name: a for a in (PromptAverage(), SampleAverage(), TokenAverage())}


def aggregate(terms: Tensor, mask: Tensor, group: Tensor, mode: AggregationMode) -> Tensor:
    """Reduce per-token loss terms [B, T] to the scalar loss with the aggregation ``mode``."""
    try:
        aggregator = AGGREGATORS[mode]
    except KeyError:
        raise ConfigError(
            "unknown loss aggregation",
            field="knobs.aggregation.choice",
            value=mode,
            fix=f"use one of {sorted(AGGREGATORS)}",
        ) from None
    if terms.dim() != 2 or terms.shape != mask.shape or group.shape != (terms.shape[0],):
        raise HarnessError(
            f"aggregate: terms {tuple(terms.shape)}, mask {tuple(mask.shape)}, group "
            f"{tuple(group.shape)}: expected terms and mask [B, T] and group [B]; fix the caller"
        )
    return aggregator.reduce(terms, mask, group)
