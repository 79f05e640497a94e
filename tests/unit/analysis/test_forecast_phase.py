"""Issue 37, target 3: a forecast made before the curve's inflection says its interval is the wide
kind (the phase bench.forecast_targets scores coverage by), in the JSON rows, the API frame and
`scalerl forecast`'s text."""

from __future__ import annotations

import numpy as np
import pytest

from scalerl.harness.analysis.fit.curve import sigmoid_curve
from scalerl.harness.analysis.forecast.service import forecast_rows, inflection_phase
from scalerl.harness.analysis.groups import VariantCurves
from scalerl.harness.cli.forecast import print_rows

C_MID = 1e4


def _curve(upto: float, seed: int, sd: float = 0.001) -> tuple[np.ndarray, np.ndarray]:
    # Low noise: with seed sd 0.004 a curve stopped at C_mid/2 is called past its inflection by
    # the fitter in ~1 of 8 draws (the phase is the fitter's own call, noisy near the bend).
    x = np.geomspace(50.0, upto, 40)
    rng = np.random.default_rng(seed)
    return x, sigmoid_curve(x, 0.1, 0.7, 1.5, C_MID) + rng.normal(0.0, sd, x.size)


def test_the_phase_follows_the_inflection() -> None:
    assert inflection_phase(*_curve(C_MID * 30, 0)) == "past"
    assert inflection_phase(*_curve(C_MID / 2, 1)) == "before"
    flat = np.random.default_rng(2).normal(0.3, 0.004, 40)
    assert inflection_phase(np.geomspace(50.0, 1e5, 40), flat) == "no rise"
    assert inflection_phase([1.0, 2.0], [0.1, 0.2]) == "no rise"  # too few points to fit


def test_rows_and_text_say_when_an_interval_is_made_before_the_inflection(
    capsys: pytest.CaptureFixture[str],
) -> None:
    groups = {
        "baseline": VariantCurves("baseline", tuple(_curve(C_MID * 30, s) for s in range(3))),
        "loo-early": VariantCurves("loo-early", tuple(_curve(C_MID / 2, 10 + s) for s in range(3)), knob="k"),
    }
    rows = {r["variant"]: r for r in forecast_rows(groups, siblings=False, bounds=(0.0, 1.0))}
    assert rows["baseline"]["phase"] == "past" and rows["loo-early"]["phase"] == "before"
    early, late = rows["loo-early"]["forecasts"][0], rows["baseline"]["forecasts"][0]
    assert early["hi"] - early["lo"] > late["hi"] - late["lo"]  # the wide kind, as the line says
    print_rows(list(rows.values()), "flops")
    out = capsys.readouterr().out.splitlines()
    flagged = [i for i, line in enumerate(out) if "before the curve's inflection" in line]
    assert len(flagged) == 1 and out[flagged[0] - 1].lstrip().startswith("loo-early")
