"""Seed-level inference: pooled group estimates, t contrasts, claims' p-values, Benjamini-Hochberg."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from scipy import stats

from scalerl.harness.analysis.verdicts.inference import Contrast, bh, pool_groups


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


def test_a_contrast_with_an_own_scatter_group_takes_its_degrees_of_freedom() -> None:
    rng = np.random.default_rng(3)
    quiet = {f"g{i}": list(0.7 + 0.01 * rng.standard_normal(3)) for i in range(8)}
    pooled = pool_groups(quiet | {"dipped": [0.70, 0.71, 0.55]})
    dipped, g0 = pooled.groups["dipped"], pooled.groups["g0"]
    assert dipped.own and not g0.own and dipped.own_var == dipped.var
    # Two quiet groups: the sweep's degrees of freedom (8 groups x 2).
    assert Contrast.between(pooled, "g0", "g1").df == pooled.df == 16
    # Against the dipped group: Welch-Satterthwaite, dominated by its own 2 degrees of freedom.
    c = Contrast.between(pooled, "g0", "dipped")
    total = g0.var + dipped.var
    expect = total**2 / (g0.var**2 / 16 + dipped.var**2 / 2)
    assert c.df == pytest.approx(expect) and 2.0 <= c.df < 2.5
    # So its interval is wider than the pooled t would make it, by the quantiles' ratio.
    lo, hi = c.ci(0.95)
    assert (hi - lo) / 2 == pytest.approx(float(stats.t.ppf(0.975, expect)) * math.sqrt(total))
    assert float(stats.t.ppf(0.975, c.df)) > 1.8 * float(stats.t.ppf(0.975, 16))


def test_a_group_whose_scatter_is_own_keeps_2_df_at_three_seeds_in_coverage() -> None:
    # Known truth: one knob in nine makes training erratic (seed sd 0.08 against 0.01). Its
    # contrast's 95% interval must still hold the truth 95% of the time when the F test flags it
    # (with the pooled t(16) instead of its own 2 degrees of freedom it held 88.6%; with them 97.5%:
    # conditioned on the F test flagging it, its own variance runs high).
    rng = np.random.default_rng(1)
    hits = total = 0
    for _ in range(3000):
        values = {f"g{i}": rng.normal(0.70, 0.01, 3).tolist() for i in range(8)}
        values["erratic"] = rng.normal(0.73, 0.08, 3).tolist()
        pooled = pool_groups(values)
        if not pooled.groups["erratic"].own:
            continue
        lo, hi = Contrast.between(pooled, "g0", "erratic").ci(0.95)
        hits += lo <= 0.03 <= hi
        total += 1
    assert total > 2000
    assert 0.95 <= hits / total <= 0.995


def test_the_baseline_is_floored_at_its_own_scatter_and_only_when_it_is_larger() -> None:
    rng = np.random.default_rng(5)
    quiet = {f"g{i}": list(0.7 + 0.01 * rng.standard_normal(3)) for i in range(8)}
    # A baseline whose seeds scatter 1.5x the sweep's sd: not significant at 3 seeds (no F flag).
    wide = {"base": [0.70, 0.715, 0.685]}
    plain = pool_groups(quiet | wide)
    floored = pool_groups(quiet | wide, own_floor=("base",))
    assert not plain.groups["base"].own
    own = float(np.var(wide["base"], ddof=1)) / 3
    assert own > plain.groups["base"].var
    b = floored.groups["base"]
    assert b.var == pytest.approx(own) and b.mean == plain.groups["base"].mean
    # Nothing else moves, and the contrasts keep the sweep's degrees of freedom (the floor only
    # widens; a flagged group's own n - 1 would make a 2-seed sweep undecidable).
    for g in quiet:
        assert floored.groups[g] == plain.groups[g]
    c = Contrast.between(floored, "base", "g0")
    assert c.df == floored.df and c.se == pytest.approx(math.sqrt(own + floored.groups["g0"].var))
    assert Contrast.between(plain, "base", "g0").df == plain.df
    # A baseline quieter than the sweep keeps the pooled variance (the floor never narrows).
    tight = {"base": [0.700, 0.701, 0.699]}
    kept = pool_groups(quiet | tight, own_floor=("base",)).groups["base"]
    assert kept == pool_groups(quiet | tight).groups["base"]


def test_the_floored_baseline_holds_coverage_when_its_seeds_dip_at_three_seeds() -> None:
    # Known truth: 8 knobs of dA 0.03 against a baseline, seed sd 0.01; in half the sweeps one
    # baseline seed sits 0.02 low (a late dip too small for the F test at 3 seeds). The sweep's
    # contrasts share that baseline, so its variance decides all of them at once. And the price
    # when nothing dips: the floor over-covers a little, not much.
    def coverage(dip_share: float, dip: float) -> dict[bool, float]:
        rng = np.random.default_rng(2)
        hits = {False: 0, True: 0}
        for _ in range(1500):
            base = rng.normal(0.70, 0.01, 3)
            if rng.random() < dip_share:
                base[0] -= dip
            values = {"base": base.tolist()} | {f"v{k}": rng.normal(0.73, 0.01, 3).tolist() for k in range(8)}
            for floor in (False, True):
                pooled = pool_groups(values, own_floor=("base",) if floor else ())
                for k in range(8):
                    lo, hi = Contrast.between(pooled, "base", f"v{k}").ci(0.95)
                    hits[floor] += lo <= 0.03 <= hi
        return {k: v / 12000 for k, v in hits.items()}

    dips = coverage(0.5, 0.02)  # measured: 92.7% pooled, 94.6% floored
    assert dips[False] < 0.935 and dips[True] >= 0.94
    clean = coverage(0.0, 0.0)  # measured: 94.7% pooled, 95.7% floored
    assert 0.94 <= clean[False] <= 0.96 and 0.95 <= clean[True] <= 0.965


def _bh_step_up(pvalues: list[float], q: float) -> list[bool]:
    """The textbook step-up (the hand-written rule scipy's ``false_discovery_control`` replaced)."""
    p = np.asarray(pvalues, dtype=np.float64)
    m = p.size
    order = np.argsort(p, kind="stable")
    passed = p[order] <= q * np.arange(1, m + 1) / m
    k = int(np.nonzero(passed)[0].max()) + 1 if passed.any() else 0
    out = np.zeros(m, dtype=bool)
    out[order[:k]] = True
    return [bool(x) for x in out]


def test_benjamini_hochberg_is_scipys_and_agrees_with_the_step_up(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = stats.false_discovery_control

    def counted(ps: Any, **kw: Any) -> Any:
        calls.append(len(ps))
        return real(ps, **kw)

    monkeypatch.setattr(stats, "false_discovery_control", counted)
    rng = np.random.default_rng(7)
    for trial in range(400):
        m = int(rng.integers(1, 30))
        # A mix of nulls (uniform) and signals (near 0), as a sweep's knobs give.
        ps = np.where(rng.random(m) < 0.3, rng.random(m) * 0.01, rng.random(m)).tolist()
        q = float(rng.choice([0.01, 0.05, 0.1, 0.2]))
        assert bh(ps, q) == _bh_step_up(ps, q), (trial, ps, q)
    assert len(calls) == 400
    # NaN counts as a test that is never rejected, as the step-up left it.
    assert (
        bh([0.001, float("nan"), 0.02], 0.05) == [True, False, True] == _bh_step_up([0.001, 1.0, 0.02], 0.05)
    )


def test_seed_effects_shared_by_every_group_come_out_and_cost_their_degrees_of_freedom() -> None:
    from scalerl.harness.analysis.verdicts.inference import remove_seed_effects

    # Four groups at seeds 0-2; seed 2 sits 0.3 lower in every group (a shared data order).
    rng = np.random.default_rng(0)
    means = {"base": 0.5, "a": 0.5, "b": 0.7, "c": 0.5}
    vals = {
        g: [m + 0.01 * rng.standard_normal() - (0.3 if s == 2 else 0.0) for s in range(3)]
        for g, m in means.items()
    }
    ids = {g: [0, 1, 2] for g in vals}
    adj, spent = remove_seed_effects(vals, ids)
    assert spent == 2
    # The contrasts are unchanged (the effects cancel) and the spread is now the 0.01 noise.
    for g in ("a", "b", "c"):
        assert np.mean(adj[g]) - np.mean(adj["base"]) == pytest.approx(
            np.mean(vals[g]) - np.mean(vals["base"])
        )
    blocked = pool_groups(adj, df_spent=spent)
    plain = pool_groups(vals)
    assert blocked.df == plain.df - 2 == 6 and blocked.seed_sd < 0.02 < 0.1 < plain.seed_sd
    # Seeds that no two groups share are left alone.
    assert remove_seed_effects({"x": [1.0, 2.0], "y": [3.0]}, {"x": [0, 1], "y": [5]}) == (
        {"x": [1.0, 2.0], "y": [3.0]},
        0,
    )
