"""Forecasts of a bounded metric stay inside its bounds: the clip, the naming rule, the analysis
calls, ``scalerl forecast`` on a real SQLite store, and the report's bands."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from scalerl.harness.analysis import forecast_curve, forecast_curves, forecast_sweep
from scalerl.harness.analysis.fit.curve import sigmoid_curve
from scalerl.harness.analysis.forecast.bounds import (
    UNIT,
    check_bounds,
    clip_to_bounds,
    is_rate_name,
    resolve_bounds,
)
from scalerl.harness.analysis.forecast.calibrations import DEFAULT_CALIBRATION
from scalerl.harness.analysis.forecast.ensemble import point_forecast_many, with_interval
from scalerl.harness.errors import ConfigError

C = np.geomspace(100, 1e4, 40)
FAR = np.geomspace(1.2e4, 3e5, 12)  # up to 30x: the interval widens past 1 near a 0.98 ceiling


def _near_one(seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return sigmoid_curve(C, 0.2, 0.98, 1.5, 2000.0) + rng.normal(0, 0.01, C.size)


def test_clip_to_bounds() -> None:
    v = np.array([-0.2, 0.0, 0.5, 1.0, 1.3, np.nan])
    np.testing.assert_array_equal(clip_to_bounds(v, (0.0, 1.0)), [0.0, 0.0, 0.5, 1.0, 1.0, np.nan])
    np.testing.assert_array_equal(clip_to_bounds(v, (-1.0, 0.4)), [-0.2, 0.0, 0.4, 0.4, 0.4, np.nan])
    np.testing.assert_array_equal(clip_to_bounds(v, None), v)  # None: unchanged
    assert clip_to_bounds([2], UNIT).dtype == np.float64


@pytest.mark.parametrize(
    ("bounds", "match"),
    [
        ((1.0, 0.0), "lower bound must be below the upper"),
        ((0.5, 0.5), "lower bound must be below the upper"),
        ((0.0, float("inf")), "both bounds must be finite"),
        ((float("nan"), 1.0), "both bounds must be finite"),
        ((0.0,), "must be a pair"),
        ("01", "must be a pair"),
        (1.0, "must be a pair"),
    ],
)
def test_bad_bounds_name_the_field_value_and_fix(bounds: object, match: str) -> None:
    with pytest.raises(ConfigError, match=match) as err:
        check_bounds(bounds, field="bounds")
    assert str(err.value).startswith("bounds=") and "(fix: pass two finite numbers LO < HI" in str(err.value)
    with pytest.raises(ConfigError, match=match):
        forecast_curve(C, _near_one(), FAR, bounds=bounds)  # type: ignore[arg-type]


def test_good_bounds() -> None:
    assert check_bounds(None) is None
    assert check_bounds([0, 1]) == (0.0, 1.0) and check_bounds(np.array([-1.0, 2.5])) == (-1.0, 2.5)


@pytest.mark.parametrize(
    ("metric", "rate"),
    [
        ("val/pass_rate", True),
        ("eval/accuracy", True),
        ("eval/val_acc", True),
        ("val-core/MATH500-Qwen-instruct/acc/mean@1", True),  # verl (SPEED-RL's files)
        ("test/pass@1", True),
        ("Success_Rate", True),
        ("train/reward", False),  # the reference trainer's length adjustment can make it negative
        ("critic/score/mean", False),
        ("train/response_len", False),
        ("val/acc_gap", False),  # a rate word, but not at the end of its part
        ("val/accumulated", False),
    ],
)
def test_rate_names(metric: str, rate: bool) -> None:
    assert is_rate_name(metric) is rate


def test_resolve_bounds_rule() -> None:
    auto = resolve_bounds("val/pass_rate", [0.1, 0.97])
    assert (auto.bounds, auto.source) == (UNIT, "metric name")
    # An accuracy logged in percent is not a [0, 1] rate: left unbounded, and the note says why.
    percent = resolve_bounds("eval/accuracy", [12.0, 57.0])
    assert percent.bounds is None and "values span [12, 57]" in percent.note and "0 100" in percent.note
    assert resolve_bounds("train/reward", [0.1, 0.9]).bounds is None  # unknown name: unbounded
    off = resolve_bounds("val/pass_rate", [0.5], None)
    assert (off.bounds, off.source) == (None, "off")
    given = resolve_bounds("train/reward", [0.1, 0.9, 1.2], (0, 1))
    assert given.bounds == (0.0, 1.0) and given.source == "given"
    assert "1 observed value(s) lie outside them" in given.note
    with pytest.raises(ConfigError, match="unknown bounds"):
        resolve_bounds("val/pass_rate", None, "sometimes")  # type: ignore[arg-type]


def test_forecast_curve_near_one_is_clipped_and_unchanged_elsewhere() -> None:
    y = _near_one()
    raw = forecast_curve(C, y, FAR)
    clipped = forecast_curve(C, y, FAR, bounds=UNIT)
    assert raw.ok and clipped.ok
    assert raw.hi.max() > 1.0  # the bug: a pass rate's interval past 1 (measured: 1.06 at 30x)
    assert clipped.hi.max() <= 1.0 and clipped.value.max() <= 1.0 and clipped.lo.min() >= 0.0
    inside = raw.hi <= 1.0
    assert inside.any() and (~inside).any()
    # Where nothing needed clipping the numbers are the unbounded ones, bit for bit; elsewhere
    # the edge sits on the bound.
    np.testing.assert_array_equal(clipped.hi[inside], raw.hi[inside])
    np.testing.assert_array_equal(clipped.hi[~inside], 1.0)
    np.testing.assert_array_equal(clipped.lo, raw.lo)
    np.testing.assert_array_equal(clipped.value, np.minimum(raw.value, 1.0))
    # A curve far from its bounds: identical to the unbounded forecast.
    low = forecast_curve(C, 0.5 * y, FAR)
    np.testing.assert_array_equal(forecast_curve(C, 0.5 * y, FAR, bounds=UNIT).hi, low.hi)


def test_bounds_none_is_todays_forecast() -> None:
    curves = [(C, _near_one(s)) for s in range(3)]
    pfs = point_forecast_many(curves, [FAR] * 3)
    for pf, fc in zip(pfs, forecast_curves(curves, [FAR] * 3, bounds=None), strict=True):
        q = DEFAULT_CALIBRATION.quantile(0.9)
        half = q * pf.unit(DEFAULT_CALIBRATION)
        np.testing.assert_array_equal(fc.hi, pf.value + half)
        np.testing.assert_array_equal(fc.lo, pf.value - half)
        np.testing.assert_array_equal(with_interval(pf, 0.9, DEFAULT_CALIBRATION).hi, fc.hi)


def test_forecast_sweep_with_bounds() -> None:
    curves = [(C, _near_one(s)) for s in range(4)]
    raw = forecast_sweep(curves, [FAR] * 4)
    clipped = forecast_sweep(curves, [FAR] * 4, bounds=UNIT)
    assert max(float(r.forecast.hi.max()) for r in raw) > 1.0
    for r, c in zip(raw, clipped, strict=True):
        assert c.method == r.method == "sweep"
        np.testing.assert_array_equal(c.forecast.hi, np.minimum(r.forecast.hi, 1.0))
        np.testing.assert_array_equal(c.forecast.value, np.minimum(r.forecast.value, 1.0))
    with pytest.raises(ConfigError, match="bounds"):
        forecast_sweep(curves, [FAR] * 4, bounds=(1.0, 0.0))


def _near_one_store(tmp_path: Path) -> str:
    from tests.fixtures.report_sweep import Variant, write_sweep

    url = f"sqlite:///{tmp_path / 'near1.db'}"
    truth = {
        "baseline": Variant(None, None, 0.985, 1.4),
        "loo-lp": Variant("precision", "bf16", 0.97, 1.0),
        "loo-dapo": Variant("loss", "dapo", 0.90, 1.4),
    }
    write_sweep(url, truth=truth, running=())
    return url


def test_cli_clips_a_pass_rate_and_no_bounds_turns_it_off(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from scalerl.harness.cli import main
    from tests.fixtures.report_sweep import C_MAX, SWEEP

    url = _near_one_store(tmp_path)
    argv = ["forecast", SWEEP, "--db", url, "--at", str(2 * C_MAX), str(20 * C_MAX), "--json"]

    def run(*extra: str) -> tuple[dict, dict]:  # type: ignore[type-arg]
        assert main([*argv, *extra]) == 0
        out = json.loads(capsys.readouterr().out)
        return out, {r["variant"]: r["forecasts"] for r in out["variants"]}

    out, clipped = run()
    assert out["bounds"] == [0.0, 1.0] and out["bounds_source"] == "metric name"
    raw_out, raw = run("--no-bounds")
    assert raw_out["bounds"] is None and raw_out["bounds_source"] == "off"
    # Measured unclipped: baseline 1.040 and loo-lp 1.044 at 20x; loo-dapo's 0.97 stays inside.
    assert raw["baseline"][1]["hi"] > 1.0 and raw["loo-lp"][1]["hi"] > 1.0
    for variant, rows in clipped.items():
        for got, want in zip(rows, raw[variant], strict=True):
            assert got["hi"] == min(want["hi"], 1.0) and got["lo"] == want["lo"]
            assert got["value"] == min(want["value"], 1.0)
    assert clipped["loo-dapo"] == raw["loo-dapo"]
    # --bounds sets them (and says so); the text form says what was clipped.
    given, tight = run("--bounds", "0", "0.95")
    assert given["bounds"] == [0.0, 0.95] and given["bounds_source"] == "given"
    assert tight["loo-dapo"][1]["hi"] == 0.95
    assert main(argv[:-1]) == 0
    assert "90% prediction intervals, clipped to [0, 1] (the metric is a rate)" in capsys.readouterr().out
    assert main([*argv[:-1], "--no-bounds"]) == 0
    assert "[0.9294, 1.0397]" in capsys.readouterr().out  # the unclipped 20x interval of baseline


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (["1", "0"], "argument --bounds: LO must be below HI, got '1 0'"),
        (["a", "1"], "argument --bounds: LO and HI must be numbers, got 'a 1'"),
        (["0", "inf"], "argument --bounds: LO and HI must be finite, got '0 inf'"),
    ],
)
def test_cli_bad_bounds_are_usage_errors_with_a_fix(
    values: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from scalerl.harness.cli import main

    with pytest.raises(SystemExit) as bad:  # before any store is opened
        main(["forecast", "s", "--db", "sqlite:////nonexistent/x.db", "--bounds", *values])
    assert bad.value.code == 2
    err = capsys.readouterr().err
    assert message in err
    assert "(fix: e.g. --bounds 0 1 for a pass rate, or --no-bounds to turn clipping off)" in err
    with pytest.raises(SystemExit):
        main(["forecast", "s", "--bounds", "0", "1", "--no-bounds"])
    assert "not allowed with argument --bounds" in capsys.readouterr().err


def test_report_bands_use_the_same_rule() -> None:
    from scalerl.harness.report.figures import curves_figure
    from tests.unit.report.frames import VARIANTS, curves_frame, fits_frame

    near = {v: (k, alt, a + 0.37, b) for v, (k, alt, a, b) in VARIANTS.items()}  # ceilings 0.87-0.97
    curves = curves_frame(variants=near)
    fits = fits_frame()
    for col in ("a", "a_lo", "a_hi"):
        fits[col] = fits[col] + 0.37

    def band_hi(metric: str) -> float:
        c, f = curves.assign(metric=metric), fits.assign(metric=metric)
        fig = curves_figure(c, f, metric=metric, axis="flops", extrapolate_factor=30.0)
        band = next(t for t in fig.data if t.name == "interval baseline")
        y = np.asarray(band.y)
        return float(y[: y.size // 2].max())  # the upper edge, drawn first

    assert band_hi("val/pass_rate") == 1.0  # clipped: a pass rate's band stops at 1
    assert band_hi("val/score") > 1.0  # the same numbers under a name with no known bounds
