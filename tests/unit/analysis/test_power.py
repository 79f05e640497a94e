"""Minimum detectable effects and the seeds a target needs: the arithmetic, with values."""

from __future__ import annotations

import math

import pytest

from scalerl.harness.analysis.verdicts.pipeline import classify
from scalerl.harness.analysis.verdicts.power import mde, seeds_for, z_two_sided
from scalerl.harness.analysis.verdicts.service import noise_notes
from scalerl.harness.analysis.verdicts.types import VerdictOptions
from tests.unit.analysis.sweeps import synthetic_sweep

K = 1.959964 + 0.841621  # z_{0.975} + z_{0.8}


def test_mde_is_the_two_sided_formula_or_the_floor_plus_power() -> None:
    assert z_two_sided(0.05) == pytest.approx(1.959964, abs=1e-6)
    assert mde(0.01) == pytest.approx(K * 0.01, abs=1e-6)  # 0.0280
    # With the 0.02 margin as floor the margin rule dominates: 0.02 + 0.8416 x 0.01 = 0.0284.
    assert mde(0.01, floor=0.02) == pytest.approx(0.02 + 0.841621 * 0.01, abs=1e-6)
    assert mde(0.02, floor=0.02) == pytest.approx(K * 0.02, abs=1e-6)  # 0.0560 > 0.0368
    # The Bonferroni level of the two efficiency tests (alpha 0.025): z_{0.9875} = 2.2414.
    assert mde(0.1, alpha=0.025) == pytest.approx((2.241403 + 0.841621) * 0.1, abs=1e-6)
    assert mde(0.01, power=0.9) == pytest.approx((1.959964 + 1.281552) * 0.01, abs=1e-6)
    assert math.isnan(mde(math.nan)) and math.isnan(mde(-1.0))


def test_seeds_scale_the_standard_error_by_sqrt_of_the_seed_ratio() -> None:
    # SE 0.01 at 3 seeds, target 0.02, no floor: SE must fall to 0.02 / 2.8016 = 0.007139, so
    # seeds >= 3 x (0.01 / 0.007139)^2 = 5.89 -> 6; and the MDE at 6 seeds is indeed <= 0.02.
    assert seeds_for(0.02, 0.01, 3) == 6
    assert mde(0.01 * math.sqrt(3 / 6)) <= 0.02 < mde(0.01 * math.sqrt(3 / 5))
    # With the 0.02 margin as floor: SE must fall to min(0.03 / 2.8016, 0.01 / 0.8416) = 0.01071,
    # from 0.02 at 1 seed -> 1 x (0.02 / 0.01071)^2 = 3.49 -> 4 seeds.
    assert seeds_for(0.03, 0.02, 1, floor=0.02) == 4
    assert seeds_for(0.05, 0.001, 3) == 1  # already far below the target: never fewer than 1
    assert seeds_for(0.02, 0.01, 3, floor=0.02) is None  # the margin does not shrink with seeds
    assert seeds_for(0.02, math.nan, 3) is None


def test_verdicts_state_their_mde_and_the_seeds_for_a_target() -> None:
    sweep = synthetic_sweep(seeds=3, noise=0.02, seed=1)
    opts = VerdictOptions(n_boot=100, detect_d_a=0.03, detect_d_b=0.01)
    result = classify(sweep["baseline"], [sweep["loo-fp32"], sweep["loo-dapo"]], verdict_options=opts)
    null, mover = result.verdicts
    assert mover.verdict == "asymptote-mover" and null.verdict in ("no-effect", "undecided")
    for v in (null, mover):
        # Each MDE is at least the margin and finite.
        assert result.margin <= v.mde_a < 0.1 and math.isfinite(v.mde_b)
        assert v.seeds_for_a is not None and v.seeds_for_a >= 1
        assert f"|dA| 0.03 needs {v.seeds_for_a} seed(s) per variant (now 3)" in v.power_note
    if null.verdict == "undecided":
        assert f"the smallest |dA| this sweep detects with 80% power is {null.mde_a:.3f}" in null.reason
    assert mover.row("m", "flops")["mde_a"] == mover.mde_a
    notes = noise_notes(result)
    assert "margin 0.0200 (configured)" in notes[0] and notes[1].startswith(
        "power targets at 3 seed(s): loo-fp32: |dA| 0.03"
    )
