"""Every knob's panels in one figure, for notebooks: the report's panels as a grid of subplots.

One row per knob: its reward panel (:func:`scalerl.harness.report.panels.knob_panels`) on the left and
its mechanism diagnostic on the right, with the same traces, the same shared y range, the fit
windows, the parameters and the verdict written above each row. One pair of buttons switches the
compute axis of every reward panel between log and linear at once, as the HTML page does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

from scalerl.harness.report.panels import knob_panels

if TYPE_CHECKING:
    import plotly.graph_objects as go

ROW_PX = 400  # the plot height of one row
GAP_PX = 150  # room above each row for its title, verdict and reason


def _axis(k: int) -> str:
    return "" if k == 1 else str(k)


def knob_panels_figure(
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
) -> go.Figure:
    """The panels of :func:`~scalerl.harness.report.panels.knob_panels` (same arguments) as one figure:
    a row per knob, reward left and mechanism right. A sweep with nothing to compare (only a
    baseline, or no points) gives a figure that says so."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    panels = knob_panels(
        curves, fits, verdicts, diagnostics, metric=metric, axis=axis, baseline=baseline, log_x=log_x,
        extrapolate_factor=extrapolate_factor, max_points_per_run=max_points_per_run,
    )  # fmt: skip
    if not panels:
        fig = go.Figure()
        fig.add_annotation(text="no variant to compare with the baseline", showarrow=False,
                           x=0.5, y=0.5, xref="paper", yref="paper")  # fmt: skip
        fig.update_xaxes(visible=False)
        fig.update_yaxes(visible=False)
        return fig
    n = len(panels)
    height = n * (ROW_PX + GAP_PX)
    fig = make_subplots(
        rows=n, cols=2, column_widths=[0.68, 0.32], horizontal_spacing=0.06,
        vertical_spacing=GAP_PX / height if n > 1 else 0.0,
    )  # fmt: skip
    relayout: dict[str, Any] = {}
    for i, panel in enumerate(panels, start=1):
        reward, mech = 2 * i - 1, 2 * i
        for trace in panel.reward.data:
            fig.add_trace(trace, row=i, col=1)
        for trace in panel.mechanism.data:
            fig.add_trace(trace, row=i, col=2)
        for shape in panel.reward.layout.shapes:
            fig.add_vline(x=shape.x0, line=shape.line, row=i, col=1)
        params, verdict = (a.text for a in panel.reward.layout.annotations)
        ref = {"xref": f"x{_axis(reward)} domain", "yref": f"y{_axis(reward)} domain", "showarrow": False}
        fig.add_annotation(text=params, x=0.995, y=0.01, xanchor="right", yanchor="bottom", align="left",
                           font={"size": 11}, bgcolor="rgba(255,255,255,0.85)", **ref)  # fmt: skip
        head = f"{panel.reward.layout.title.text}<br>{verdict}"
        fig.add_annotation(text=head, x=0, y=1.0, yshift=4, xanchor="left", yanchor="bottom", align="left",
                           font={"size": 11}, **ref)  # fmt: skip
        # Paper coordinates: an axis with no traces and hidden has no domain to refer to.
        (x0, x1), (y0, y1) = (
            fig.layout[f"xaxis{_axis(mech)}"].domain,
            fig.layout[f"yaxis{_axis(mech)}"].domain,
        )
        fig.add_annotation(text=panel.mechanism.layout.title.text or "", x=x0, y=y1, yshift=4, xanchor="left",
                           yanchor="bottom", align="left", font={"size": 11}, xref="paper", yref="paper",
                           showarrow=False)  # fmt: skip
        for note in panel.mechanism.layout.annotations:  # a mechanism figure with nothing to draw
            fig.add_annotation(text=note.text, x=(x0 + x1) / 2, y=(y0 + y1) / 2, xref="paper", yref="paper",
                               font={"size": 11, "color": "#555"}, showarrow=False)  # fmt: skip
            fig.update_xaxes(visible=False, row=i, col=2)
            fig.update_yaxes(visible=False, row=i, col=2)
        fig.update_yaxes(range=list(panel.reward.layout.yaxis.range), title_text=metric, row=i, col=1)
        fig.update_xaxes(type="log" if log_x else "linear", row=i, col=1)
        fig.update_xaxes(title_text="step", row=i, col=2)
        relayout[f"xaxis{_axis(reward)}.type"] = None
    buttons = [
        {"label": f"{kind} compute", "method": "relayout", "args": [dict.fromkeys(relayout, kind)]}
        for kind in ("linear", "log")
    ]
    fig.update_layout(
        height=height + 60, template="plotly_white", showlegend=False, hovermode="closest",
        margin={"t": GAP_PX + 20, "l": 60, "r": 16, "b": 50},
        updatemenus=[{"type": "buttons", "direction": "right", "x": 1.0, "y": 1.0 + 40 / height,
                      "xanchor": "right", "yanchor": "bottom", "active": 1 if log_x else 0,
                      "buttons": buttons}],
    )  # fmt: skip
    return fig
