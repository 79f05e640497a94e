"""Mechanism diagnostics beside the curves: one small multiple per ``diag/*`` metric.

Each panel is one diagnostic of :mod:`harness.rl.diagnostics` (plus the length-control rates)
against the training step, one line per variant: the mean over that variant's seeds at each step,
so a reader sees whether a knob acted (e.g. loo-8op's lag, loo-fp32's log-prob mismatch)
independently of the reward. Metrics a sweep did not log are left out; a sweep without any
(imported curves) gets an empty figure with a note.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import pandas as pd

from harness.report._style import esc, variant_colors

if TYPE_CHECKING:
    import plotly.graph_objects as go

# Panel order and titles; keep in sync with harness.rl.diagnostics.DIAG_METRICS.
DIAGNOSTIC_PANELS: dict[str, str] = {
    "diag/lag_mean": "policy lag, mean (steps)",
    "diag/lag_max": "policy lag, max (steps)",
    "diag/clip_share": "share of tokens clipped/truncated",
    "diag/ratio_mean": "mean importance ratio",
    "diag/logp_abs_diff": "generator vs trainer, mean |Δ log p|",
    "diag/logp_kl": "generator vs trainer, KL (k3)",
    "diag/adv_std": "advantage std",
    "diag/zero_var_share": "share of prompts zero-variance-filtered",
    "diag/retired_prompts": "prompts retired (cumulative)",
    "train/truncation_rate": "truncation rate",
    "train/interruption_rate": "interruption rate",
}


def diagnostics_figure(frame: pd.DataFrame, *, baseline: str = "baseline", cols: int = 3) -> go.Figure:
    """Small multiples of the diagnostics in ``frame`` (``db.queries.curves`` columns: at least
    ``variant``, ``metric``, ``step``, ``value``): one subplot per metric of
    :data:`DIAGNOSTIC_PANELS` present, one line per variant (mean over seeds per step)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    present = [m for m in DIAGNOSTIC_PANELS if not frame.empty and (frame["metric"] == m).any()]
    if not present:
        fig = go.Figure()
        fig.add_annotation(text="no diagnostics logged (diag/* metrics come from the reference trainer)",
                           showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")  # fmt: skip
        return fig
    rows = math.ceil(len(present) / cols)
    fig = make_subplots(
        rows=rows, cols=cols, subplot_titles=[DIAGNOSTIC_PANELS[m] for m in present],
        horizontal_spacing=0.07, vertical_spacing=0.5 / rows,
    )  # fmt: skip
    data = frame[frame["metric"].isin(present)]
    colors = variant_colors(map(str, data["variant"]), baseline)
    means = data.groupby(["metric", "variant", "step"], sort=True)["value"].mean().reset_index()
    for i, metric in enumerate(present):
        row, col = i // cols + 1, i % cols + 1
        for variant, part in means[means["metric"] == metric].groupby("variant", sort=True):
            name = esc(variant)
            fig.add_trace(
                go.Scatter(
                    x=part["step"].tolist(), y=part["value"].tolist(), mode="lines", name=name,
                    legendgroup=name, showlegend=i == 0, line={"color": colors[str(variant)], "width": 1.5},
                    hovertemplate=f"{name}<br>step %{{x}}<br>%{{y:.4g}}<extra></extra>",
                ),
                row=row, col=col,
            )  # fmt: skip
        fig.update_xaxes(title_text="step" if row == rows else None, row=row, col=col)
    fig.update_layout(height=260 * rows, margin={"t": 40, "l": 40, "r": 20, "b": 40}, legend_title="variant")
    return fig
