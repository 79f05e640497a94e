"""Seed-level inference: pooled group estimates, t contrasts, claims' p-values, Benjamini-Hochberg."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from scalerl.harness.analysis.inference import Contrast, bh, pool_groups


def test_equal_weights_reduce_to_the_pooled_anova() -> None:
    # No sampling variances known: the textbook pooled-variance t (N - G degrees of freedom).
    values = {"base": [0.70, 0.72, 0.71], "v": [0.60, 0.63, 0.61]}
    pooled = pool_groups(values)
    ss = sum(float(((np.array(y) - np.mean(y)) ** 2).sum()) for y in values.values())
    s2 = ss / 4
    assert pooled.df == 4 and pooled.seed_sd == pytest.approx(math.sqrt(s2))
    c = Contrast.between(pooled, "base", "v")
    assert c.d == pytest.approx(np.mean(values["v"]) - np.mean(values["base"]))
    assert c.se == pytest.approx(math.sqrt(s2 / 3 + s2 / 3))
    lo, hi = c.ci(0.95)
    half = stats.t.ppf(0.975, 4) * c.se
    assert (lo, hi) == pytest.approx((c.d - half, c.d + half))


def test_a_seed_with_a_large_sampling_variance_weighs_little() -> None:
    pooled = pool_groups(
        {"a": [0.70, 0.71, 0.95], "b": [0.70, 0.71, 0.70]},
        {"a": [1e-4, 1e-4, 0.04], "b": [1e-4, 1e-4, 1e-4]},
    )
    assert pooled.groups["a"].mean < 0.72  # the 0.95 seed (sd 0.2) barely moves the mean


def test_claims_agree_with_the_printed_interval() -> None:
    # p < 0.05 exactly when the 95% interval lies in the claim's region.
    for d in np.linspace(-0.1, 0.1, 41):
        c = Contrast(float(d), 0.01, 12.0)
        lo, hi = c.ci(0.95)
        assert (c.p_beyond(0.02) < 0.05) == (lo > 0.02 or hi < -0.02)
        assert (c.p_inside(0.02) < 0.05) == (lo > -0.02 and hi < 0.02)
    exact = Contrast(0.05, 0.0, 3.0)  # noiseless data: the estimate decides
    assert exact.p_beyond(0.02) == 0.0 and exact.p_inside(0.02) == 1.0 and exact.ci(0.95) == (0.05, 0.05)
    assert Contrast(math.nan, 0.01, 3.0).p_beyond(0.02) == 1.0


def test_intervals_hold_their_coverage_at_three_seeds() -> None:
    # Known truth: 9 groups x 3 seeds, seed sd 0.02, true dA 0.03 for every variant. The pooled t
    # interval's 95% must hold 95% of the time (2,000 sweeps: +/- 1% is 2 SE).
    rng = np.random.default_rng(0)
    hits = total = 0
    for _ in range(2000):
        values = {"base": rng.normal(0.70, 0.02, 3).tolist()}
        for k in range(8):
            values[f"v{k}"] = rng.normal(0.73, 0.02, 3).tolist()
        pooled = pool_groups(values)
        for k in range(8):
            lo, hi = Contrast.between(pooled, "base", f"v{k}").ci(0.95)
            hits += lo <= 0.03 <= hi
            total += 1
    assert 0.935 <= hits / total <= 0.965


def test_benjamini_hochberg_steps_up() -> None:
    # m = 5, q = 0.05: thresholds 0.01, 0.02, 0.03, 0.04, 0.05; the largest k with p_(k) <= kq/m
    # is 3 (0.029), so the three smallest are rejected although 0.02 > 0.01.
    assert bh([0.001, 0.02, 0.029, 0.2, 0.9], 0.05) == [True, True, True, False, False]
    assert bh([0.9, 0.001], 0.05) == [False, True]
    assert bh([0.04, 0.04], 0.05) == [True, True]
    assert bh([0.06], 0.05) == [False] and bh([], 0.05) == []


def test_seeds_to_clear_scale_with_the_standard_error() -> None:
    c = Contrast(0.05, 0.02, 20.0)
    n = c.seeds_to_clear(0.02, 3, 0.95)
    assert n is not None and n > 3
    # At n seeds the SE is 0.02 x sqrt(3 / n): the interval clears the margin with 80% power.
    se_n = 0.02 * math.sqrt(3 / n)
    assert 0.05 - (stats.t.ppf(0.975, 20) + stats.norm.ppf(0.8)) * se_n >= 0.02 - 1e-9
    assert Contrast(0.02, 0.01, 20.0).seeds_to_clear(0.02, 3, 0.95) is None  # on the threshold


def test_a_noisy_group_keeps_its_spread_and_does_not_lend_it_to_the_quiet_ones() -> None:
    rng = np.random.default_rng(3)
    quiet = {f"g{i}": list(0.7 + 0.01 * rng.standard_normal(3)) for i in range(8)}
    noisy = {"dipped": [0.70, 0.71, 0.55]}  # one seed dipped late
    both = pool_groups(quiet | noisy)
    alone = pool_groups(quiet)
    # The dipped group keeps its own scatter (its seeds' variance over 3)...
    assert both.groups["dipped"].var == pytest.approx(float(np.var(noisy["dipped"], ddof=1)) / 3)
    # ...and every quiet group's variance, the scale and the degrees of freedom are those of the
    # sweep without it (before: the dip inflated every quiet group's variance several-fold).
    for g in quiet:
        assert both.groups[g].var == pytest.approx(alone.groups[g].var)
        assert both.groups[g].mean == pytest.approx(alone.groups[g].mean)
    assert (both.df, both.seed_sd) == (alone.df, pytest.approx(alone.seed_sd))
