"""Mechanism diagnostics, each pinned on a case small enough to check by hand."""

from __future__ import annotations

import math

import pytest
import torch

from scalerl.harness.rl.diagnostics import (
    DiagWindow,
    adv_std,
    lag_stats,
    mismatch_sums,
    ratio_sum,
    zero_var_dropped,
)
from scalerl.harness.rl.losses import CISPO, DAPO, GRPO, GSPO
from scalerl.harness.rl.sink import ListSink
from scalerl.harness.rl.trainer import train
from tests.unit.rl.micro import _policy_cache, micro_recipe

__all__ = ["_policy_cache"]

MASK = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])


def test_lag_counts_only_trained_tokens() -> None:
    versions = torch.tensor([[3, 4, 5], [5, -1, -1]])
    # step 5: lags 2, 1 and 0 on the masked tokens; the unmasked version-5 token does not count.
    assert lag_stats(versions, MASK, 5) == (3.0, 3, 2)
    assert lag_stats(versions, torch.zeros_like(MASK), 5) == (0.0, 0, 0)


def test_ratio_and_mismatch_use_masked_lag0_tokens() -> None:
    logp = torch.tensor([[math.log(0.5), math.log(0.2), 9.0], [math.log(0.3), 0.0, 0.0]])
    old = torch.tensor([[math.log(0.25), math.log(0.2), 0.0], [math.log(0.6), 0.0, 0.0]])
    # ratios on the masked tokens: 2, 1, 0.5
    total, n = ratio_sum(logp, old, MASK)
    assert n == 3 and total == pytest.approx(3.5)
    versions = torch.tensor([[7, 6, 7], [7, 7, 7]])
    abs_sum, kl_sum, n0 = mismatch_sums(logp, old, versions, MASK, 7)
    # lag-0 masked tokens: row 0 col 0 (log r = ln 2) and row 1 col 0 (log r = ln 0.5).
    assert n0 == 2
    assert abs_sum == pytest.approx(2 * math.log(2))
    # k3 terms r - 1 - log r: (2 - 1 - ln 2) + (0.5 - 1 + ln 2) = 0.5
    assert kl_sum == pytest.approx(0.5)


def test_zero_variance_share_and_advantage_spread() -> None:
    group = torch.tensor([0, 0, 1, 1, 2, 2])
    keep = torch.tensor([True, True, False, False, False, False])
    assert zero_var_dropped(keep, group) == (2, 3)
    assert zero_var_dropped(torch.ones(6, dtype=torch.bool), group) == (0, 3)
    assert adv_std(torch.tensor([1.0, -1.0, 1.0, -1.0])) == pytest.approx(1.0)
    assert adv_std(torch.tensor([2.0])) == 0.0


def test_window_means_and_missing_metrics() -> None:
    w = DiagWindow()
    for lag_sum, tokens in ((3.0, 3), (1.0, 5)):
        w.add("lag_sum", lag_sum)
        w.add("tokens", tokens)
    w.peak("lag_max", 2)
    w.peak("lag_max", 1)
    w.add("clipped", 2)
    w.add("ratio_sum", 8.0)
    w.add("dropped_prompts", 1)
    w.add("prompts", 4)
    w.add("adv_std_sum", 1.5)
    w.add("steps", 2)
    m = w.metrics(retired=7)
    assert m == {
        "diag/lag_mean": 0.5,
        "diag/lag_max": 2,
        "diag/clip_share": 0.25,
        "diag/ratio_mean": 1.0,
        "diag/adv_std": 0.75,
        "diag/zero_var_share": 0.25,
        "diag/retired_prompts": 7.0,
    }  # no lag-0 token: no mismatch metrics rather than a made-up 0


def test_each_loss_reports_the_tokens_it_clipped() -> None:
    # Ratios 2.0, 1.0 | 0.5, 1.0 (row 1's second token masked out); advantages +1, -1.
    logp = torch.log(torch.tensor([[0.4, 0.2], [0.1, 0.3]]))
    old = torch.log(torch.tensor([[0.2, 0.2], [0.2, 0.3]]))
    adv = torch.tensor([1.0, -1.0])
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    # CISPO truncates ratios above eps_max whatever the advantage's sign.
    assert CISPO(eps_max=1.5).clipped(logp, old, adv, mask).tolist() == [[True, False], [False, False]]
    # PPO-style: r=2 > 1.28 with A>0 is clipped; r=0.5 < 0.8 with A<0 is clipped.
    assert DAPO().clipped(logp, old, adv, mask).tolist() == [[True, False], [True, False]]
    assert GRPO(eps=0.2).clipped(logp, old, adv, mask).tolist() == [[True, False], [True, False]]
    # GSPO: sequence ratios sqrt(2) (row 0) and 0.5 (row 1): both clipped, on masked tokens only.
    assert GSPO().clipped(logp, old, adv, mask).tolist() == [[True, True], [True, False]]


def test_trainer_logs_every_diagnostic_with_sample_counts(tmp_path: object) -> None:
    sink = ListSink()
    # Filter off, so every step trains tokens (and the filter's share is exactly 0).
    recipe = micro_recipe(
        budget={"value": 4, "unit": "steps"},
        eval={"every_steps": 2, "n_val": 8, "k": 2},
        knobs={"zero_variance_filter": {"choice": "off"}},
    )
    train(recipe, 0, sink=sink, workdir=tmp_path)  # type: ignore[arg-type]
    assert [p.step for p in sink.points] == [0, 2, 4]
    first, later = sink.points[0], sink.points[1:]
    assert first.n == {"val/pass_rate": 16} and not any(k.startswith("diag/") for k in first.metrics)
    for p in later:
        # 2 steps x 2 prompts x 4 generations of Bernoulli rewards under interruption.
        assert p.n == {"val/pass_rate": 16, "train/reward": 16}
        m = p.metrics
        assert 0 <= m["diag/lag_mean"] <= m["diag/lag_max"] <= 2  # PipelineRL-2 bounds the lag
        assert 0.0 <= m["diag/clip_share"] <= 1.0 and 0.5 < m["diag/ratio_mean"] < 2.0
        assert m["diag/zero_var_share"] == 0.0
        assert m["diag/retired_prompts"] >= 0.0 and m["diag/adv_std"] >= 0.0
        if "diag/logp_abs_diff" in m:  # bf16 engine copy: a small, nonzero mismatch
            assert 0.0 < m["diag/logp_abs_diff"] < 0.1 and m["diag/logp_kl"] >= 0.0
