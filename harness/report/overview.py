"""The overview figure: runs by status, compute spent per variant, each run's latest value."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from harness.report._style import AXIS_LABELS, esc, variant_colors

if TYPE_CHECKING:
    import plotly.graph_objects as go


def latest_values(curves: pd.DataFrame, metric: str, axis: str) -> pd.DataFrame:
    """One row per run: variant, seed, the last step's value of ``metric`` and compute on ``axis``."""
    pts = curves[curves["metric"] == metric]
    if pts.empty:
        return pd.DataFrame(columns=["run_id", "variant", "seed", "step", "value", axis])
    last = pts.loc[pts.groupby("run_id", sort=True, observed=True)["step"].idxmax()]
    return last[["run_id", "variant", "seed", "step", "value", axis]].reset_index(drop=True)


def overview_figure(
    runs: pd.DataFrame,
    curves: pd.DataFrame,
    *,
    metric: str = "val/pass_rate",
    axis: str = "flops",
    baseline: str = "baseline",
) -> go.Figure:
    """Three panels: run count per status and variant, compute spent per variant (sum over its
    runs of their latest compute on ``axis``), and each run's latest ``metric`` value.

    ``runs`` needs ``run_id, variant, status`` (``db.queries.runs``); ``curves`` the columns of
    ``db.queries.curves``.
    """
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    colors = variant_colors(map(str, runs["variant"]), baseline)
    last = latest_values(curves, metric, axis)
    spent = last.groupby("variant")[axis].sum() if not last.empty else pd.Series(dtype=float)
    fig = make_subplots(
        rows=1, cols=3, horizontal_spacing=0.08,
        subplot_titles=("runs by status", f"{AXIS_LABELS[axis]} spent", f"latest {esc(metric)}"),
    )  # fmt: skip
    statuses = sorted(map(str, runs["status"].unique()))
    for variant, group in runs.groupby("variant", sort=True):
        counts = group["status"].astype(str).value_counts()
        name = esc(variant)
        color = colors[str(variant)]
        fig.add_trace(
            go.Bar(x=statuses, y=[int(counts.get(s, 0)) for s in statuses], name=name,
                   legendgroup=name, marker_color=color),
            row=1, col=1,
        )  # fmt: skip
        fig.add_trace(
            go.Bar(x=[name], y=[float(spent.get(variant, 0.0))], name=name, legendgroup=name,
                   marker_color=color, showlegend=False),
            row=1, col=2,
        )  # fmt: skip
        mine = last[last["variant"] == variant]
        fig.add_trace(
            go.Scatter(
                x=[name] * len(mine), y=mine["value"], mode="markers", name=name, legendgroup=name,
                marker={"color": color, "size": 9}, showlegend=False,
                hovertext=[f"{esc(r.run_id)} seed {esc(r.seed)} step {r.step}" for r in mine.itertuples()],
            ),
            row=1, col=3,
        )  # fmt: skip
    fig.update_layout(barmode="stack", template="plotly_white", title={"text": "Sweep overview"})
    return fig
