"""A run's value at the target read from its finished peers at the same compute.

The runs of one sweep or search share a task, an evaluation and a schedule, so how the finished
ones moved from compute ``c`` to the target says how an unfinished one at ``c`` will move. With
``n`` finished peers, ``x_i`` their smoothed value at ``c`` (the mean of their last
:data:`PEER_POINTS` reports at or before ``c``) and ``y_i`` their final values:

- ``n >= 4``: least squares ``y = a + b x``; the run's forecast is ``a + b x`` and its error the
  ordinary-least-squares prediction error, Student t with ``n - 2`` degrees of freedom:
  scale ``s * sqrt(1 + 1/n + (x - mean x)^2 / sum (x_i - mean x)^2)``;
- ``n`` = 2 or 3 (or peers all at one value, where no slope can be fitted): the shift model,
  slope 1, every run gains what the peers gained on average: ``x + mean(y - x)``, scale
  ``sd(y - x) * sqrt(1 + 1/n)``, ``n - 1`` degrees of freedom (a slope from 3 points leaves one
  degree of freedom, and a t with one is a Cauchy: no use for deciding).

The residual spread already holds every noise the decision faces: the peers' own evaluation noise
at ``c`` and at the target, and how differently runs move after ``c`` (curves that cross).
Nothing is calibrated across sources: each study's peers are its calibration, so the interval
is exactly valid when the peers' (x, y) pairs follow the linear model with normal errors, and
``exceed_probability`` is then uniform on outcomes (tests/unit/analysis/test_peers.py checks
it on draws whose truth is set). What it cannot know: peers are the runs that were *not*
stopped, so a pruned run's future is read from better runs than itself (the slope carries the
difference when ``n >= 4``); the search benchmark measures the net effect (bench/README.md,
"Search").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

PEER_POINTS = 3  # reports averaged into a run's value at a compute (one report is too noisy)
MIN_SLOPE_PEERS = 4  # fewer: the shift model (slope 1), see the module docstring
TINY_SCALE = 1e-12  # a spread below this is rounding of an exact zero (identical gains)


@dataclass(frozen=True)
class PeerForecast:
    """A run's forecast at the target from ``n`` finished peers: Student t with location
    ``value``, scale ``scale`` and ``df`` degrees of freedom; ``slope`` is the fitted b (1.0 for
    the shift model)."""

    value: float
    scale: float
    df: int
    n: int
    slope: float


def smoothed_at(steps: np.ndarray, values: np.ndarray, upto: float, points: int = PEER_POINTS) -> float:
    """The mean of the last ``points`` finite ``values`` at ``steps <= upto`` (NaN with fewer)."""
    s = np.asarray(steps, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    keep = (s <= upto) & np.isfinite(v)
    v = v[keep][np.argsort(s[keep], kind="stable")]
    return float(np.mean(v[-points:])) if v.size >= points else math.nan


def peer_forecast(x: float, peers_x: Sequence[float], peers_y: Sequence[float]) -> PeerForecast:
    """The forecast of a run at smoothed value ``x`` from peers that were at ``peers_x`` at the
    same compute and finished at ``peers_y`` (pairs with a non-finite member dropped). Fewer
    than 2 peers, or a non-finite ``x``: a forecast of NaN (never decides)."""
    px = np.asarray(peers_x, dtype=np.float64)
    py = np.asarray(peers_y, dtype=np.float64)
    ok = np.isfinite(px) & np.isfinite(py)
    px, py = px[ok], py[ok]
    n = int(px.size)
    if n < 2 or not math.isfinite(x):
        return PeerForecast(math.nan, math.nan, 0, n, math.nan)
    sxx = float(np.sum((px - px.mean()) ** 2))
    if n >= MIN_SLOPE_PEERS and sxx > 0.0:
        b = float(np.sum((px - px.mean()) * (py - py.mean())) / sxx)
        a = float(py.mean() - b * px.mean())
        resid = py - (a + b * px)
        s2 = float(resid @ resid) / (n - 2)
        scale = math.sqrt(s2 * (1.0 + 1.0 / n + (x - float(px.mean())) ** 2 / sxx))
        return PeerForecast(a + b * x, scale, n - 2, n, b)
    gain = py - px
    scale = float(np.std(gain, ddof=1)) * math.sqrt(1.0 + 1.0 / n)
    return PeerForecast(x + float(gain.mean()), scale, n - 1, n, 1.0)


def exceed_probability(forecast: PeerForecast, bar: float) -> float:
    """P(the run's value at the target > ``bar``) under ``forecast``'s Student t; NaN when the
    forecast is not finite or its scale is not above :data:`TINY_SCALE` (peers that all gained
    exactly the same give no spread to judge by)."""
    f = forecast
    if not (math.isfinite(f.value) and math.isfinite(f.scale) and f.scale > TINY_SCALE and f.df >= 1):
        return math.nan
    if not math.isfinite(bar):
        return math.nan
    return float(stats.t.sf((bar - f.value) / f.scale, f.df))
