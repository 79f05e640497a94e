"""Mechanism diagnostics: what each knob did, measured independently of the reward.

Logged at every evaluation point as their own metrics, aggregated over the optimizer steps since
the previous point (token-weighted where the quantity is per token):

- ``diag/lag_mean``, ``diag/lag_max``: policy lag of trained tokens, ``step - version`` (the
  optimizer steps between the weights that sampled a token and the weights it trains); the
  pipeline knob's mechanism (PipelineRL-k bounds it by k, PPO-off-policy-k by k-1).
- ``diag/clip_share``: share of trained tokens whose importance ratio the loss clipped (DAPO,
  GRPO, GSPO) or truncated (CISPO's ``eps_max``); ``diag/ratio_mean``: mean token ratio
  ``exp(logp_train - logp_gen)``.
- ``diag/logp_abs_diff``, ``diag/logp_kl``: the generator-vs-trainer log-prob mismatch, on trained
  tokens sampled by the very weights being trained (lag 0), so it is numerics only, not staleness:
  mean ``|logp_train - logp_gen|`` and the k3 estimate of KL(generator || trainer),
  ``E[r - 1 - log r]`` with ``r = p_train / p_gen`` (unbiased, never negative; Schulman 2020). The
  LM-head knob's mechanism. Absent from a point when no lag-0 token was trained since the last.
- ``diag/adv_std``: spread (std) of the advantages of each batch, averaged over the steps.
- ``diag/zero_var_share``: share of the batch's prompts the zero-variance filter dropped (0 with
  the filter off).
- ``diag/retired_prompts``: prompts retired by no-positive-resampling so far (cumulative).

``train/truncation_rate`` and ``train/interruption_rate`` (the length-control knob) stay where they
were. Every helper here is a pure function of tensors, so each is pinned on a hand-checked case.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

DIAG_METRICS = (
    "diag/lag_mean",
    "diag/lag_max",
    "diag/clip_share",
    "diag/ratio_mean",
    "diag/logp_abs_diff",
    "diag/logp_kl",
    "diag/adv_std",
    "diag/zero_var_share",
    "diag/retired_prompts",
)


def lag_stats(versions: Tensor, mask: Tensor, step: int) -> tuple[float, int, int]:
    """(sum of lags, token count, max lag) over masked tokens; lag = ``step - version``."""
    keep = mask.bool()
    lags = (step - versions)[keep]
    if lags.numel() == 0:
        return 0.0, 0, 0
    return float(lags.sum()), int(lags.numel()), int(lags.max())


def ratio_sum(logp: Tensor, old_logp: Tensor, mask: Tensor) -> tuple[float, int]:
    """(sum of ``exp(logp - old_logp)``, token count) over masked tokens."""
    keep = mask.bool()
    r = (logp.detach() - old_logp)[keep].double().exp()
    return float(r.sum()), int(r.numel())


def mismatch_sums(
    logp_train: Tensor, logp_gen: Tensor, versions: Tensor, mask: Tensor, step: int
) -> tuple[float, float, int]:
    """(sum |Δ log p|, sum of k3 KL terms, count) over masked tokens sampled at ``version == step``."""
    keep = mask.bool() & (versions == step)
    d = (logp_train.detach() - logp_gen)[keep].double()  # log r, r = p_train / p_gen
    return float(d.abs().sum()), float((d.exp() - 1.0 - d).sum()), int(d.numel())


def zero_var_dropped(keep: Tensor, group: Tensor) -> tuple[int, int]:
    """(prompts with no sequence kept, prompts) of one batch."""
    groups = torch.unique(group)
    kept = torch.unique(group[keep.bool()])
    return int(groups.numel() - kept.numel()), int(groups.numel())


def adv_std(adv: Tensor) -> float:
    """Population std of a batch's advantages (0 for fewer than two)."""
    return float(adv.double().std(unbiased=False)) if adv.numel() > 1 else 0.0


@dataclass
class DiagWindow:
    """Sums and maxima between two evaluation points (plain floats: it is checkpointed)."""

    sums: dict[str, float] = field(default_factory=dict)
    maxima: dict[str, float] = field(default_factory=dict)

    def add(self, name: str, value: float) -> None:
        self.sums[name] = self.sums.get(name, 0.0) + value

    def peak(self, name: str, value: float) -> None:
        self.maxima[name] = max(self.maxima.get(name, value), value)

    def ratio(self, num: str, den: str) -> float | None:
        d = self.sums.get(den, 0.0)
        return self.sums.get(num, 0.0) / d if d > 0 else None

    def metrics(self, retired: int) -> dict[str, float]:
        """The ``diag/*`` metrics of this window; a metric with nothing behind it is left out."""
        out: dict[str, float] = {}
        pairs = {
            "diag/lag_mean": ("lag_sum", "tokens"),
            "diag/clip_share": ("clipped", "tokens"),
            "diag/ratio_mean": ("ratio_sum", "tokens"),
            "diag/logp_abs_diff": ("abs_diff_sum", "lag0_tokens"),
            "diag/logp_kl": ("kl_sum", "lag0_tokens"),
            "diag/adv_std": ("adv_std_sum", "steps"),
            "diag/zero_var_share": ("dropped_prompts", "prompts"),
        }
        for name, (num, den) in pairs.items():
            value = self.ratio(num, den)
            if value is not None:
                out[name] = value
        if "lag_max" in self.maxima:
            out["diag/lag_max"] = self.maxima["lag_max"]
        out["diag/retired_prompts"] = float(retired)
        return out

    def state(self) -> tuple[dict[str, float], dict[str, float]]:
        return dict(self.sums), dict(self.maxima)
