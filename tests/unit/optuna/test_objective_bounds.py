"""The search objective's forecast follows the rate rule of ``scalerl forecast``: a pass rate never
scores above 1, and an unbounded metric keeps its raw forecast."""

from __future__ import annotations

import numpy as np

from scalerl.harness.recipe.search import ObjectiveSpec
from scalerl.harness.recipe.sweep import FitSpec
from scalerl.harness.search.objective import objective


def _near_one() -> tuple[np.ndarray, np.ndarray]:
    # A run still climbing steeply at 0.97: its 30x forecast and interval reach past 1 unclipped.
    x = np.geomspace(1.0, 100.0, 40)
    y = 0.2 + (1.05 - 0.2) / (1 + (60.0 / x) ** 1.5)
    y = y + np.random.default_rng(0).normal(0, 0.004, x.size)
    return x, np.minimum(y, 0.985)


def test_a_pass_rate_forecast_objective_stays_inside_zero_one() -> None:
    x, y = _near_one()
    spec = ObjectiveSpec(kind="forecast", at=3000.0, level=0.9)
    rate = objective(spec, FitSpec(metric="val/pass_rate", axis="step"), x, y)
    raw = objective(spec, FitSpec(metric="train/reward", axis="step"), x, y)
    assert raw.detail["bounds"] is None and raw.detail["hi"] > 1.0  # the case that needs clipping
    assert rate.detail["bounds"] == [0.0, 1.0]
    assert 0.0 <= rate.detail["lo"] <= rate.value <= rate.detail["hi"] <= 1.0
    assert rate.value == min(raw.value, 1.0) and rate.detail["lo"] == min(raw.detail["lo"], 1.0)
