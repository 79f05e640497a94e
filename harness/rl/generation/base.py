"""The generation interface: cohorts of sequences advanced a few tokens at a time.

A *cohort* is a batch of sequences started together (a training batch's prompts x generations,
or validation prompts). The pipeline advances cohorts in token chunks and pushes new weights
between chunks, so a backend must (a) keep each in-flight sequence's state across calls, (b) use
the newest weights from the next token on, and (c) record, per generated token, the log-prob it
was sampled with, the policy version that sampled it, and whether it was sampled (mask 1) or
forced by the interruption (mask 0).

Length control happens here, per sequence: ``interrupt_at`` (thinking tokens) forces the
end-of-thinking phrase and then allows ``answer_tokens`` more; ``max_len`` caps everything.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from scalerl.harness.errors import ConfigError


@dataclass(frozen=True)
class SamplingSpec:
    """How a cohort samples and where its sequences are cut."""

    temperature: float
    top_p: float
    max_len: int
    phrase_ids: tuple[int, ...] = ()  # forced end-of-thinking phrase; () = no interruption
    answer_tokens: int = 0
    greedy: bool = False


@dataclass
class Rollouts:
    """A finished cohort: row ``i`` is ``prompt_ids[i]`` followed by ``tokens[i, :lengths[i]]``.

    All [B, T] tensors are right-padded; ``mask`` is 1 where the token was sampled by the policy
    (trained on), 0 for forced phrase tokens and padding. ``versions`` is the policy version that
    produced each token (-1 on padding).
    """

    prompt_ids: list[list[int]]
    tokens: Tensor  # [B, T] long
    logp: Tensor  # [B, T] float32 behaviour log-probs (0 where not sampled)
    mask: Tensor  # [B, T] float32
    versions: Tensor  # [B, T] long
    lengths: Tensor  # [B] long
    truncated: Tensor  # [B] bool (hit max_len or the post-interruption answer budget)
    interrupted: Tensor  # [B] bool (the phrase was forced)
    entropy_sum: float  # sum over sampled tokens of the sampling distribution's entropy
    meta: Any = None  # the caller's bookkeeping (problems, group ids), carried along

    @property
    def n_sampled(self) -> int:
        return int(self.mask.sum().item())

    def select(self, rows: Sequence[int], meta: Any = None) -> Rollouts:
        """The rollouts of ``rows`` only (a minibatch); per-token entropy is split pro rata."""
        idx = torch.tensor(list(rows), dtype=torch.long)
        share = float(self.mask[idx].sum().item()) / max(1.0, float(self.mask.sum().item()))
        t = int(self.lengths[idx].max().item()) if len(idx) else 0
        return Rollouts(
            prompt_ids=[self.prompt_ids[i] for i in rows],
            tokens=self.tokens[idx, :t],
            logp=self.logp[idx, :t],
            mask=self.mask[idx, :t],
            versions=self.versions[idx, :t],
            lengths=self.lengths[idx],
            truncated=self.truncated[idx],
            interrupted=self.interrupted[idx],
            entropy_sum=self.entropy_sum * share,
            meta=meta,
        )

    def min_version(self) -> int:
        v = self.versions[self.versions >= 0]
        return int(v.min().item()) if v.numel() else -1


class Cohort(ABC):
    """An in-flight batch owned by a :class:`Generator`. Picklable (it is checkpointed)."""

    meta: Any
    start_version: int

    @abstractmethod
    def done(self) -> bool:
        """True when every sequence has ended (EOS, answer budget, or max length)."""

    @abstractmethod
    def result(self) -> Rollouts:
        """The finished rollouts; only valid when :meth:`done`."""


class Generator(ABC):
    """A generation backend. Not thread-safe: one pipeline drives it."""

    name: str

    @abstractmethod
    def start(
        self,
        prompts: Sequence[Sequence[int]],
        interrupt_at: Sequence[int | None],
        spec: SamplingSpec,
        meta: Any = None,
    ) -> Cohort:
        """Begin a cohort (prefill); no token is generated yet."""

    @abstractmethod
    def advance(self, cohort: Cohort, n_tokens: int, rng: torch.Generator) -> int:
        """Generate up to ``n_tokens`` more tokens for every live sequence of ``cohort`` with the
        current weights; returns how many token steps ran (0 if it was already done)."""

    @abstractmethod
    def update_weights(self, model: Any, version: int) -> None:
        """From the next token on, sample with ``model``'s weights, recorded as ``version``."""


GENERATORS: dict[str, Callable[..., Generator]] = {}


def register_generator(name: str) -> Callable[[Callable[..., Generator]], Callable[..., Generator]]:
    def deco(factory: Callable[..., Generator]) -> Callable[..., Generator]:
        GENERATORS[name] = factory
        return factory

    return deco


def make_generator(name: str, policy: Any, options: Any = None) -> Generator:
    """The backend ``name`` on ``policy``; ``options`` is the recipe's ``generation`` section."""
    from scalerl.harness.rl.generation import hf, vllm  # noqa: F401  (register the built-in backends)

    if name not in GENERATORS:
        raise ConfigError(
            "unknown generation backend",
            field="generation.backend",
            value=name,
            fix=f"use one of {sorted(GENERATORS)}",
        )
    return GENERATORS[name](policy, options)
