"""Peer forecasts (harness/analysis/peers.py): the two models' formulas, and on draws whose truth is
set, that the Student-t probabilities are uniform on outcomes (a "5%" means 5%)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from scalerl.harness.analysis.forecast.peers import (
    PEER_POINTS,
    PeerForecast,
    exceed_probability,
    peer_forecast,
    smoothed_at,
)


def test_shift_model_with_few_peers() -> None:
    xs, ys = [0.30, 0.40, 0.50], [0.50, 0.62, 0.69]
    f = peer_forecast(0.20, xs, ys)
    gain = np.array(ys) - np.array(xs)
    assert (f.n, f.df, f.slope) == (3, 2, 1.0)
    assert f.value == pytest.approx(0.20 + gain.mean())
    assert f.scale == pytest.approx(gain.std(ddof=1) * math.sqrt(1 + 1 / 3))


def test_slope_model_recovers_the_line() -> None:
    rng = np.random.default_rng(0)
    xs = np.linspace(0.2, 0.6, 8)
    ys = 0.3 + 0.5 * xs + rng.normal(0.0, 0.001, xs.size)
    f = peer_forecast(0.1, xs, ys)
    assert (f.n, f.df) == (8, 6)
    assert f.slope == pytest.approx(0.5, abs=0.02)
    assert f.value == pytest.approx(0.35, abs=0.005)
    # Extrapolating below every peer widens the interval (the leverage term).
    assert f.scale > peer_forecast(0.4, xs, ys).scale
    # All peers at one value: no slope can be fitted, the shift model answers.
    flat = peer_forecast(0.1, [0.3] * 5, [0.5, 0.52, 0.49, 0.51, 0.5])
    assert flat.slope == 1.0 and flat.df == 4 and flat.value == pytest.approx(0.1 + 0.204)


def test_degenerate_inputs_never_decide() -> None:
    assert math.isnan(peer_forecast(0.3, [0.4], [0.6]).value)
    assert peer_forecast(0.3, [0.4, math.nan, 0.5], [0.6, 0.7, math.inf]).n == 1
    assert math.isnan(peer_forecast(math.nan, [0.4, 0.5], [0.6, 0.7]).value)
    same_gain = peer_forecast(0.3, [0.4, 0.5, 0.6], [0.6, 0.7, 0.8])  # every peer gained 0.2
    assert same_gain.scale == pytest.approx(0.0, abs=1e-12)
    assert math.isnan(exceed_probability(same_gain, 0.4))
    f = PeerForecast(0.5, 0.1, 3, 5, 1.0)
    assert math.isnan(exceed_probability(f, math.nan))
    assert exceed_probability(f, 0.5) == pytest.approx(0.5)
    assert exceed_probability(f, 0.6) == pytest.approx(stats.t.sf(1.0, 3))
    assert exceed_probability(f, 0.7) < exceed_probability(f, 0.6) < exceed_probability(f, 0.4)


def test_smoothed_at() -> None:
    steps = np.array([40.0, 10.0, 20.0, 30.0])  # order does not matter
    values = np.array([0.9, 0.1, 0.2, 0.3])
    assert smoothed_at(steps, values, 30.0) == pytest.approx(0.2)
    assert smoothed_at(steps, values, 45.0) == pytest.approx((0.2 + 0.3 + 0.9) / 3)
    assert math.isnan(smoothed_at(steps, values, 20.0))  # only 2 reports up to 20
    assert PEER_POINTS == 3


@pytest.mark.parametrize(("n", "slope"), [(3, 1.0), (5, 0.6), (10, 0.6)])
def test_probabilities_are_uniform_on_outcomes(n: int, slope: float) -> None:
    # Known truth: finals = a + slope x + normal noise (slope 1 for the shift model's n). The
    # probability that a new run exceeds its own outcome must be uniform, so P < 0.05 happens
    # 5% of the time and P < 0.5 half of it; 4,000 draws: +-0.012 is 3.5 binomial sds at 5%.
    rng = np.random.default_rng(11 + n)
    u = []
    for _ in range(4000):
        xs = rng.uniform(0.2, 0.6, n)
        ys = 0.1 + slope * xs + rng.normal(0.0, 0.03, n)
        x = rng.uniform(0.1, 0.6)
        y = 0.1 + slope * x + rng.normal(0.0, 0.03)
        u.append(exceed_probability(peer_forecast(x, xs, ys), y))
    arr = np.array(u)
    assert np.isfinite(arr).all()
    assert np.mean(arr < 0.05) == pytest.approx(0.05, abs=0.012)
    assert np.mean(arr < 0.5) == pytest.approx(0.5, abs=0.03)
    assert np.mean(arr < 0.9) == pytest.approx(0.9, abs=0.015)
