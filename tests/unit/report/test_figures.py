"""The figures, from frames with known parameters: the drawn numbers are the fitted ones."""

from __future__ import annotations

import numpy as np
import pytest

from scalerl.harness.analysis import forecast_curve, forecast_with_siblings
from scalerl.harness.errors import ConfigError
from scalerl.harness.report.figures import (
    curves_figure,
    knob_map_figure,
    knob_panel_figure,
    overview_figure,
    verdict_table_figure,
)
from tests.unit.report.frames import C_MID, R0, VARIANTS, curves_frame, fits_frame, runs_frame, verdicts_frame


def _by_name(fig, name):  # type: ignore[no-untyped-def]
    return next(t for t in fig.data if t.name == name)


def test_curves_figure_draws_points_fits_extrapolation_band_and_window() -> None:
    curves = curves_frame(n_points=60, seeds=2)
    fig = curves_figure(curves, fits_frame(), metric="val/pass_rate", axis="flops", extrapolate_factor=4.0)
    # 3 variants x 2 seeds of points, and per variant: fit, extrapolation, band.
    assert len(fig.data) == 6 + 3 * 3
    a, b = VARIANTS["baseline"][2], VARIANTS["baseline"][3]
    fit = _by_name(fig, "fit baseline")
    x, y = np.asarray(fit.x), np.asarray(fit.y)
    assert x[0] == pytest.approx(5e13) and x[-1] == pytest.approx(2e16)
    np.testing.assert_allclose(y, R0 + (a - R0) / (1 + (C_MID / x) ** b), rtol=1e-12)
    ext = _by_name(fig, "extrapolation baseline")
    assert np.asarray(ext.x)[-1] == pytest.approx(8e16) and ext.line.dash == "dash"
    # Beyond the data the dashed line and its band are the forecast `scalerl forecast` prints: the
    # variant's pooled points, borrowing from the two other variants (the sweep prior), at 4x the
    # data within 0.02 of A.
    val = curves[curves["metric"] == "val/pass_rate"]
    clouds = {v: (g["flops"].to_numpy(), g["value"].to_numpy()) for v, g in val.groupby("variant")}
    made = forecast_with_siblings(
        [clouds["baseline"]],
        [np.asarray(ext.x)],
        [[c for v, c in clouds.items() if v != "baseline"]],
        level=0.9,
    )[0]
    assert made.method == "sweep" and made.siblings == 2
    fc = made.forecast
    np.testing.assert_allclose(np.asarray(ext.y), fc.value, rtol=1e-12)
    # Not the single-curve forecast: the siblings moved it (a test that cannot tell them apart
    # would pass on the old page).
    single = forecast_curve(*clouds["baseline"], np.asarray(ext.x), level=0.9)
    assert np.max(np.abs(single.hi - fc.hi)) > 1e-6
    assert np.asarray(ext.y)[-1] == pytest.approx(a, abs=0.02)
    band = _by_name(fig, "interval baseline")
    bx, by = np.asarray(band.x), np.asarray(band.y)
    half = len(bx) // 2
    hi, lo = by[:half], by[half:][::-1]
    mid = R0 + (a - R0) / (1 + (C_MID / bx[:half]) ** b)
    # Over the data, the parameter box holds the fitted curve; beyond it, the forecast interval
    # holds the truth (the fitted curve) and ends at forecast_curve's 90% interval.
    assert np.all(lo <= mid + 1e-12) and np.all(mid <= hi + 1e-12)
    assert hi[-1] == pytest.approx(fc.hi[-1], rel=1e-12) and lo[-1] == pytest.approx(fc.lo[-1], rel=1e-12)
    # Seeds of a variant share its legend group and colour; the fit shares it too.
    seeds = [t for t in fig.data if t.legendgroup == "baseline"]
    assert len(seeds) == 5 and len({t.line.color or t.fillcolor for t in seeds}) == 1
    # Fit window start is a vertical line at 5e13.
    assert [s.x0 for s in fig.layout.shapes] == [5e13]
    buttons = fig.layout.updatemenus[0].buttons
    assert [btn.args[0]["xaxis.type"] for btn in buttons] == ["linear", "log"]


def test_pre_inflection_fit_draws_no_ceiling_but_says_why() -> None:
    fits = fits_frame(status="pre-inflection")
    fits["a"] = np.nan
    fits["reason"] = "C_mid beyond the data"
    fig = curves_figure(curves_frame(n_points=20, seeds=1), fits)
    names = [t.name for t in fig.data]
    assert not any(n.startswith(("extrapolation", "interval")) for n in names)
    assert "fit baseline: pre-inflection (C_mid beyond the data)" in names


def test_large_runs_are_downsampled_for_display_only() -> None:
    curves = curves_frame(n_points=10_000, seeds=1)
    fig = curves_figure(curves, None, max_points_per_run=400)
    sizes = [len(t.x) for t in fig.data]
    assert len(sizes) == 3 and all(150 <= s <= 400 for s in sizes)
    first = fig.data[0]
    assert first.x[0] == pytest.approx(1e13) and first.x[-1] == pytest.approx(2e16)


def test_bad_axis_and_metric_name_the_choices() -> None:
    curves = curves_frame(n_points=10, seeds=1)
    with pytest.raises(ConfigError, match=r"axis='wall'.*gpu_hours, flops"):
        curves_figure(curves, axis="wall")
    with pytest.raises(ConfigError, match=r"metric='train/nope'.*val/pass_rate"):
        curves_figure(curves, metric="train/nope")


def test_verdict_table_and_overview_carry_the_numbers() -> None:
    table = verdict_table_figure(verdicts_frame()).data[0]
    headers = [h.replace("<b>", "").replace("</b>", "") for h in table.header.values]
    cols = dict(zip(headers, table.cells.values, strict=True))
    assert list(cols["variant"]) == ["loo-dapo", "loo-savg"]
    assert list(cols["ΔA"]) == ["-0.100", "0.000"]
    assert cols["ΔA interval"][0] == "[-0.110, -0.090]"
    # The smallest effects the sweep could have detected sit beside the verdict.
    assert list(cols["MDE ΔA"]) == ["0.031", "0.031"]
    assert list(cols["MDE ΔB"]) == ["0.420", "0.420"]
    curves = curves_frame(n_points=10, seeds=2)
    fig = overview_figure(runs_frame(curves), curves)
    # One horizontal bar per variant, stacked by run status; the statuses are one line of title.
    assert "6 runs: 3 completed, 3 running" in fig.layout.title.text
    bars = {t.name: dict(zip(t.y, t.x, strict=True)) for t in fig.data}
    assert set(bars) == {"completed", "running"}
    assert list(fig.data[0].y) == ["baseline", "loo-dapo", "loo-savg"]
    # runs_frame alternates statuses: baseline-s0 completed, baseline-s1 running, 2e16 each.
    assert bars["completed"]["baseline"] == pytest.approx(2e16)
    assert bars["running"]["baseline"] == pytest.approx(2e16)
    assert sum(sum(t.x) for t in fig.data) == pytest.approx(6 * 2e16)


def test_overview_without_points_says_so() -> None:
    curves = curves_frame(n_points=10, seeds=1)
    fig = overview_figure(runs_frame(curves), curves.iloc[0:0])
    assert len(fig.data) == 0 and "nothing spent" in fig.layout.annotations[0].text


def test_user_text_is_escaped_in_figures() -> None:
    evil = "<script>window.__scalerl_injected=1</script>"
    curves = curves_frame(n_points=10, seeds=1)
    curves["variant"] = curves["variant"].where(curves["variant"] != "loo-dapo", evil)
    fig = curves_figure(curves, None)
    names = [t.name for t in fig.data]
    assert "&lt;script&gt;window.__scalerl_injected=1&lt;/script&gt; · seed 0" in names
    assert not any("<script>" in n for n in names)
    verdicts = verdicts_frame()
    verdicts.loc[0, "variant"] = evil
    assert "&lt;script&gt;" in knob_map_figure(verdicts).data[0].text[0]
    panel = knob_panel_figure(curves, fits_frame(), verdicts, evil, axis="flops")
    assert "&lt;script&gt;" in panel.layout.title.text and "<script>" not in panel.to_json()
