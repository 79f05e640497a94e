"""The overview: runs by status as one line of text, and compute spent per variant as one figure.

A bar chart of run statuses is one bar on a finished sweep; one line says the same. What varies
between variants is the compute each one spent, a horizontal bar per variant split by run status,
so a variant whose runs stopped early shows it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from scalerl.harness.report._style import AXIS_LABELS, esc

if TYPE_CHECKING:
    import plotly.graph_objects as go


def latest_values(curves: pd.DataFrame, metric: str, axis: str) -> pd.DataFrame:
    """One row per run: variant, seed, the last step's value of ``metric`` and compute on ``axis``."""
    pts = curves[curves["metric"] == metric]
    if pts.empty:
        return pd.DataFrame(columns=["run_id", "variant", "seed", "step", "value", axis])
    last = pts.loc[pts.groupby("run_id", sort=True, observed=True)["step"].idxmax()]
    return last[["run_id", "variant", "seed", "step", "value", axis]].reset_index(drop=True)


def status_line(runs: pd.DataFrame) -> str:
    """Runs by status in one escaped line: ``27 runs: 25 completed, 2 running``."""
    if runs.empty:
        return "0 runs"
    counts = runs["status"].astype(str).value_counts()
    parts = ", ".join(f"{int(n)} {esc(status)}" for status, n in sorted(counts.items()))
    return f"{len(runs)} runs: {parts}"


def overview_figure(
    runs: pd.DataFrame,
    curves: pd.DataFrame,
    *,
    metric: str = "val/pass_rate",
    axis: str = "flops",
    baseline: str = "baseline",
) -> go.Figure:
    """Compute spent per variant: for each variant one horizontal bar, the sum over its runs of
    their latest compute on ``axis``, stacked by run status; the title carries
    :func:`status_line`. ``runs`` needs ``run_id, variant, status`` (``scalerl.db.queries.runs``);
    ``curves`` the columns of ``scalerl.db.queries.curves``. A sweep without points says so."""
    import plotly.graph_objects as go

    fig = go.Figure()
    last = latest_values(curves, metric, axis)
    variants = sorted(map(str, runs["variant"].unique()), key=lambda v: (v != baseline, v))
    names = [esc(v) for v in variants]
    fig.update_layout(
        title={"text": f"{AXIS_LABELS[axis]} spent per variant · {status_line(runs)}", "font": {"size": 14}},
        barmode="stack", template="plotly_white", height=110 + 26 * max(len(variants), 1),
        margin={"t": 40, "b": 40, "l": 110, "r": 20}, legend={"title": {"text": "run status"}},
        yaxis={"autorange": "reversed"}, xaxis={"title": {"text": AXIS_LABELS[axis]}},
    )  # fmt: skip
    if last.empty:
        fig.add_annotation(text=f"no points of {esc(metric)} yet: nothing spent to show", showarrow=False,
                           x=0.5, y=0.5, xref="paper", yref="paper")  # fmt: skip
        fig.update_xaxes(visible=False)
        fig.update_yaxes(visible=False)
        return fig
    status = runs.set_index(runs["run_id"].astype(str))["status"].astype(str)
    last = last.assign(status=[status.get(str(r), "unknown") for r in last["run_id"]])
    spent = last.groupby(["status", "variant"], observed=True)[axis].sum()
    for state in sorted(last["status"].unique()):
        fig.add_trace(
            go.Bar(
                y=names, x=[float(spent.get((state, v), 0.0)) for v in variants], orientation="h",
                name=esc(state), marker_color=_STATUS_COLORS.get(state, "#8c564b"),
                hovertemplate=f"%{{y}}: %{{x:.4g}} ({esc(state)})<extra></extra>",
            )
        )  # fmt: skip
    return fig


_STATUS_COLORS: dict[str, str] = {
    "completed": "#2ca02c", "running": "#1f77b4", "pending": "#aaaaaa", "failed": "#d62728",
    "stopped": "#ff7f0e", "pruned": "#9467bd",
}  # fmt: skip
