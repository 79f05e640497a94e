"""Weighted fits: per-point standard errors (``sigma``) on every fit entry point."""

from __future__ import annotations

import numpy as np
import pytest

from scalerl.harness.analysis.fit.bootstrap import bootstrap_fits
from scalerl.harness.analysis.fit.curve import SIGMA_FLOOR, FitOptions, prepare, sigmoid_curve
from scalerl.harness.analysis.fit.fitters import fit_sigmoid, fit_sigmoid_many
from scalerl.harness.errors import ConfigError

C = np.geomspace(500, 30_000, 40)
TRUE = (0.2, 0.70, 1.5, 2000.0)  # r0, A, B, C_mid: the inflection sits in the precise first half


def _heteroscedastic(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A curve whose first half has SE 0.005 and second half SE 0.08 (a very noisy tail)."""
    rng = np.random.default_rng(seed)
    sd = np.where(np.arange(C.size) < C.size // 2, 0.005, 0.08)
    return sigmoid_curve(C, *TRUE) + rng.normal(0.0, sd), sd


def test_weighted_fit_recovers_truth_better_on_a_noisy_tail() -> None:
    curves, sigmas = zip(*(_heteroscedastic(s) for s in range(40)), strict=True)
    data = [(C, v) for v in curves]
    opts = FitOptions(r0=TRUE[0])
    plain = fit_sigmoid_many(data, options=opts)
    weighted = fit_sigmoid_many(data, options=opts, sigma=list(sigmas))
    assert all(f.ok for f in plain) and all(f.ok for f in weighted)
    truth = sigmoid_curve(C, *TRUE)

    def curve_rmse(fits: list) -> float:  # median over draws of the fitted curve's RMSE to truth
        return float(np.median([np.sqrt(np.mean((f.predict(C) - truth) ** 2)) for f in fits]))

    def a_err(fits: list) -> float:
        return float(np.median([abs(f.a - TRUE[1]) for f in fits]))

    # Measured over these 40 draws: curve RMSE 0.0054 weighted vs 0.0124 unweighted; |A error|
    # 0.0116 vs 0.0249.
    assert curve_rmse(weighted) < 0.5 * curve_rmse(plain)
    assert a_err(weighted) < 0.6 * a_err(plain)
    assert a_err(weighted) < 0.015


@pytest.mark.parametrize("method", ["fast", "curve_fit"])
def test_equal_sigma_gives_the_unweighted_answer(method: str) -> None:
    v, _ = _heteroscedastic(3)
    plain = fit_sigmoid(C, v, method=method)
    same = fit_sigmoid(C, v, method=method, sigma=np.full(C.size, 0.02))
    for p, q in ((plain.a, same.a), (plain.b, same.b), (plain.c_mid, same.c_mid), (plain.r0, same.r0)):
        assert q == pytest.approx(p, rel=1e-6)


def test_sigma_follows_points_through_prepare() -> None:
    c = np.array([400.0, 100.0, np.nan, 300.0, 200.0, 500.0])
    v = np.array([0.5, 0.2, 0.3, 0.4, 0.3, 0.6])
    s = np.array([0.04, 0.01, 0.02, 0.03, 0.0, np.nan])
    prep = prepare(c, v, FitOptions(), sigma=s)
    np.testing.assert_array_equal(prep.x, [100.0, 200.0, 300.0, 400.0, 500.0])
    # The zero SE is floored; the NaN SE takes the median of the valid ones (0, .01, .02, .03, .04).
    assert prep.sigma is not None
    np.testing.assert_allclose(prep.sigma, [0.01, SIGMA_FLOOR, 0.03, 0.04, 0.02])
    assert prep.weights is not None and prep.weights.max() == 1.0


def test_sigma_length_mismatch_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="sigma"):
        fit_sigmoid(C, sigmoid_curve(C, *TRUE), sigma=np.ones(3))
    with pytest.raises(ConfigError, match="sigma"):
        fit_sigmoid_many([(C, sigmoid_curve(C, *TRUE))], sigma=[None, None])


def test_bootstrap_with_sigma() -> None:
    v, sd = _heteroscedastic(1)
    v2, sd2 = _heteroscedastic(2)
    group = [(C, v), (C, v2)]
    opts = FitOptions(r0=TRUE[0])
    plain = bootstrap_fits([group], n_boot=40, seed=0, options=opts)[0]
    none_sigma = bootstrap_fits([group], n_boot=40, seed=0, sigma=[[None, None]], options=opts)[0]
    weighted = bootstrap_fits([group], n_boot=40, seed=0, sigma=[[sd, sd2]], options=opts)[0]
    # No sigma anywhere is exactly the unweighted bootstrap (same replicates, same fits).
    np.testing.assert_array_equal(plain.samples, none_sigma.samples)
    assert weighted.fit.ok and plain.fit.ok
    assert abs(weighted.fit.a - TRUE[1]) < 0.02
    # Downweighting the noisy tail narrows the bootstrap interval on A.
    assert weighted.fit.a_hi - weighted.fit.a_lo < plain.fit.a_hi - plain.fit.a_lo
    with pytest.raises(ConfigError, match="sigma"):
        bootstrap_fits([group], n_boot=2, sigma=[[sd]])
