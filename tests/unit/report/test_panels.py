"""The per-knob panels, from frames with known parameters: what is drawn is what was fitted."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import scalerl.harness.analysis.forecast.sweep_prior as hierarchical
from scalerl.harness.report._style import anchor_id
from scalerl.harness.report.panels import knob_panel_figure, knob_panels
from tests.unit.report.frames import C_MID, R0, VARIANTS, curves_frame, fits_frame, verdicts_frame


def _names(fig):  # type: ignore[no-untyped-def]
    return [t.name for t in fig.data]


def test_one_panel_per_knob_baseline_against_variant_with_a_shared_y_range() -> None:
    curves = curves_frame(n_points=40, seeds=2)
    panels = knob_panels(curves, fits_frame(), verdicts_frame(), metric="val/pass_rate", axis="flops")
    assert [(p.variant, p.knob, p.verdict) for p in panels] == [
        ("loo-dapo", "loss", "asymptote-mover"),
        ("loo-savg", "loss_aggregation", "efficiency-shaper"),
    ]
    assert [p.anchor for p in panels] == [anchor_id("loo-dapo"), anchor_id("loo-savg")]
    dapo = panels[0].reward
    # Per variant: one point trace per seed, the fit, the forecast and its band; nothing else.
    assert _names(dapo)[2:5] == ["fit baseline", "extrapolation baseline", "interval baseline"]
    assert _names(dapo)[7:] == ["fit loo-dapo", "extrapolation loo-dapo", "interval loo-dapo"]
    assert len(dapo.data) == 10 and not any("savg" in str(n) for n in _names(dapo))
    # The fitted curve is Eq. 1 with the row's A and B over the fit window.
    fit = next(t for t in dapo.data if t.name == "fit loo-dapo")
    a, b = VARIANTS["loo-dapo"][2], VARIANTS["loo-dapo"][3]
    x = np.asarray(fit.x)
    np.testing.assert_allclose(np.asarray(fit.y), R0 + (a - R0) / (1 + (C_MID / x) ** b), rtol=1e-12)
    # One y range for every panel, covering every point; log compute by default.
    ranges = {tuple(p.reward.layout.yaxis.range) for p in panels}
    assert len(ranges) == 1
    lo, hi = ranges.pop()
    assert lo < curves["value"].min() and hi > curves["value"].max() and hi - lo < 1.0
    assert dapo.layout.xaxis.type == "log"
    # The fit window starts at 5e13 for both fits: a dotted line each.
    assert [s.x0 for s in dapo.layout.shapes] == [5e13, 5e13]


def test_a_panel_writes_the_parameters_the_verdict_and_its_reason() -> None:
    verdicts = verdicts_frame()
    verdicts.loc[0, "reason"] = "the ceiling drops by 0.1, well past the margin " * 3
    fig = knob_panel_figure(curves_frame(n_points=30, seeds=1), fits_frame(), verdicts, "loo-dapo")
    params, verdict = (a.text for a in fig.layout.annotations)
    assert "A 0.600 [0.590, 0.610] · B 1.50 [1.40, 1.60]" in params  # baseline
    assert "A 0.500 [0.490, 0.510] · B 1.50 [1.40, 1.60]" in params  # loo-dapo
    assert "C_mid 1.0e+15 [9.0e+14, 1.1e+15]" in params
    assert "asymptote-mover" in verdict and "ΔA -0.100 [-0.110, -0.090]" in verdict
    assert "margin 0.020" in verdict
    # The reason is wrapped onto the panel, and the panel grows to hold it.
    assert verdict.replace("<br>", " ").count("the ceiling drops") == 3 and verdict.count("<br>") >= 2
    assert "<b>loss</b> → dapo" in fig.layout.title.text


def test_hover_gives_run_step_value_and_compute() -> None:
    curves = curves_frame(n_points=12, seeds=2)
    fig = knob_panel_figure(curves, None, None, "loo-savg", log_x=False)
    points = [t for t in fig.data if t.mode == "markers"]
    assert len(points) == 4 and fig.layout.xaxis.type == "linear"
    first = points[0]
    assert first.hovertemplate.startswith("baseline-s0<br>step %{customdata}<br>value %{y:.4f}")
    assert "compute (FLOPs) %{x:.4g}" in first.hovertemplate
    assert list(first.customdata) == list(range(12))
    # Without fits or verdicts the panel says so instead of inventing numbers.
    params, verdict = (a.text for a in fig.layout.annotations)
    assert "no pooled fit" in params and "no verdict" in verdict


def test_every_forecast_is_made_in_one_sweep_call_for_all_panels(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = hierarchical.forecast_with_siblings

    def counting(curves, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(len(curves))
        return real(curves, *args, **kwargs)

    monkeypatch.setattr(hierarchical, "forecast_with_siblings", counting)
    panels = knob_panels(curves_frame(n_points=30, seeds=1), fits_frame(), verdicts_frame())
    # One call forecasting the 3 variants (the baseline once, not once per panel), each with the
    # other two as its siblings.
    assert len(panels) == 2 and calls == [3]


def test_a_non_loo_sweep_gets_a_panel_per_value() -> None:
    curves = curves_frame(n_points=10, seeds=1)
    curves["knob"] = None
    curves["variant"] = curves["variant"].map(
        {"baseline": "baseline", "loo-dapo": "lr=1e-5", "loo-savg": "lr=3e-5"}
    )
    panels = knob_panels(curves, None, pd.DataFrame())
    assert [p.variant for p in panels] == ["lr=1e-5", "lr=3e-5"]
    assert panels[0].knob is None and panels[0].reward.layout.title.text == "<b>lr=1e-5</b>"
    assert "no mechanism diagnostic" in panels[0].mechanism.layout.annotations[0].text
