"""The ``paper`` fitter: ScaleRL's App. A.5 grid widened to the data (DESIGN.md §4), vectorised."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from scalerl.harness.analysis.fit.curve import FitOptions, sigmoid_curve
from scalerl.harness.analysis.fit.fitters import (
    FITTERS,
    PaperFitter,
    PaperGridFitter,
    fit_sigmoid,
    fit_sigmoid_many,
    get_fitter,
)
from scalerl.harness.errors import ConfigError

X = np.geomspace(500.0, 30_000.0, 60)


@pytest.mark.parametrize(
    ("a", "b", "c_mid"),
    [(0.70, 1.5, 5000.0), (0.30, 2.5, 2000.0), (0.92, 0.9, 8000.0), (0.12, 1.2, 1500.0)],
)
def test_recovers_known_parameters(a: float, b: float, c_mid: float) -> None:
    y = sigmoid_curve(X, 0.05, a, b, c_mid) + np.random.default_rng(0).normal(0.0, 0.003, X.size)
    fit = fit_sigmoid(X, y, r0=0.05, method="paper")
    assert fit.status == "ok" and fit.method == "paper" and fit.reason == ""
    assert abs(fit.a - a) <= 0.015  # noise, the 0.005 lattice and the C_mid grid
    assert fit.a == pytest.approx(round(fit.a / 0.005) * 0.005, abs=1e-9)  # on the lattice
    assert abs(math.log(fit.b / b)) < 0.15
    assert abs(math.log(fit.c_mid / c_mid)) < 0.12  # C_mid grid: 100 values, 6.3% apart here


def test_grids_are_widened_to_the_data() -> None:
    f = PaperFitter()
    grid = f.a_grid_for(np.array([0.1, 0.5]), (0.0, 1.0))
    assert grid[0] == pytest.approx(0.30) and grid[-1] == pytest.approx(1.0) and grid.size == 141
    assert np.allclose(np.diff(grid), 0.005)
    # Rounded down onto the paper's lattice (multiples of 0.005), never below 0.
    assert f.a_grid_for(np.array([0.9037]), (0.0, 1.0))[0] == pytest.approx(0.700)
    low = f.a_grid_for(np.array([0.13]), (0.0, 1.0))
    assert low[0] == 0.0 and low.size == 201
    c = f.c_grid_for(np.array([200.0, 1000.0, 8000.0]))
    assert c.size == 100 and c[0] == pytest.approx(100.0) and c[-1] == pytest.approx(32_000.0)


def _literal(x: np.ndarray, y: np.ndarray, r0: float, f: PaperFitter) -> float:
    """The procedure cell by cell: a bounded scipy curve_fit for B (several starts) per cell."""
    from scipy.optimize import curve_fit

    best = math.inf
    for a in f.a_grid_for(y, (0.0, 1.0)):
        for c_mid in f.c_grid_for(x):

            def g(xx: np.ndarray, b: float, a: float = float(a), c_mid: float = float(c_mid)) -> np.ndarray:
                return sigmoid_curve(xx, r0, a, b, c_mid)

            for p0 in (0.3, 3.0):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    (b,), _ = curve_fit(g, x, y, p0=(p0,), bounds=([f.b_range[0]], [f.b_range[1]]))
                best = min(best, float(np.sum((y - g(x, b)) ** 2)))
    return best


@pytest.mark.parametrize("seed", [0, 1])
def test_matches_a_literal_per_cell_curve_fit_loop(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = np.geomspace(10.0, 5000.0, 30)
    y = sigmoid_curve(x, 0.1, 0.6, 1.3, 400.0) + rng.normal(0.0, 0.02, x.size)
    f = PaperFitter(a_step=0.05, n_c_mid=8)  # a reduced grid keeps the literal loop to ~1 s
    fit = fit_sigmoid(x, y, r0=0.1, method=f)
    sse = float(np.sum((y - sigmoid_curve(x, 0.1, fit.a_raw, fit.b, fit.c_mid)) ** 2))
    assert sse == pytest.approx(_literal(x, y, 0.1, f), rel=1e-8)


def test_a_at_the_top_of_the_grid_is_reported() -> None:
    # A curve still climbing steeply towards a ceiling above 1 (true A = 1.6): the best cell
    # is A = 1.0, the top of the grid, and the reason says so.
    y = sigmoid_curve(X, 0.1, 1.6, 1.5, 25_000.0)
    assert y.max() < 0.96  # the data stay below the bound; the best A does not
    fit = fit_sigmoid(X, y, r0=0.1, method="paper")
    assert fit.a_raw == pytest.approx(1.0)
    assert "paper grid edge: A at the top of its grid (1.000)" in fit.reason


def test_a_at_the_bottom_of_the_grid_is_reported() -> None:
    # A plateau at 0.5 with one spike to 0.9: the grid starts at 0.70, above the plateau.
    y = sigmoid_curve(X, 0.1, 0.5, 2.0, 2000.0)
    y[40] = 0.9
    fit = fit_sigmoid(X, y, r0=0.1, method="paper")
    assert fit.ok and fit.a == pytest.approx(0.70)
    assert "paper grid edge: A at the bottom of its grid (0.700): the fit puts the ceiling far" in fit.reason
    # A fit inside its grid carries no note.
    assert fit_sigmoid(X, sigmoid_curve(X, 0.1, 0.5, 2.0, 2000.0), r0=0.1, method="paper").reason == ""


def test_degenerate_inputs_are_refused_clearly() -> None:
    y = sigmoid_curve(X, 0.2, 0.7, 1.5, 5000.0)
    # A metric outside [0, 1]: no A in the grid can be right.
    out = fit_sigmoid(X, 2.0 * y, r0=0.4, method="paper")
    assert out.status == "failed" and math.isnan(out.a)
    assert "A grid is empty: max of the fitted values 1.3" in out.reason and "rescale" in out.reason
    few = fit_sigmoid(X[:3], y[:3], method="paper")
    assert few.status == "too-few-points"
    flat = fit_sigmoid(X, np.full(X.size, 0.4), method="paper")
    assert flat.status == "flat"
    with pytest.raises(ConfigError, match=r"a_step=0\.0.*fix: use 0\.005"):
        PaperFitter(a_step=0.0)
    with pytest.raises(ConfigError, match=r"b_range=\(0\.0, 1\.0\).*B must be > 0"):
        PaperFitter(b_range=(0.0, 1.0))


def test_selectable_by_name_with_fixed_a_and_weights() -> None:
    assert isinstance(get_fitter("paper"), PaperFitter) and FITTERS["paper"] is PaperFitter
    y = sigmoid_curve(X, 0.2, 0.7, 1.5, 5000.0) + np.random.default_rng(3).normal(0.0, 0.005, X.size)
    pinned = fit_sigmoid(X, y, r0=0.2, fixed_a=0.66, method="paper")
    assert pinned.ok and pinned.a == 0.66 and pinned.reason == ""
    plain, weighted = fit_sigmoid_many(
        [(X, y), (X, y)], r0=[0.2, 0.2], method="paper", sigma=[None, [0.01] * X.size]
    )
    # Equal sigmas are the unweighted problem.
    assert (weighted.a, weighted.b, weighted.c_mid) == pytest.approx((plain.a, plain.b, plain.c_mid))
    # Down-weighting the top half of the curve moves the fit.
    sig = np.where(np.arange(X.size) >= 30, 1.0, 0.005)
    y2 = y.copy()
    y2[30:] += 0.05
    low, high = fit_sigmoid_many([(X, y2), (X, y2)], r0=[0.2, 0.2], method="paper", sigma=[sig, None])
    assert low.a < high.a - 0.02


def test_memory_blocks_do_not_change_the_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    from scalerl.harness.analysis.fit import paper as paper_fit

    y = sigmoid_curve(X, 0.1, 0.6, 1.4, 4000.0) + np.random.default_rng(5).normal(0.0, 0.01, X.size)
    whole = fit_sigmoid(X, y, r0=0.1, method="paper")
    # Blocks of one C_mid x 8 B values x 60 points, and 1 A value at a time.
    monkeypatch.setattr(paper_fit, "_CHUNK", 500)
    blocked = fit_sigmoid(X, y, r0=0.1, method="paper")
    assert (blocked.a, blocked.b, blocked.c_mid) == pytest.approx((whole.a, whole.b, whole.c_mid), rel=1e-9)


def test_r0_is_the_runs_initial_performance_as_the_paper_defines_it() -> None:
    """The paper's R0 is the run's initial performance: its first point (a step-0 evaluation
    where it logged one), not the mean of the first three points that other fitters use. On a
    noiseless curve logged from its first step the first three points have already risen, so
    their mean is further from the start than the first point is."""
    y = sigmoid_curve(X, 0.05, 0.6, 1.5, 5000.0)
    shuffled = np.random.default_rng(1).permutation(X.size)  # order of logging does not matter
    fit = fit_sigmoid(X[shuffled], y[shuffled], method="paper")
    assert fit.r0 == y[0] and fit.ok
    with_step0 = fit_sigmoid(np.r_[0.0, X], np.r_[0.05, y], method="paper")
    assert with_step0.r0 == 0.05 and abs(with_step0.a - 0.6) <= 0.005  # the true start: A on its lattice
    # The literal grid takes the same R0; an explicit R0 (argument or options) is used as given.
    assert fit_sigmoid_many([(X, y)], method=PaperGridFitter(n_c_mid=4, a_grid=(0.6,)))[0].r0 == y[0]
    assert fit_sigmoid(X, y, r0=0.02, method="paper").r0 == 0.02
    assert fit_sigmoid(X, y, method="paper", options=FitOptions(r0=0.03)).r0 == 0.03
    # r0_from="options": R0 as FitOptions say (by default fitted with A, B and C_mid when there is
    # no step-0 point: the true start, below the first logged value); a rule chosen in the options wins.
    opts = fit_sigmoid(X, y, method=PaperFitter(r0_from="options"))
    assert opts.r0 == pytest.approx(0.05, abs=2e-3) and opts.r0 < y[0] - 0.01
    three = fit_sigmoid(X, y, method="paper", options=FitOptions(r0_rule="first", r0_points=3))
    assert three.r0 == pytest.approx(np.mean(y[:3]))
    with pytest.raises(ConfigError, match=r"r0_from='mean'.*fix: use 'first'"):
        PaperFitter(r0_from="mean")  # type: ignore[arg-type]
