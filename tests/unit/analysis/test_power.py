"""Minimum detectable effects and the seeds that would decide a knob: the arithmetic, with values."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from scalerl.harness.analysis.verdicts.inference import Contrast
from scalerl.harness.analysis.verdicts.pipeline import classify
from scalerl.harness.analysis.verdicts.power import mde, seeds_needed, seeds_to_decide
from scalerl.harness.analysis.verdicts.rule import Evidence
from scalerl.harness.analysis.verdicts.service import noise_notes
from scalerl.harness.analysis.verdicts.types import VerdictOptions
from tests.unit.analysis.sweeps import synthetic_sweep

T20 = 2.085963  # t_{0.975} on 20 degrees of freedom
Z80 = 0.841621  # z_{0.8}
EFF = math.log1p(0.1)


def test_mde_is_the_margin_plus_the_t_and_power_quantiles_times_the_se() -> None:
    assert mde(Contrast(0.0, 0.01, 20.0), 0.02, 0.95) == pytest.approx(0.02 + (T20 + Z80) * 0.01, abs=1e-6)
    # The Bonferroni level of the two efficiency tests: t_{0.9875} on 20 df = 2.4231.
    assert mde(Contrast(0.0, 0.1, 20.0), EFF, 0.975) == pytest.approx(EFF + (2.423116 + Z80) * 0.1, abs=1e-5)
    assert mde(Contrast(0.0, 0.01, 20.0), 0.02, 0.95, power=0.9) == pytest.approx(
        0.02 + (T20 + 1.281552) * 0.01, abs=1e-6
    )
    assert math.isnan(mde(Contrast(0.0, math.nan, 20.0), 0.02, 0.95))
    assert math.isnan(mde(Contrast(0.0, 0.01, 0.0), 0.02, 0.95))  # no degrees of freedom


def test_seeds_needed_scale_the_standard_error_with_the_t_quantile_at_the_sweeps_df() -> None:
    c = Contrast(0.05, 0.02, 20.0)
    # Distance to the margin 0.03; at n seeds the SE is 0.02 x sqrt(3 / n), and the interval
    # clears with 80% power when 0.03 >= (2.086 + 0.842) x SE: n >= 3 x (2.928 x 0.02 / 0.03)^2 =
    # 11.43 -> 12 seeds.
    assert seeds_needed(c, 0.02, 3, 0.95) == 12
    se_12 = 0.02 * math.sqrt(3 / 12)
    assert 0.05 - (stats.t.ppf(0.975, 20) + stats.norm.ppf(0.8)) * se_12 >= 0.02
    assert seeds_needed(Contrast(0.02, 0.01, 20.0), 0.02, 3, 0.95) is None  # on the threshold
    assert seeds_needed(Contrast(0.5, 0.01, 20.0), 0.02, 3, 0.95) == 3  # the seeds it has suffice
    # Inside the margin, 0.01 from it: 3 x (2.928 x 0.02 / 0.01)^2 = 102.8 -> 103 seeds to show equivalence.
    assert seeds_needed(Contrast(-0.01, 0.02, 20.0), 0.02, 3, 0.95) == 103
    assert seeds_needed(Contrast(math.nan, 0.02, 20.0), 0.02, 3, 0.95) is None


def _ev(a: tuple[float, float], b: tuple[float, float] | None, c: tuple[float, float] | None) -> Evidence:
    def con(x: tuple[float, float] | None) -> Contrast | None:
        return None if x is None else Contrast(x[0], x[1], 20.0)

    a_con = con(a)
    assert a_con is not None
    return Evidence(a_con, con(b), con(c), 0.02, EFF, 0.95)


def test_seeds_to_decide_asks_every_interval_of_the_nearest_claim() -> None:
    # dA beyond the margin: the mover claim, dA alone (12 seeds, as above).
    assert seeds_to_decide(_ev((0.05, 0.02), (0.0, 0.5), (0.0, 0.5)), 3) == 12
    # dA inside and log B beyond +-0.0953: a shaper needs dA inside and log B beyond; log C_mid
    # (inside) does not matter for it.
    ev = _ev((0.0, 0.005), (0.3, 0.05), (0.0, 0.5))
    a = seeds_needed(ev.a, 0.02, 3, 0.95)
    b = seeds_needed(Contrast(0.3, 0.05, 20.0), EFF, 3, 0.975)
    assert a is not None and b is not None and seeds_to_decide(ev, 3) == max(a, b)
    # Everything inside: no effect needs all three inside.
    ev = _ev((0.0, 0.005), (0.0, 0.05), (0.05, 0.05))
    need = [seeds_needed(c, t, 3, lv) for _, c, t, lv in ev.parts()]
    assert seeds_to_decide(ev, 3) == max(n for n in need if n is not None)
    # An estimate on its threshold: no seed count decides it.
    assert seeds_to_decide(_ev((0.0, 0.005), (EFF, 0.05), (0.0, 0.05)), 3) is None


def test_verdicts_state_their_mde_and_the_seeds_for_a_target() -> None:
    sweep = synthetic_sweep(seeds=3, noise=0.02, seed=1)
    opts = VerdictOptions(n_boot=100, detect_d_a=0.03, detect_d_b=0.01)
    result = classify(sweep["baseline"], [sweep["loo-fp32"], sweep["loo-dapo"]], verdict_options=opts)
    null, mover = result.verdicts
    assert mover.verdict == "asymptote-mover" and null.verdict in ("no-effect", "undecided")
    for v in (null, mover):
        # Each MDE is at least the margin and finite, and is the one formula on its evidence.
        assert v.evidence is not None
        assert result.margin <= v.mde_a < 0.1 and math.isfinite(v.mde_b)
        assert v.mde_a == mde(v.evidence.a, 0.02, 0.95)
        assert v.seeds_for_a is not None and v.seeds_for_a >= 1
        assert f"|dA| 0.03 needs {v.seeds_for_a} seed(s) per variant (now 3)" in v.power_note
    if null.verdict == "undecided":
        assert f"the smallest |dA| this sweep detects with 80% power is {null.mde_a:.3f}" in null.reason
        assert null.seeds_needed == seeds_to_decide(null.evidence, 3)  # type: ignore[arg-type]
    assert mover.row("m", "flops")["mde_a"] == mover.mde_a
    notes = noise_notes(result)
    assert "margin 0.0200 (configured)" in notes[0] and notes[1].startswith(
        "power targets at 3 seed(s): loo-fp32: |dA| 0.03"
    )


def test_one_phrase_says_what_seeds_would_do() -> None:
    from scalerl.harness.analysis.verdicts.explain import seeds_phrase

    assert seeds_phrase(17, 3, 0.8) == "~17 seeds per variant would decide it at this noise (now 3)"
    assert seeds_phrase(None, 3, 0.8) == "an estimate sits on its threshold: no seed count decides it"
    # Past 100x the seeds a sweep has: not a plan.
    assert seeds_phrase(301, 3, 0.8) == "seeds will not decide it (~3e+02 needed, now 3)"
    assert seeds_phrase(300, 3, 0.8).startswith("~300 seeds")
    # The seeds it has would do, at 80% power; this draw was the other 20%.
    assert seeds_phrase(3, 3, 0.8) == (
        "its 3 seeds per variant decide it 80% of the time at this noise (this draw did not)"
    )
