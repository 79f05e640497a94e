"""The simulator's truth is what it says, and the noise fit recovers the noise it is given."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from scalerl import db
from scalerl.db.queries import CURVE_COLUMNS
from scalerl.harness.analysis.fit.curve import sigmoid_curve
from scalerl.harness.analysis.sim.noise_fit import curve_noise, estimate_noise
from scalerl.harness.analysis.sim.simulate import (
    CurveTruth,
    NoiseModel,
    SweepDesign,
    knob_variant,
    loo_variants,
    simulate_sweep,
    write_sweep,
)
from scalerl.harness.analysis.verdicts.service import FitRequest, fit_sweep
from scalerl.harness.errors import ConfigError

BASE = CurveTruth(r0=0.3, a=0.7, b=1.5, c_mid=1000.0)
KNOBS = loo_variants(BASE, nulls=2, d_a=(-0.05, 0.1), b_factors=(1.5,), c_mid_factors=(2.0,))
NOISY = NoiseModel(n=640, sigma_extra=0.012, ar1=0.6, seed_sd_a=0.02, dip_prob=0.2)


def _runs(points: pd.DataFrame) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    return {
        str(rid): (g["gpu_hours"].to_numpy(), g["value"].to_numpy())
        for rid, g in points.groupby("run_id", sort=False)
    }


def test_the_truth_curves_are_the_sigmoid() -> None:
    # Half the gain at C_mid; 90% of it at C_mid * 9^(1/B).
    assert BASE.value([0.0, 1000.0])[1] == pytest.approx(0.5, abs=1e-15)
    assert BASE.value([0.0])[0] == 0.3
    c90 = BASE.compute_at(0.9)
    assert c90 == pytest.approx(1000.0 * 9.0 ** (1 / 1.5), rel=1e-12)
    assert c90 == pytest.approx(4326.75, abs=0.01)
    assert BASE.value([c90])[0] == pytest.approx(0.3 + 0.4 * 0.9, abs=1e-12)
    mover = knob_variant(BASE, "mover", 0.1, name="m")
    assert (mover.curve.a, mover.curve.b, mover.curve.c_mid) == (pytest.approx(0.8), 1.5, 1000.0)
    assert knob_variant(BASE, "shaper-b", 1.5, name="b").curve.b == pytest.approx(2.25)
    assert knob_variant(BASE, "shaper-c-mid", 2.0, name="c").curve.c_mid == 2000.0
    assert knob_variant(BASE, "null", 3.0, name="n").effect == 0.0


def test_noise_free_runs_are_the_sigmoid_and_seeds_coincide() -> None:
    c90 = BASE.compute_at(0.9)
    design = SweepDesign(BASE, KNOBS, seeds=3, budget=c90)
    sim = simulate_sweep(design, NoiseModel(), 0)
    compute = np.linspace(0.0, c90, 31)
    assert list(sim.points.columns) == list(CURVE_COLUMNS)
    assert len(sim.points) == (1 + len(KNOBS)) * 3 * 31
    assert sim.points["n"].isna().all()  # no sampling noise, no n
    truth = {r["variant"]: r for r in sim.truth.to_dict("records")}
    for rid, (c, v) in _runs(sim.points).items():
        t = truth[rid.split("/")[1]]
        np.testing.assert_array_equal(c, compute)
        np.testing.assert_array_equal(v, sigmoid_curve(compute, t["r0"], t["a"], t["b"], t["c_mid"]))
    for _, g in sim.points.groupby("variant"):
        seeds = [g.loc[g["seed"] == s, "value"].to_numpy() for s in range(3)]
        np.testing.assert_array_equal(seeds[0], seeds[1])
        np.testing.assert_array_equal(seeds[0], seeds[2])
    assert truth["mover+0.1"]["d_a"] == pytest.approx(0.1)
    assert truth["mover-0.05"]["d_a"] == pytest.approx(-0.05)
    assert truth["shaper-c-mid-x2"]["d_log_c_mid"] == pytest.approx(math.log(2.0))
    assert truth["shaper-b-x1.5"]["d_b"] == pytest.approx(0.75)
    assert (truth["null-0"]["d_a"], truth["null-0"]["d_b"], truth["null-0"]["d_log_c_mid"]) == (0.0, 0.0, 0.0)
    assert (sim.runs["dip_depth"] == 0).all()
    np.testing.assert_array_equal(sim.runs["a"], [truth[v]["a"] for v in sim.runs["variant"]])


def test_the_same_seed_gives_the_same_bits() -> None:
    design = SweepDesign(BASE, KNOBS, seeds=3, budget=BASE.compute_at(0.9))
    one = simulate_sweep(design, NOISY, 7)
    two = simulate_sweep(design, NOISY, np.random.default_rng(7))
    pd.testing.assert_frame_equal(one.points, two.points)
    pd.testing.assert_frame_equal(one.runs, two.runs, check_exact=True)
    other = simulate_sweep(design, NOISY, 8)
    assert not np.array_equal(one.points["value"].to_numpy(), other.points["value"].to_numpy())
    # Every point carries its n; values are multiples of 1/640 in [0, 1].
    assert (one.points["n"] == 640).all()
    counts = one.points["value"].to_numpy() * 640
    np.testing.assert_allclose(counts, np.round(counts), atol=1e-9)
    no_n = simulate_sweep(design, NoiseModel(n=640, record_n=False), 7)
    assert no_n.points["n"].isna().all()


def test_seed_spread_and_dips_are_drawn_as_stated() -> None:
    noise = NoiseModel(n=None, seed_sd_a=0.03, dip_prob=0.25, dip_depth=0.06, dip_after=0.7)
    design = SweepDesign(BASE, (), seeds=1000, budget=BASE.compute_at(0.99))
    runs = simulate_sweep(design, noise, 3).runs
    assert float(runs["a"].std()) == pytest.approx(0.03, rel=0.1)
    assert float(runs["a"].mean()) == pytest.approx(0.7, abs=0.003)
    dipped = runs[runs["dip_depth"] > 0]
    assert len(dipped) / len(runs) == pytest.approx(0.25, abs=0.04)
    assert dipped["dip_depth"].between(0.03, 0.09).all()
    assert float(dipped["dip_depth"].mean()) == pytest.approx(0.06, abs=0.005)
    assert (dipped["dip_start"] >= 0.7 * design.budget - 1e-9).all()


@pytest.mark.parametrize("phi", [0.6, 0.85])
def test_the_noise_fit_recovers_a_known_ar1(phi: float) -> None:
    # 10 curves of 600 evaluations: binomial (n=1000) white noise plus AR(1) of sd 0.02.
    design = SweepDesign(BASE, (), seeds=10, budget=BASE.compute_at(0.99), points=600)
    sim = simulate_sweep(design, NoiseModel(n=1000, sigma_extra=0.02, ar1=phi), 1)
    est = estimate_noise(list(_runs(sim.points).values()), 1000.0)
    assert est.curves == 10 and est.points_median == 600
    assert est.ar1 == pytest.approx(phi, abs=0.1)
    assert est.sigma_extra == pytest.approx(0.02, rel=0.2)
    assert est.sigma_binomial == pytest.approx(0.0148, abs=0.001)
    assert est.dispersion == pytest.approx(1.0, abs=0.2)
    # Carried to a 30-evaluation design with the same correlation length (share of the run).
    assert est.ar1_at(30) == pytest.approx(est.ar1**20, rel=1e-9)
    model = est.model(n=640, points=600)
    assert model.ar1 == pytest.approx(est.ar1) and model.sigma_extra == pytest.approx(est.sigma_extra)


def test_white_noise_reads_as_white_and_seed_spread_is_recovered() -> None:
    design = SweepDesign(BASE, (), seeds=40, budget=BASE.compute_at(0.99), points=60)
    sim = simulate_sweep(design, NoiseModel(n=500, seed_sd_a=0.03), 2)
    est = estimate_noise(list(_runs(sim.points).values()), 500.0, replicates=[list(range(40))])
    assert est.sigma_extra < 0.006 and est.ar_share < 0.2
    assert est.sigma_resid == pytest.approx(est.sigma_binomial, rel=0.1)
    assert est.seed_sd_a == pytest.approx(0.03, abs=0.008)
    assert est.seed_sd_a < est.seed_sd_a_raw
    assert est.dip_rate == 0.0 and math.isnan(est.dip_depth)


def test_a_late_dip_is_found_and_measured() -> None:
    design = SweepDesign(BASE, (), seeds=20, budget=BASE.compute_at(0.99), points=60)
    sim = simulate_sweep(design, NoiseModel(n=2000, dip_prob=1.0, dip_depth=0.08, dip_after=0.75), 4)
    curves = list(_runs(sim.points).values())
    est = estimate_noise(curves, 2000.0)
    assert est.dip_rate == pytest.approx(1.0, abs=0.1)
    assert est.dip_depth == pytest.approx(0.08, abs=0.02)
    flat = curve_noise(*curves[0][:1], sigmoid_curve(curves[0][0], 0.3, 0.7, 1.5, 1000.0), 2000.0)
    assert flat.dip == 0.0 and math.isnan(flat.dip_at)


def test_a_simulated_sweep_goes_through_the_store_and_scalerl_fit(tmp_path: Path) -> None:
    knobs = loo_variants(BASE, nulls=1, d_a=(0.1,))
    design = SweepDesign(BASE, knobs, seeds=2, budget=BASE.compute_at(0.99), name="t")
    sim = simulate_sweep(design, NoiseModel(n=None), 0)
    store = db.open_store(f"sqlite:///{tmp_path / 's.db'}")
    try:
        assert write_sweep(store, sim) == len(sim.points)
        back = db.queries.curves(store, "t", "val/pass_rate")
        mine = sim.points.sort_values(["run_id", "step"]).reset_index(drop=True)
        np.testing.assert_array_equal(back["value"].to_numpy(), mine["value"].to_numpy())
        np.testing.assert_array_equal(back["gpu_hours"].to_numpy(), mine["gpu_hours"].to_numpy())
        assert set(back["variant"]) == {"baseline", "null-0", "mover+0.1"}
        result = fit_sweep(store, "t", FitRequest(n_boot=50), write=False)
    finally:
        store.close()
    verdicts = {r["variant"]: r for r in result.verdict_rows}
    assert verdicts["null-0"]["verdict"] == "no-effect"
    assert verdicts["mover+0.1"]["verdict"] == "asymptote-mover"
    assert verdicts["mover+0.1"]["d_a"] == pytest.approx(0.1, abs=0.005)


def test_invalid_designs_and_noise_are_refused_by_field() -> None:
    with pytest.raises(ConfigError, match="ar1"):
        NoiseModel(ar1=1.0)
    with pytest.raises(ConfigError, match="dip_prob"):
        NoiseModel(dip_prob=1.5)
    with pytest.raises(ConfigError, match="unique"):
        SweepDesign(BASE, (KNOBS[0], KNOBS[0]))
    with pytest.raises(ConfigError, match="fraction"):
        BASE.compute_at(1.0)
    with pytest.raises(ConfigError, match="c_mid"):
        CurveTruth(0.3, 0.7, 1.5, 0.0)
