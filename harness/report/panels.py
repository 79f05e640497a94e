"""Small multiples: one reward panel per knob, the baseline against that one variant.

The reference is the paper's ablation figures: one panel per change, the baseline and the
variant, each with its per-seed points, its pooled fit over the fit window (solid), the forecast
beyond the data (dashed) with its interval band, and a dotted line where its fit window starts.
The fitted A, B and C_mid with their intervals sit on the panel, and so do the verdict, ΔA and ΔB
and the verdict's reason. Every panel of a sweep shares one y range and one compute range, so
panels compare at a glance; ``log_x`` picks the compute scale (the HTML page toggles all panels
at once).

A panel per variant that is not the baseline: on a leave-one-out sweep that is one per knob; on
other designs one per value. Each variant's traces (and its forecast, the costly part) are built
once and reused in every panel that shows them, and every variant's forecast is made in one call
(:func:`.curves.sweep_extrapolations`: each borrows from the others, as ``scalerl forecast`` does),
so a sweep of ``n`` variants costs ``n`` forecasts, not ``2n``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from scalerl.harness.report._style import (
    AXIS_LABELS,
    anchor_id,
    esc,
    fmt,
    fmt_interval,
    variant_colors,
    verdict_color,
    wrap_lines,
)
from scalerl.harness.report.curves import (
    _check_axis,
    _fit_points,
    _num,
    _select_fits,
    extrapolation_grid,
    figure_bounds,
    fit_traces,
    sweep_extrapolations,
)
from scalerl.harness.report.diagnostics import mechanism_figure
from scalerl.harness.report.downsample import display_indices

if TYPE_CHECKING:
    import plotly.graph_objects as go

PANEL_HEIGHT = 470
REASON_WIDTH = 92  # characters per line of the verdict's reason on a panel


@dataclass(frozen=True)
class KnobPanel:
    """One knob's panel: its reward figure and, beside it, the diagnostic that shows it acted."""

    variant: str
    knob: str | None
    alternative: str | None
    verdict: str | None
    anchor: str  # the HTML id of the panel (the verdict table links to it)
    reward: go.Figure
    mechanism: go.Figure


def panel_variants(
    curves: pd.DataFrame, verdicts: pd.DataFrame | None, baseline: str = "baseline"
) -> list[str]:
    """The variants that get a panel, in the verdict table's order, then the rest sorted."""
    order = [] if verdicts is None or verdicts.empty else [str(v) for v in verdicts["variant"]]
    others = sorted(map(str, curves["variant"].unique())) if not curves.empty else []
    seen: set[str] = set()
    out = []
    for v in [*order, *others]:
        if v != baseline and v not in seen:
            seen.add(v)
            out.append(v)
    return out


class _Sweep:
    """The shared pieces of every panel: points, fits, colours, ranges, and traces per variant."""

    def __init__(
        self,
        curves: pd.DataFrame,
        fits: pd.DataFrame | None,
        verdicts: pd.DataFrame | None,
        *,
        metric: str,
        axis: str,
        baseline: str,
        extrapolate_factor: float,
        max_points_per_run: int,
    ) -> None:
        self.pts = _check_axis(curves, metric, axis)
        self.fits = _select_fits(fits, metric, axis)
        self.pooled = self.fits[self.fits["run_id"].isna()] if not self.fits.empty else self.fits
        self.verdicts = verdicts if verdicts is not None else pd.DataFrame()
        self.metric, self.axis, self.baseline = metric, axis, baseline
        self.extrapolate_factor, self.max_points = extrapolate_factor, max_points_per_run
        variants = list(map(str, self.pts["variant"].unique())) if not self.pts.empty else []
        self.colors = variant_colors([*variants, baseline], baseline)
        x = self.pts[axis] if not self.pts.empty else pd.Series([1.0])
        self.x_max = float(x.max())
        positive = x[x > 0]
        self.x_min = float(positive.min()) if not positive.empty else self.x_max / 100.0
        self._traces: dict[str, list[Any]] = {}
        # Every pooled fit's forecast at once: each borrows from the other variants, as
        # `scalerl forecast` does, so the panels and the command agree.
        self.bounds = figure_bounds(self.pts, metric)
        self.forecasts = sweep_extrapolations(
            self.pts, self.pooled, axis, extrapolation_grid(self.x_max, extrapolate_factor), self.bounds
        )

    def fit_of(self, variant: str) -> pd.Series | None:
        rows = self.pooled[self.pooled["variant"] == variant] if not self.pooled.empty else self.pooled
        return None if rows.empty else rows.iloc[0]

    def verdict_of(self, variant: str) -> pd.Series | None:
        if self.verdicts.empty:
            return None
        rows = self.verdicts[self.verdicts["variant"] == variant]
        return None if rows.empty else rows.iloc[0]

    def traces(self, variant: str) -> list[Any]:
        """Points, fit, forecast and band of one variant (built once, reused by every panel)."""
        if variant not in self._traces:
            self._traces[variant] = self._build(variant)
        return self._traces[variant]

    def _build(self, variant: str) -> list[Any]:
        import plotly.graph_objects as go

        color = self.colors.get(variant, "#000")
        name = esc(variant)
        mine = self.pts[self.pts["variant"] == variant] if not self.pts.empty else self.pts
        out: list[Any] = []
        n_seeds = mine["run_id"].nunique() if not mine.empty else 0
        for i, (run_id, run) in enumerate(mine.groupby("run_id", sort=True, observed=True)):
            run = run.sort_values(self.axis)
            x = run[self.axis].to_numpy(dtype=float)
            y = run["value"].to_numpy(dtype=float)
            keep = display_indices(x, y, self.max_points)
            out.append(
                go.Scatter(
                    x=x[keep], y=y[keep], mode="markers", name=f"{name} ({n_seeds} seeds)",
                    legendgroup=name, showlegend=i == 0, opacity=0.55,
                    marker={"color": color, "size": 4}, customdata=run["step"].to_numpy()[keep],
                    hovertemplate=f"{esc(run_id)}<br>step %{{customdata}}<br>value %{{y:.4f}}"
                    f"<br>{AXIS_LABELS[self.axis]} %{{x:.4g}}<extra>{name}</extra>",
                )
            )  # fmt: skip
        fit = self.fit_of(variant)
        if fit is not None:
            out += fit_traces(
                fit, color, x_min=self.x_min, x_max=self.x_max, extrapolate_factor=self.extrapolate_factor,
                points=_fit_points(self.pts, fit, self.axis), legend=False,
                forecast=self.forecasts.get(variant), bounds=self.bounds,
            )  # fmt: skip
        return out

    def y_range(self) -> list[float]:
        """One y range for every panel: the points and the forecasts, padded by 6%."""
        values = [self.pts["value"].to_numpy(dtype=float)] if not self.pts.empty else []
        for variant in {*map(str, self.pooled.get("variant", [])), self.baseline}:
            values += [
                np.asarray(t.y, dtype=float) for t in self.traces(variant) if t.name.startswith("extr")
            ]
        flat = np.concatenate(values) if values else np.array([0.0, 1.0])
        flat = flat[np.isfinite(flat)]
        lo, hi = (float(flat.min()), float(flat.max())) if flat.size else (0.0, 1.0)
        pad = 0.06 * (hi - lo) if hi > lo else 0.05
        return [lo - pad, hi + pad]


def _param_line(variant: str, fit: pd.Series | None, color: str) -> str:
    head = f'<span style="color:{color}"><b>{esc(variant)}</b></span>'
    if fit is None:
        return f"{head} no pooled fit"
    status = str(fit.get("status") or "")
    if status != "ok" or _num(fit.get("a")) is None:
        return f"{head} {esc(status or 'no fit')}: A not pinned"
    return (
        f"{head} A {fmt(fit.get('a'))} {fmt_interval(fit.get('a_lo'), fit.get('a_hi'))}"
        f" · B {fmt(fit.get('b'), 2)} {fmt_interval(fit.get('b_lo'), fit.get('b_hi'), 2)}"
        f"<br>C_mid {fmt(fit.get('c_mid'), 2)} {fmt_interval(fit.get('c_mid_lo'), fit.get('c_mid_hi'), 2)}"
    )


def _verdict_lines(verdict: pd.Series | None) -> list[str]:
    if verdict is None:
        return ["<i>no verdict for this variant</i>"]
    kind = str(verdict.get("verdict"))
    head = (
        f'<span style="color:{verdict_color(kind)}"><b>{esc(kind)}</b></span>'
        f" · ΔA {fmt(verdict.get('d_a'))} {fmt_interval(verdict.get('d_a_lo'), verdict.get('d_a_hi'))}"
        f" · ΔB {fmt(verdict.get('d_b'), 2)} {fmt_interval(verdict.get('d_b_lo'), verdict.get('d_b_hi'), 2)}"
        f" · margin {fmt(verdict.get('margin'))}"
    )
    return [head, *wrap_lines(verdict.get("reason"), REASON_WIDTH, max_lines=4)]


def _panel_title(variant: str, verdict: pd.Series | None, pts: pd.DataFrame) -> str:
    knob = alt = None
    if verdict is not None:
        knob, alt = verdict.get("knob"), verdict.get("alternative")
    elif not pts.empty and "knob" in pts:
        rows = pts[pts["variant"] == variant]
        if not rows.empty:
            knob, alt = rows["knob"].iloc[0], rows["alternative"].iloc[0]
    if knob is None or (isinstance(knob, float) and math.isnan(knob)):
        return f"<b>{esc(variant)}</b>"
    return f"<b>{esc(knob)}</b> → {esc(alt)} <span style='color:#666'>({esc(variant)})</span>"


def _figure(sweep: _Sweep, variant: str, *, log_x: bool, y_range: list[float]) -> go.Figure:
    import plotly.graph_objects as go

    base = sweep.baseline
    fig = go.Figure(data=[*sweep.traces(base), *sweep.traces(variant)])
    verdict = sweep.verdict_of(variant)
    lines = _verdict_lines(verdict)
    for name in (base, variant):
        window = _num(fit.get("window_start")) if (fit := sweep.fit_of(name)) is not None else None
        if window is not None and window > 0:
            fig.add_vline(x=window, line={"dash": "dot", "color": sweep.colors.get(name, "#000"), "width": 1})
    params = "<br>".join(
        _param_line(n, sweep.fit_of(n), sweep.colors.get(n, "#000")) for n in (base, variant)
    )
    fig.add_annotation(
        text=params, xref="paper", yref="paper", x=0.995, y=0.01, xanchor="right", yanchor="bottom",
        align="left", showarrow=False, font={"size": 11}, bgcolor="rgba(255,255,255,0.85)",
        bordercolor="#ccc", borderwidth=1,
    )  # fmt: skip
    fig.add_annotation(
        text="<br>".join(lines), xref="paper", yref="paper", x=0, y=1.0, xanchor="left", yanchor="bottom",
        align="left", showarrow=False, font={"size": 11}, yshift=4,
    )  # fmt: skip
    top = 44 + 15 * len(lines)
    fig.update_layout(
        title={"text": _panel_title(variant, verdict, sweep.pts), "x": 0, "xanchor": "left",
               "y": 1 - 10 / (PANEL_HEIGHT + 15 * len(lines)), "yanchor": "top", "font": {"size": 15}},
        xaxis={"title": {"text": AXIS_LABELS[sweep.axis] + " · dotted: fit window start · dashed: forecast"},
               "type": "log" if log_x else "linear"},
        yaxis={"title": {"text": esc(sweep.metric)}, "range": y_range},
        showlegend=False, hovermode="closest", template="plotly_white",
        height=PANEL_HEIGHT + 15 * len(lines), margin={"t": top, "l": 60, "r": 16, "b": 50},
    )  # fmt: skip
    return fig


def knob_panels(
    curves: pd.DataFrame,
    fits: pd.DataFrame | None = None,
    verdicts: pd.DataFrame | None = None,
    diagnostics: pd.DataFrame | None = None,
    *,
    metric: str = "val/pass_rate",
    axis: str = "flops",
    baseline: str = "baseline",
    log_x: bool = True,
    extrapolate_factor: float = 4.0,
    max_points_per_run: int = 400,
) -> list[KnobPanel]:
    """Every knob's panel, as the report shows them: for each variant but the baseline, its
    reward figure (see the module docstring) and its mechanism figure
    (:func:`scalerl.harness.report.diagnostics.mechanism_figure` on ``diagnostics``).

    Frames have the columns of ``scalerl.db.queries.curves``/``fits``/``verdicts``; ``diagnostics`` holds
    the ``diag/*`` points (``scalerl.db.queries.curves`` of those metrics). All reward figures share one
    y range. In a notebook: ``for p in knob_panels(...): p.reward.show(); p.mechanism.show()``.
    """
    sweep = _Sweep(
        curves, fits, verdicts, metric=metric, axis=axis, baseline=baseline,
        extrapolate_factor=extrapolate_factor, max_points_per_run=max_points_per_run,
    )  # fmt: skip
    y_range = sweep.y_range()
    diag = diagnostics if diagnostics is not None else pd.DataFrame()
    panels = []
    for variant in panel_variants(sweep.pts, verdicts, baseline):
        verdict = sweep.verdict_of(variant)
        knob = None if verdict is None else verdict.get("knob")
        alt = None if verdict is None else verdict.get("alternative")
        if knob is None and not sweep.pts.empty and "knob" in sweep.pts:
            rows = sweep.pts[sweep.pts["variant"] == variant]
            knob = rows["knob"].iloc[0] if not rows.empty else None
        knob = None if knob is None or (isinstance(knob, float) and math.isnan(knob)) else str(knob)
        panels.append(
            KnobPanel(
                variant=variant, knob=knob, alternative=None if alt is None or pd.isna(alt) else str(alt),
                verdict=None if verdict is None else str(verdict.get("verdict")), anchor=anchor_id(variant),
                reward=_figure(sweep, variant, log_x=log_x, y_range=y_range),
                mechanism=mechanism_figure(diag, variant, knob, baseline=baseline, colors=sweep.colors),
            )
        )  # fmt: skip
    return panels


def knob_panel_figure(
    curves: pd.DataFrame,
    fits: pd.DataFrame | None,
    verdicts: pd.DataFrame | None,
    variant: str,
    *,
    metric: str = "val/pass_rate",
    axis: str = "flops",
    baseline: str = "baseline",
    log_x: bool = True,
    extrapolate_factor: float = 4.0,
    max_points_per_run: int = 400,
) -> go.Figure:
    """One knob's reward panel: ``variant`` against ``baseline`` (see the module docstring), with
    the y range every panel of the sweep shares."""
    sweep = _Sweep(
        curves, fits, verdicts, metric=metric, axis=axis, baseline=baseline,
        extrapolate_factor=extrapolate_factor, max_points_per_run=max_points_per_run,
    )  # fmt: skip
    return _figure(sweep, variant, log_x=log_x, y_range=sweep.y_range())
