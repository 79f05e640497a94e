"""The curves figure: a sweep's points, fitted sigmoids, extrapolations with interval bands.

Built from the store's frames (``scalerl.db.queries.curves`` and ``scalerl.db.queries.fits``) so it
can be drawn from a store, a notebook, or frames a test constructs. One colour per variant; a
variant's seeds share its legend group, so one click hides the variant. A button toggles the
compute axis between linear and log.

The band around a fitted curve, over the compute the data covers, is the envelope of Eq. 1 over the
corners of the fit's parameter intervals (A, B, C_mid). R(C) is monotone in A and in C_mid, and in
B on either side of C_mid, so the corners bound every curve inside that box: a conservative band
that needs only the stored columns. Beyond the data, the dashed extrapolation and its band are the
forecast ``scalerl forecast`` prints, with its :data:`FORECAST_LEVEL` prediction interval
(:func:`sweep_extrapolations`, the numbers of :mod:`scalerl.harness.analysis.forecast.service`): a
variant's pooled fit borrows strength from the sweep's other variants (the single-curve
:func:`scalerl.harness.analysis.forecast_curve` when fewer than two siblings pin a ceiling), a
per-run fit gets the single-curve forecast of its own points. Where there is no sound forecast, the
fitted sigmoid and its parameter box are drawn instead. Bands and forecasts of a bounded metric are
clipped to its range by the rule ``scalerl forecast`` applies by default (:func:`figure_bounds`): a
pass rate's band never reaches past 1.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from scalerl.harness.analysis.fit.curve import sigmoid_curve as sigmoid
from scalerl.harness.axes import FIT_AXES
from scalerl.harness.errors import ConfigError
from scalerl.harness.report._style import AXIS_LABELS, esc, fmt, fmt_interval, variant_colors
from scalerl.harness.report.downsample import display_indices

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from scalerl.harness.analysis.forecast.bounds import Bounds
    from scalerl.harness.analysis.forecast.ensemble import CurveForecast

# Only an ``ok`` fit pins its ceiling (scalerl.harness.analysis.fit.curve.FitStatus); any other status is
# listed in the legend with its reason and gets no curve, extrapolation or band.
CONFIDENT_STATUSES: frozenset[str] = frozenset({"ok"})
LEGEND_SEEDS_UP_TO = 24
# The extrapolation band's level: forecast_curve's default (90% of future observations).
FORECAST_LEVEL = 0.9


def _fit_points(pts: pd.DataFrame, fit: pd.Series, axis: str) -> tuple[np.ndarray, np.ndarray] | None:
    """The points a fit row describes: its run's, or every run of its variant for a pooled fit."""
    if pts.empty:
        return None
    run_id = fit.get("run_id")
    if run_id is None or pd.isna(run_id):
        mine = pts[pts["variant"] == fit["variant"]]
    else:
        mine = pts[pts["run_id"] == run_id]
    if mine.empty:
        return None
    return mine[axis].to_numpy(dtype=float), mine["value"].to_numpy(dtype=float)


def extrapolation_grid(x_max: float, extrapolate_factor: float) -> np.ndarray:
    """The computes the dashed extrapolation is drawn at: ``x_max`` to ``factor x x_max``."""
    return np.geomspace(x_max, x_max * max(extrapolate_factor, 1.0), 80)


def figure_bounds(pts: pd.DataFrame, metric: str) -> Bounds | None:
    """The range the page clips ``metric``'s forecasts and bands to: the default rule of
    ``scalerl forecast`` (:func:`scalerl.harness.analysis.forecast.bounds.resolve_bounds`) on its name and
    the points shown, so the page and the command print one number."""
    from scalerl.harness.analysis.forecast.bounds import resolve_bounds

    values = pts["value"].to_numpy(dtype=float) if not pts.empty else None
    return resolve_bounds(metric, values).bounds


def sweep_extrapolations(
    pts: pd.DataFrame,
    fit_rows: pd.DataFrame,
    axis: str,
    grid: np.ndarray,
    bounds: Bounds | None = None,
) -> dict[str, CurveForecast]:
    """Each pooled fit's forecast on ``grid``, borrowing from the sweep's other variants, clipped
    to ``bounds`` (:func:`figure_bounds`; None: unclipped).

    The same forecast as ``scalerl forecast`` (and ``fit``'s forecast lines), from the same
    function (:func:`scalerl.harness.analysis.forecast.service.forecast_variants`): a variant's
    seeds are pooled into one point cloud that borrows from every other variant with points, so
    the page and the command print one number. Keyed by variant; per-run fits are not here (they
    forecast their own points)."""
    from scalerl.harness.analysis.forecast.service import forecast_variants
    from scalerl.harness.analysis.groups import group_curves

    if pts.empty or fit_rows.empty:
        return {}
    pooled = set(map(str, fit_rows.loc[fit_rows["run_id"].isna(), "variant"]))
    groups = group_curves(pts[pts[axis].notna()], axis)
    if not pooled & groups.keys():
        return {}
    made = forecast_variants(groups, grid, level=FORECAST_LEVEL, bounds=bounds)
    return {v: m.forecast for v, m in made.items() if v in pooled}


def _band(c: np.ndarray, fit: pd.Series) -> tuple[np.ndarray, np.ndarray] | None:
    cols = ("a_lo", "a_hi", "b_lo", "b_hi", "c_mid_lo", "c_mid_hi")
    vals = [_num(fit.get(k)) for k in cols]
    if any(v is None for v in vals):
        return None
    a_lo, a_hi, b_lo, b_hi, m_lo, m_hi = (float(v) for v in vals)  # type: ignore[arg-type]
    r0 = _num(fit.get("r0")) or 0.0
    curves = [
        sigmoid(c, r0, a, b, m)
        for a, b, m in itertools.product((a_lo, a_hi), (max(b_lo, 1e-9), b_hi), (max(m_lo, 1e-300), m_hi))
    ]
    stack = np.vstack(curves)
    return stack.min(axis=0), stack.max(axis=0)


def _num(value: object) -> float | None:
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return None if math.isnan(x) else x


def _check_axis(curves: pd.DataFrame, metric: str, axis: str) -> pd.DataFrame:
    if axis not in FIT_AXES:
        raise ConfigError(
            "unknown compute axis", field="axis", value=axis, fix=f"use one of {', '.join(FIT_AXES)}"
        )
    if curves.empty:
        return curves
    chosen = curves[curves["metric"] == metric]
    if chosen.empty:
        have = ", ".join(sorted(map(str, curves["metric"].unique())))
        raise ConfigError(
            "no points for this metric in the sweep", field="metric", value=metric,
            fix=f"pick one of: {have}",
        )  # fmt: skip
    return chosen


def _select_fits(fits: pd.DataFrame | None, metric: str, axis: str) -> pd.DataFrame:
    if fits is None or fits.empty:
        return pd.DataFrame()
    f = fits[(fits["metric"] == metric) & (fits["axis"] == axis)]
    # Prefer the pooled variant fit (run_id null); fall back to per-run fits for a variant
    # that has none.
    pooled = f[f["run_id"].isna()]
    per_run = f[f["run_id"].notna() & ~f["variant"].isin(pooled["variant"])]
    return pd.concat([pooled, per_run], ignore_index=True)


def curves_figure(
    curves: pd.DataFrame,
    fits: pd.DataFrame | None = None,
    *,
    metric: str = "val/pass_rate",
    axis: str = "flops",
    extrapolate_factor: float = 4.0,
    max_points_per_run: int = 400,
    log_x: bool = False,
    title: str | None = None,
    baseline: str = "baseline",
) -> go.Figure:
    """Points of every run, each variant's fitted sigmoid and its extrapolation with a band.

    ``curves``/``fits`` have the columns of ``scalerl.db.queries.curves``/``fits``. The fitted curve is
    solid over the compute the data covers and dashed beyond it, up to ``extrapolate_factor``
    times the largest compute seen; a fit whose status is not confident (e.g. pre-inflection)
    is drawn over its data only and labelled. Each fit's window start is a dotted vertical line.
    Runs with more than ``max_points_per_run`` points are downsampled for display only.
    """
    import plotly.graph_objects as go

    pts = _check_axis(curves, metric, axis)
    fit_rows = _select_fits(fits, metric, axis)
    variants = list(pts["variant"].unique()) if not pts.empty else []
    variants += [v for v in fit_rows.get("variant", pd.Series(dtype=str)).unique() if v not in variants]
    colors = variant_colors(map(str, variants), baseline)
    fig = go.Figure()

    x_max = float(pts[axis].max()) if not pts.empty else 1.0
    positive = pts.loc[pts[axis] > 0, axis] if not pts.empty else pd.Series(dtype=float)
    x_min_pos = float(positive.min()) if not positive.empty else x_max / 100.0
    # Past this many runs a legend entry per seed is noise: one entry per variant toggles them all.
    per_seed_legend = pts["run_id"].nunique() <= LEGEND_SEEDS_UP_TO if not pts.empty else True
    seen: set[str] = set()
    for (variant, run_id), run in pts.groupby(["variant", "run_id"], sort=True, observed=True):
        first_of_variant = str(variant) not in seen
        seen.add(str(variant))
        run = run.sort_values(axis)
        x = run[axis].to_numpy(dtype=float)
        y = run["value"].to_numpy(dtype=float)
        keep = display_indices(x, y, max_points_per_run)
        seed = run["seed"].iloc[0]
        name = f"{esc(variant)} · seed {esc(seed)}" if per_seed_legend else f"{esc(variant)} runs"
        fig.add_trace(
            go.Scatter(
                x=x[keep], y=y[keep], mode="lines+markers" if len(keep) <= 200 else "lines",
                name=name, legendgroup=esc(variant), legendgrouptitle_text=esc(variant),
                line={"color": colors[str(variant)], "width": 1}, marker={"size": 4},
                opacity=0.75, showlegend=per_seed_legend or first_of_variant,
                hovertemplate=f"{esc(run_id)}<br>{esc(variant)} seed {esc(seed)}"
                "<br>C=%{x:.4g}<br>value=%{y:.4f}<extra></extra>",
            )
        )  # fmt: skip

    windows: set[float] = set()
    bounds = figure_bounds(pts, metric)
    grid = extrapolation_grid(x_max, extrapolate_factor)
    forecasts = sweep_extrapolations(pts, fit_rows, axis, grid, bounds)
    for _, fit in fit_rows.iterrows():
        _add_fit(
            fig, fit, colors, x_min_pos, x_max, extrapolate_factor, _fit_points(pts, fit, axis), forecasts,
            bounds,
        )  # fmt: skip
        w = _num(fit.get("window_start"))
        if w is not None and w > 0:
            windows.add(w)
    for w in sorted(windows):
        fig.add_vline(
            x=w, line={"dash": "dot", "color": "#444", "width": 1},
            annotation_text="fit window start", annotation_position="top left",
        )  # fmt: skip

    fig.update_layout(
        title={"text": esc(title) if title else f"{esc(metric)} against {AXIS_LABELS[axis]}"},
        xaxis={"title": {"text": AXIS_LABELS[axis]}, "type": "log" if log_x else "linear"},
        yaxis={"title": {"text": esc(metric)}},
        legend={"groupclick": "togglegroup"},
        hovermode="closest",
        template="plotly_white",
        height=620,
        margin={"t": 80},
        updatemenus=[_axis_toggle(log_x)],
    )
    return fig


def _axis_toggle(log_x: bool) -> dict[str, Any]:
    return {
        "type": "buttons", "direction": "right", "x": 1.0, "y": 1.02, "xanchor": "right",
        "yanchor": "bottom",
        "showactive": True, "active": 1 if log_x else 0,
        "buttons": [
            {"label": "linear compute", "method": "relayout", "args": [{"xaxis.type": "linear"}]},
            {"label": "log compute", "method": "relayout", "args": [{"xaxis.type": "log"}]},
        ],
    }  # fmt: skip


def _add_fit(
    fig: go.Figure,
    fit: pd.Series,
    colors: dict[str, str],
    x_min: float,
    x_max: float,
    extrapolate_factor: float,
    points: tuple[np.ndarray, np.ndarray] | None = None,
    forecasts: Mapping[str, CurveForecast] | None = None,
    bounds: Bounds | None = None,
) -> None:
    variant = str(fit["variant"])
    run_id = fit.get("run_id")
    pooled = run_id is None or pd.isna(run_id)
    label = esc(variant) if pooled else esc(run_id)
    forecast = (forecasts or {}).get(variant) if pooled else None
    for trace in fit_traces(
        fit, colors.get(variant, "#000"), x_min=x_min, x_max=x_max,
        extrapolate_factor=extrapolate_factor, points=points, label=label, forecast=forecast,
        bounds=bounds,
    ):  # fmt: skip
        fig.add_trace(trace)


def fit_traces(
    fit: pd.Series,
    color: str,
    *,
    x_min: float,
    x_max: float,
    extrapolate_factor: float = 4.0,
    points: tuple[np.ndarray, np.ndarray] | None = None,
    label: str | None = None,
    legend: bool = True,
    forecast: CurveForecast | None = None,
    bounds: Bounds | None = None,
) -> list[go.Scatter]:
    """The traces of one fit row: the fitted sigmoid over the data (solid, from its window start
    to ``x_max``), the forecast beyond it (dashed, up to ``extrapolate_factor * x_max``) and one
    band (parameter box over the data, forecast interval beyond).

    ``forecast`` (on :func:`extrapolation_grid`; :func:`sweep_extrapolations` makes a sweep's) is
    drawn as the dashed part; without it, ``points`` (compute, value), the fit's data, give
    :func:`scalerl.harness.analysis.forecast_curve`; without either, the fitted sigmoid. A fit whose status
    is not confident gives a single legend-only trace naming the status and its reason. Names are
    ``fit L``, ``extrapolation L`` and ``interval L`` with ``L`` = ``label`` (escaped by the
    caller; default the escaped variant); all share the variant's legend group. ``bounds``
    (:func:`figure_bounds`) clips the forecast made here and the whole band.
    """
    import plotly.graph_objects as go

    from scalerl.harness.analysis.forecast.bounds import clip_to_bounds
    from scalerl.harness.analysis.forecast.ensemble import forecast_curve

    variant = str(fit["variant"])
    label = esc(variant) if label is None else label
    common: dict[str, Any] = {"legendgroup": esc(variant), "legendgrouptitle_text": esc(variant)}
    status = str(fit.get("status") or "")
    a, b, c_mid = _num(fit.get("a")), _num(fit.get("b")), _num(fit.get("c_mid"))
    if status not in CONFIDENT_STATUSES or a is None or b is None or c_mid is None:
        # Never draw a confident ceiling from a fit that cannot pin one: a legend entry names the
        # status and its reason instead.
        return [
            go.Scatter(
                x=[None], y=[None], mode="lines", line={"color": color, "dash": "dot"},
                name=f"fit {label}: {esc(status or 'no fit')} ({esc(fit.get('reason'))})"[:160],
                **common,
            )
        ]  # fmt: skip
    r0 = _num(fit.get("r0")) or 0.0
    start = max(_num(fit.get("window_start")) or x_min, x_min)
    data_x = np.geomspace(start, x_max, 120) if x_max > start else np.array([x_max])
    head = (
        f"fit {label}: A={fmt(a)} {fmt_interval(fit.get('a_lo'), fit.get('a_hi'))}, "
        f"B={fmt(b)} {fmt_interval(fit.get('b_lo'), fit.get('b_hi'))}, C_mid={fmt(c_mid)}"
    )
    traces = [
        go.Scatter(
            x=data_x, y=sigmoid(data_x, r0, a, b, c_mid), mode="lines", name=f"fit {label}",
            line={"color": color, "width": 3}, hovertemplate=head + "<extra></extra>",
            showlegend=legend, **common,
        )
    ]  # fmt: skip
    ext_x = extrapolation_grid(x_max, extrapolate_factor)
    if forecast is None and points is not None:
        forecast = forecast_curve(points[0], points[1], ext_x, level=FORECAST_LEVEL, bounds=bounds)
    if forecast is not None and not forecast.ok:
        forecast = None
    traces.append(
        go.Scatter(
            x=ext_x, y=sigmoid(ext_x, r0, a, b, c_mid) if forecast is None else forecast.value,
            mode="lines", name=f"extrapolation {label}",
            line={"color": color, "width": 2, "dash": "dash"},
            hovertemplate=head + "<br>forecast C=%{x:.4g}: %{y:.4f}<extra></extra>",
            showlegend=legend, **common,
        )
    )  # fmt: skip
    band_x = np.concatenate([data_x, ext_x[1:]])
    band = _band(band_x, fit)
    if forecast is not None:
        # Over the data: the parameter box (or the fitted curve); beyond it: the forecast interval.
        inside = band if band is not None else (sigmoid(band_x, r0, a, b, c_mid),) * 2
        band = (
            np.concatenate([inside[0][: data_x.size], forecast.lo[1:]]),
            np.concatenate([inside[1][: data_x.size], forecast.hi[1:]]),
        )
    if band is None:
        return traces
    # The parameter box over the data is a band on the mean curve, which a bounded metric's
    # mean cannot leave either (the forecast part is clipped already: clipping is idempotent).
    lo, hi = clip_to_bounds(band[0], bounds), clip_to_bounds(band[1], bounds)
    traces.append(
        go.Scatter(
            x=np.concatenate([band_x, band_x[::-1]]), y=np.concatenate([hi, lo[::-1]]),
            fill="toself", fillcolor=color, opacity=0.15, line={"width": 0}, mode="lines",
            name=f"interval {label}", hoverinfo="skip", showlegend=legend, **common,
        )
    )  # fmt: skip
    return traces
