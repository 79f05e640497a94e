"""Display downsampling: bounded size, endpoints kept, peaks kept, shape kept in both axis types."""

from __future__ import annotations

import numpy as np

from scalerl.harness.report.downsample import display_indices, grid_indices, lttb


def test_lttb_keeps_endpoints_and_a_spike_a_stride_would_miss() -> None:
    x = np.arange(10_000, dtype=float)
    y = np.zeros_like(x)
    y[5_003] = 1.0  # one spike, off any regular stride of 100
    keep = lttb(x, y, 100)
    assert len(keep) == 100 and keep[0] == 0 and keep[-1] == 9_999
    assert 5_003 in keep
    assert np.all(np.diff(keep) > 0)
    assert len(lttb(x[:50], y[:50], 100)) == 50  # nothing to drop


def test_display_indices_cover_early_log_compute_and_late_linear_compute() -> None:
    c = np.geomspace(1e12, 1e17, 10_000)
    r = 0.1 + 0.5 / (1 + (1e15 / c) ** 1.5)
    keep = display_indices(c, r, 400)
    assert 200 <= len(keep) <= 400
    # Log view: every decade keeps several points (a linear-only sample leaves the first
    # decades with one point each).
    decades = np.floor(np.log10(c[keep]))
    assert all(np.count_nonzero(decades == d) >= 10 for d in range(12, 17))
    # Linear view: the last half of the compute range is not one segment either.
    assert np.count_nonzero(c[keep] > 5e16) >= 10
    # The drawn curve stays within 0.002 of the full one under linear interpolation in log C.
    full = np.interp(np.log(c), np.log(c[keep]), r[keep])
    assert np.max(np.abs(full - r)) < 0.002


def test_grid_indices_keep_both_views_without_the_values() -> None:
    # A run logging every step, compute growing with the step (the usual case): the ranks alone
    # decide, and they serve the log view (every decade) and the linear view like display_indices.
    n = 10_000
    c = 1e13 * np.arange(1, n + 1)
    r = 0.1 + 0.5 / (1 + (1e15 / c) ** 1.5)
    keep = grid_indices(n, 400)
    assert 300 <= len(keep) <= 400 and keep[0] == 0 and keep[-1] == n - 1
    assert np.all(np.diff(keep) > 0)
    decades, every = np.floor(np.log10(c[keep])), np.floor(np.log10(c))
    assert np.count_nonzero(decades == 13) == np.count_nonzero(every == 13) == 9  # all of the first
    assert all(np.count_nonzero(decades == d) >= 40 for d in range(14, 17))
    assert np.count_nonzero(c[keep] > 5e16) >= 10
    full = np.interp(np.log(c), np.log(c[keep]), r[keep])
    assert np.max(np.abs(full - r)) < 0.002
    assert grid_indices(30, 400).tolist() == list(range(30))  # nothing to drop


def test_display_indices_keep_the_lowest_and_highest_point() -> None:
    # Noise around a rising curve: whatever LTTB picks, the drawn copy holds both extremes.
    rng = np.random.default_rng(3)
    c = np.geomspace(1e13, 1e17, 5000)
    r = 0.1 + 0.5 / (1 + (1e15 / c) ** 1.5) + rng.normal(0, 0.02, c.size)
    r[[1234, 4321]] = np.nan  # a non-finite value is never an extreme
    keep = display_indices(c, r, 100)
    finite = np.where(np.isfinite(r), r, np.nan)
    assert {int(np.nanargmin(finite)), int(np.nanargmax(finite)), 0, c.size - 1} <= set(keep.tolist())
    assert len(keep) <= 102
