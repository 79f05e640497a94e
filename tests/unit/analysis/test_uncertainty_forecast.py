"""Bootstrap CIs, seed noise, forecasts with intervals, and backtests on every real curve."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from bench.backtest import (
    backtest_many,
    backtest_power_law,
    forecast_compute_to_reach,
    forecast_value,
)
from scalerl.harness.analysis.fit.bootstrap import bootstrap_fits, pool
from scalerl.harness.analysis.fit.curve import FitOptions, sigmoid_curve
from scalerl.harness.importers import read_curves

REAL = Path("/work/shared/data/real-rl-curves")
C = np.geomspace(500, 30_000, 40)


def seeds(n: int, a: float = 0.8, sd: float = 0.01) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(11)
    return [(C, sigmoid_curve(C, 0.2, a, 1.5, 5000) + rng.normal(0, sd, C.size)) for _ in range(n)]


def test_bootstrap_ci_covers_truth_and_forecast_interval() -> None:
    # R0 known: the first points at C=500 already sit ~0.02 above the true start.
    (boot,) = bootstrap_fits([seeds(3)], n_boot=150, seed=1, options=FitOptions(r0=0.2))
    fit = boot.fit
    assert fit.status == "ok" and fit.n_points == 120
    assert fit.a_lo < 0.8 < fit.a_hi and fit.a_hi - fit.a_lo < 0.06
    assert fit.b_lo < fit.b < fit.b_hi and fit.c_mid_lo < 5000 < fit.c_mid_hi
    assert boot.samples.shape == (150, 4) and boot.ok_fraction > 0.95
    truth = sigmoid_curve(100_000, 0.2, 0.8, 1.5, 5000).item()
    fc = forecast_value(boot, 100_000)
    assert fc.lo < truth < fc.hi and abs(fc.value - truth) < 0.02 and fc.hi - fc.lo < 0.06
    reach = forecast_compute_to_reach(boot, 0.9)
    assert sigmoid_curve(reach.value, fit.r0, fit.a, fit.b, fit.c_mid).item() == pytest.approx(0.9 * fit.a)
    assert reach.lo < reach.value < reach.hi


def test_bootstrap_is_reproducible_and_pools_seeds() -> None:
    a = bootstrap_fits([seeds(2)], n_boot=40, seed=7)[0]
    b = bootstrap_fits([seeds(2)], n_boot=40, seed=7)[0]
    np.testing.assert_array_equal(a.samples, b.samples)
    c, v = pool(seeds(2))
    assert c.size == v.size == 80


def test_forecast_from_unfit_curve_is_nan_with_reason() -> None:
    rng = np.random.default_rng(2)
    y = sigmoid_curve(C, 0.2, 0.9, 1.5, 300_000) + rng.normal(0, 0.003, C.size)
    (boot,) = bootstrap_fits([[(C, y)]], n_boot=20)
    assert boot.fit.status == "pre-inflection"
    fc = forecast_value(boot, 1e5)
    assert math.isnan(fc.value) and "pre-inflection" in fc.reason


def _real_sets() -> dict[str, list[tuple[np.ndarray, np.ndarray]]]:
    sets: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {
        "wandb": [],
        "tb_val": [],
        "tb_train": [],
        "verl": [],
    }
    seen = set()
    for f in sorted((REAL / "wandb-export-deep-grpo").glob("*.csv")):
        for c in read_curves(f):
            if (c.run, c.x_name) not in seen:  # a run appears in several exports: backtest it once
                seen.add((c.run, c.x_name))
                sets["wandb"].append((c.x, c.values))
    for f in sorted((REAL / "tensorboard-verl-async").glob("*.tfevents")):
        by_metric = {c.metric: (c.x, c.values) for c in read_curves(f)}
        sets["tb_val"].append(by_metric["val-core/openai/gsm8k/reward/mean@1"])
        sets["tb_train"].append(by_metric["critic/score/mean"])
    for f in sorted((REAL / "verl-fork-parsed").glob("*.csv")):
        sets["verl"] += [(c.x, c.values) for c in read_curves(f, metric="critic/rewards/mean")]
    return sets


# Measured (fit on compute <= half of each run's max, predict the rest), with tolerances just
# above: (curves, ok fits, mean MAE, max MAE, max |final error|, median |final error|). R0 is
# fitted (none of these curves has a step-0 evaluation; issue 36): tb_train's mean MAE fell from
# 0.0205 (R0 = the mean of the first 3 values) to 0.0168; verl's train reward (multiples of 1/128,
# its first values already at its start) fits one more curve (6 of 7, the new one's MAE 0.055)
# and its common curves moved 0.036-0.111 -> 0.037-0.129.
MEASURED = {
    "wandb": (18, 18, 0.0089, 0.0171, 0.0462, 0.0061),
    "tb_val": (11, 11, 0.0046, 0.0069, 0.0145, 0.0025),
    "tb_train": (11, 11, 0.0168, 0.0237, 0.0287, 0.0165),
    "verl": (7, 6, 0.0609, 0.1285, 0.1770, 0.0659),
}


def test_backtests_on_every_real_curve() -> None:
    sets = _real_sets()
    for name, curves in sets.items():
        n, n_ok, mae_mean, mae_max, final_max, final_med = MEASURED[name]
        bts = backtest_many(curves, 0.5)
        ok = [b for b in bts if b.ok]
        assert (len(bts), len(ok)) == (n, n_ok), name
        assert all(b.fit.status == "pre-inflection" for b in bts if not b.ok), name
        finals = np.abs([b.final_error for b in ok])
        assert np.mean([b.mae for b in ok]) < mae_mean + 0.001, name
        assert max(b.mae for b in ok) < mae_max + 0.002, name
        assert finals.max() < final_max + 0.003, name
        assert np.median(finals) < final_med + 0.002, name
    # The paper's point on real validation curves: the sigmoid forecasts better than a power law.
    for name in ("wandb", "verl"):
        sig = np.mean([b.mae for b in backtest_many(sets[name], 0.5) if b.ok])
        pl = np.nanmean([backtest_power_law(c, 0.5)[1] for c in sets[name]])
        assert sig < pl - 0.003, name
