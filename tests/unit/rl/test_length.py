"""Length control: DAPO's overlong penalty and ScaleRL's forced interruption."""

from __future__ import annotations

import pytest
import torch

from scalerl.harness.errors import ConfigError
from scalerl.harness.recipe.schema import (
    InterruptionParams,
    LengthControlAlternatives,
    LengthControlKnob,
    LengthPenaltyParams,
)
from scalerl.harness.rl.length import (
    LENGTH_CONTROLS,
    Interruption,
    LengthPenalty,
    interruption_point,
    make_length_control,
    overlong_penalty,
)


def test_overlong_penalty_by_hand() -> None:
    # l_max=10, l_cache=4: free up to 6; then (6 - len)/4: 7 -> -.25, 8 -> -.5, 9 -> -.75, 10 -> -1;
    # beyond 10 -> -1.
    lengths = torch.tensor([0, 5, 6, 7, 8, 9, 10, 11, 100])
    out = overlong_penalty(lengths, l_max=10, l_cache=4)
    assert out.dtype == torch.get_default_dtype()
    assert out.tolist() == [0.0, 0.0, 0.0, -0.25, -0.5, -0.75, -1.0, -1.0, -1.0]


def test_overlong_penalty_at_the_schema_defaults() -> None:
    # l_max=14336, l_cache=2048: the window starts after 12288 tokens.
    p = LengthPenaltyParams()
    lengths = torch.tensor([12288, 12289, 13312, 14335, 14336, 14337])
    out = overlong_penalty(lengths, p.l_max, p.l_cache).tolist()
    assert out == pytest.approx([0.0, -1 / 2048, -0.5, -2047 / 2048, -1.0, -1.0])


def test_overlong_penalty_rejects_a_bad_window() -> None:
    with pytest.raises(ConfigError, match="l_cache < l_max"):
        overlong_penalty(torch.tensor([1]), l_max=4, l_cache=4)


def test_interruption_point_is_uniform_over_the_closed_window_and_seeded() -> None:
    draws = [interruption_point(torch.Generator().manual_seed(s), 3, 5) for s in range(200)]
    assert set(draws) == {3, 4, 5}  # both ends reachable, nothing outside
    assert 40 < draws.count(4) < 95  # ~1/3 of 200
    g1, g2 = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
    seq1 = [interruption_point(g1, 10_000, 12_000) for _ in range(5)]
    seq2 = [interruption_point(g2, 10_000, 12_000) for _ in range(5)]
    assert seq1 == seq2 and len(set(seq1)) > 1  # same seed, same budgets; the generator advances
    assert interruption_point(torch.Generator(), 8, 8) == 8
    with pytest.raises(ConfigError, match="budget_min <= budget_max"):
        interruption_point(torch.Generator(), 9, 8)


def test_interruption_changes_generation_only() -> None:
    params = InterruptionParams(budget_min=20, budget_max=30, phrase="stop. </think>", answer_tokens=8)
    control = make_length_control(
        LengthControlKnob(choice="interruption", alternatives=LengthControlAlternatives(interruption=params))
    )
    assert isinstance(control, Interruption)
    assert control.phrase == "stop. </think>" and control.answer_tokens == 8
    gen = torch.Generator().manual_seed(0)
    budgets = [control.thinking_budget(gen) for _ in range(50)]
    assert all(b is not None and 20 <= b <= 30 for b in budgets)
    assert len(set(budgets)) > 3
    # No reward change, however long the response.
    adj = control.reward_adjustment(torch.tensor([0, 25, 10**6]))
    assert adj.tolist() == [0.0, 0.0, 0.0]


def test_length_penalty_changes_rewards_only() -> None:
    alts = LengthControlAlternatives(length_penalty=LengthPenaltyParams(l_max=100, l_cache=20))
    control = make_length_control(LengthControlKnob(choice="length_penalty", alternatives=alts))
    assert isinstance(control, LengthPenalty)
    assert control.thinking_budget(torch.Generator()) is None
    # window starts at 80: 90 -> (80 - 90)/20 = -.5
    adj = control.reward_adjustment(torch.tensor([50.0, 80.0, 90.0, 100.0, 101.0]))
    assert adj.tolist() == [0.0, 0.0, -0.5, -1.0, -1.0]


def test_registry_matches_schema_and_baseline_is_interruption() -> None:
    assert set(LENGTH_CONTROLS) == set(LengthControlKnob.alternative_names())
    baseline = make_length_control(LengthControlKnob())
    assert isinstance(baseline, Interruption)
    assert baseline.params == InterruptionParams()
