"""Data filters: ScaleRL's zero-variance filter and no-positive-resampling curriculum.

- Zero-variance filtering (knob ``zero_variance_filter``): a prompt whose G generations all got
  the same reward has zero advantage for every sequence, so it contributes no gradient; ScaleRL
  drops such prompts from the loss so the effective batch holds only prompts that teach
  something. ``off`` keeps the full batch (their sequences then still count in the loss
  denominators, which is exactly what distinguishes the "loo-batch" variant).
- No-positive-resampling (knob ``no_positive_resampling``): ScaleRL keeps each prompt's
  historical pass rate and permanently removes a prompt from all later epochs once its pass rate
  has reached ``threshold`` (0.9) (arXiv 2510.13786 §3.2, after Polaris). :class:`ResamplingTracker`
  implements that rule: "historical" means *any* recorded pass rate, not an average, so a single
  observation at or above the threshold retires the prompt and nothing un-retires it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from scalerl.harness.errors import ConfigError, HarnessError
from scalerl.harness.recipe.schema import NoPositiveResamplingKnob, ZeroVarianceFilterKnob

__all__ = [
    "ZERO_VARIANCE_FILTERS",
    "KeepFn",
    "ResamplingTracker",
    "keep_all",
    "make_zero_variance_filter",
    "zero_variance_keep",
]

KeepFn = Callable[[Tensor, Tensor], Tensor]
"""``(rewards [B], group [B]) -> bool [B]``: which sequences enter the loss."""


def zero_variance_keep(rewards: Tensor, group: Tensor) -> Tensor:
    """False for every sequence of a prompt whose group rewards are all exactly equal, else True.

    Exact equality is the rule (zero variance, hence zero advantage); rewards that differ by any
    amount, e.g. after a length penalty, keep their group.
    """
    if rewards.dim() != 1 or group.shape != rewards.shape:
        raise HarnessError(
            f"zero_variance_keep: rewards {tuple(rewards.shape)} and group {tuple(group.shape)} "
            "must both be [B]; fix the caller"
        )
    if rewards.numel() == 0:
        return torch.zeros(0, dtype=torch.bool, device=rewards.device)
    _, index = torch.unique(group, return_inverse=True)
    n_groups = int(index.max()) + 1
    hi = rewards.new_full((n_groups,), float("-inf")).scatter_reduce(0, index, rewards, "amax")
    lo = rewards.new_full((n_groups,), float("inf")).scatter_reduce(0, index, rewards, "amin")
    return (hi > lo)[index]


def keep_all(rewards: Tensor, group: Tensor) -> Tensor:
    """The ``off`` alternative: every sequence enters the loss."""
    return torch.ones_like(rewards, dtype=torch.bool)


ZERO_VARIANCE_FILTERS: dict[str, KeepFn] = {"on": zero_variance_keep, "off": keep_all}


def make_zero_variance_filter(knob: ZeroVarianceFilterKnob) -> KeepFn:
    """The keep-function the recipe's ``knobs.zero_variance_filter`` selects."""
    return ZERO_VARIANCE_FILTERS[knob.choice]


class ResamplingTracker:
    """No-positive-resampling: retires prompts whose pass rate reached ``threshold``, for good.

    ``threshold=None`` is the disabled mode (knob ``off``): pass rates are still recorded (for
    inspection) but no prompt is ever retired. State is JSON-able (:meth:`state_dict`) so a resumed
    run keeps every retirement. Methods take an internal lock, so generator and trainer threads
    may share one tracker.
    """

    def __init__(self, threshold: float | None = 0.9) -> None:
        if threshold is not None and not 0.0 < threshold <= 1.0:
            raise ConfigError(
                "must be in (0, 1]",
                field="knobs.no_positive_resampling.alternatives.on.threshold",
                value=threshold,
                fix="use a pass rate such as 0.9",
            )
        self.threshold = threshold
        self._retired: set[int] = set()
        self._last: dict[int, float] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_knob(cls, knob: NoPositiveResamplingKnob) -> ResamplingTracker:
        """``on`` -> retire at the knob's threshold; ``off`` -> never retire."""
        builders: dict[str, Callable[[], ResamplingTracker]] = {
            "on": lambda: cls(knob.alternatives.on.threshold),
            "off": lambda: cls(None),
        }
        return builders[knob.choice]()

    @property
    def enabled(self) -> bool:
        return self.threshold is not None

    def update(self, prompt_ids: Sequence[int], pass_rates: Sequence[float]) -> None:
        """Record each prompt's pass rate in this step (fraction of its G generations that
        passed); retire it if the rate is >= ``threshold``. Idempotent for repeated records."""
        if len(prompt_ids) != len(pass_rates):
            raise HarnessError(
                f"ResamplingTracker.update: {len(prompt_ids)} prompt ids but {len(pass_rates)} "
                "pass rates; fix: pass one pass rate per prompt"
            )
        with self._lock:
            for pid, rate in zip(prompt_ids, pass_rates, strict=True):
                rate = float(rate)
                if not 0.0 <= rate <= 1.0:
                    raise HarnessError(
                        f"ResamplingTracker.update: prompt {pid} has pass rate {rate}; "
                        "fix: pass the fraction of its generations that passed, in [0, 1]"
                    )
                self._last[int(pid)] = rate
                if self.threshold is not None and rate >= self.threshold:
                    self._retired.add(int(pid))

    def is_retired(self, prompt_id: int) -> bool:
        with self._lock:
            return int(prompt_id) in self._retired

    def retired(self) -> frozenset[int]:
        with self._lock:
            return frozenset(self._retired)

    def last_pass_rate(self, prompt_id: int) -> float | None:
        """The most recent recorded pass rate of a prompt, or None if never recorded."""
        with self._lock:
            return self._last.get(int(prompt_id))

    def filter(self, prompt_ids: Iterable[int]) -> list[int]:
        """The prompt ids that are not retired, in their given order (duplicates kept)."""
        with self._lock:
            return [int(p) for p in prompt_ids if int(p) not in self._retired]

    def state_dict(self) -> dict[str, Any]:
        """JSON-able state: ``{"threshold", "retired": [ids], "last_pass_rate": {"id": rate}}``."""
        with self._lock:
            return {
                "threshold": self.threshold,
                "retired": sorted(self._retired),
                "last_pass_rate": {str(k): v for k, v in sorted(self._last.items())},
            }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore from :meth:`state_dict`; the checkpoint's threshold must match this tracker's."""
        if state.get("threshold") != self.threshold:
            raise ConfigError(
                "checkpoint was written with a different no-positive-resampling threshold",
                field="knobs.no_positive_resampling",
                value=state.get("threshold"),
                fix=f"resume with the recipe that wrote the checkpoint (this one has {self.threshold})",
            )
        try:
            retired = {int(p) for p in state["retired"]}
            last = {int(k): float(v) for k, v in state["last_pass_rate"].items()}
        except (KeyError, TypeError, ValueError) as err:
            raise HarnessError(
                f"ResamplingTracker.load_state_dict: malformed state ({err!r}); "
                "fix: pass the dict state_dict() returned"
            ) from err
        with self._lock:
            self._retired = retired
            self._last = last
