"""The look plan of stop-when-decided: interim levels, the final level, the union bound."""

from __future__ import annotations

import math

import pytest

from scalerl.harness.analysis.verdicts.spending import (
    LookPlan,
    final_level,
    look_level,
    looks_by_points,
    looks_reached,
    sweep_level,
)
from scalerl.harness.errors import ConfigError


def test_the_looks_and_the_final_level_spend_at_most_alpha() -> None:
    plan = LookPlan()
    # Three interim looks at alpha 0.001 each leave 0.047 for the final verdict: level 0.953.
    assert final_level(plan) == pytest.approx(0.953)
    spent = len(plan.fractions) * (1 - plan.interim_level) + (1 - final_level(plan))
    assert spent == pytest.approx(0.05) and spent <= 0.05 + 1e-12
    for level, fractions, interim in ((0.99, (0.5,), 0.9999), (0.9, (0.1, 0.2, 0.4, 0.8), 0.99)):
        p = LookPlan(level=level, fractions=fractions, interim_level=interim)
        total = len(fractions) * (1 - interim) + (1 - final_level(p))
        assert total <= (1 - level) + 1e-12 and final_level(p) > level


def test_a_look_is_due_once_per_planned_fraction_reached() -> None:
    plan = LookPlan()
    assert look_level(plan, 0.2) is None
    assert look_level(plan, 0.25) == 0.999 and look_level(plan, 0.3, taken=1) is None
    assert look_level(plan, 0.6, taken=1) == 0.999  # the 50% look
    assert look_level(plan, 1.0, taken=3) is None  # every planned look taken
    assert [looks_reached(plan, f) for f in (0.0, 0.249, 0.25, 0.74, 0.75, 2.0, math.nan)] == [
        0, 0, 1, 2, 3, 3, 0,
    ]  # fmt: skip
    # Planned size unknown: looks at 8, 16, 32 points, never more than the plan's three.
    assert [looks_by_points(plan, n) for n in (0, 7, 8, 15, 16, 31, 32, 1000)] == [0, 0, 1, 1, 2, 2, 3, 3]


def test_the_sweep_level_and_the_plan_are_checked() -> None:
    assert sweep_level({"confidence": 0.99}) == 0.99
    assert sweep_level({"confidence": 0.9, "stop_when": "decided"}) == pytest.approx(0.903)
    assert sweep_level({"confidence": 0.9, "stop_when": "settled"}) == pytest.approx(0.903)
    assert sweep_level(None) == 0.95
    with pytest.raises(ConfigError, match="spend all of alpha"):
        LookPlan(level=0.99, interim_level=0.995, fractions=(0.2, 0.4, 0.6))
    with pytest.raises(ConfigError, match="increasing"):
        LookPlan(fractions=(0.5, 0.25))
    with pytest.raises(ConfigError, match=r"\(level, 1\)"):
        LookPlan(interim_level=0.9)
