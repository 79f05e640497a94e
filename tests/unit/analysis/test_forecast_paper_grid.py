"""The paper-grid baseline with its A grid recentred per curve (bench/forecast.py's second paper row)."""

from __future__ import annotations

import numpy as np
import pytest

from scalerl.harness.analysis.fit.curve import sigmoid_curve
from scalerl.harness.analysis.fit.fitters import PaperGridFitter, fit_sigmoid

PAPER_A = tuple(np.round(np.arange(0.450, 0.8001, 0.005), 3).tolist())


def test_default_grid_is_the_papers() -> None:
    f = PaperGridFitter()
    assert f.recentre_below is None
    assert f.grid_for(np.array([0.1, 0.95])) == PAPER_A
    assert len(PAPER_A) == 71 and PAPER_A[0] == 0.45 and PAPER_A[-1] == 0.8


@pytest.mark.parametrize(
    ("y_max", "first", "last", "count"),
    [
        (0.20, 0.15, 0.50, 71),  # low ceiling (AIME-like): the whole grid moves down
        (0.90, 0.85, 1.00, 31),  # high ceiling: values above 1.0 are dropped
        (0.03, 0.00, 0.35, 71),  # never below 0
    ],
)
def test_recentred_grid(y_max: float, first: float, last: float, count: int) -> None:
    grid = PaperGridFitter(recentre_below=0.05).grid_for(np.array([0.0, y_max]))
    assert len(grid) == count
    assert grid[0] == pytest.approx(first, abs=1e-9) and grid[-1] == pytest.approx(last, abs=1e-9)
    assert np.allclose(np.diff(grid), 0.005)


def test_recentred_grid_reaches_a_ceiling_the_fixed_grid_cannot() -> None:
    # Noise-free curve with A = 0.9 observed up to ~0.85; a reduced grid (A step 0.025, 15 C_mid
    # values) keeps it fast, and the true C_mid is one of those 15 values.
    x = np.geomspace(10.0, 5000.0, 40)
    c_mid = float(np.geomspace(10.0, 5000.0, 15)[9])
    y = sigmoid_curve(x, 0.1, 0.9, 1.5, c_mid)
    coarse = tuple(np.round(np.arange(0.450, 0.8001, 0.025), 3).tolist())
    fixed = fit_sigmoid(x, y, r0=0.1, method=PaperGridFitter(a_grid=coarse, n_c_mid=15))
    moved = fit_sigmoid(x, y, r0=0.1, method=PaperGridFitter(a_grid=coarse, n_c_mid=15, recentre_below=0.05))
    assert fixed.ok and moved.ok
    assert fixed.a == pytest.approx(0.8)  # pinned at the top of 0.45..0.80
    assert abs(moved.a - 0.9) <= 0.0125 + 1e-9  # within half a grid step of the truth
    assert moved.rmse < fixed.rmse / 3
