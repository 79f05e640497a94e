"""Mechanism diagnostics beside the curves: one small multiple per ``diag/*`` metric.

Each panel is one diagnostic of :mod:`scalerl.harness.rl.diagnostics` (plus the length-control rates)
against the training step, one line per variant: the mean over that variant's seeds at each step,
so a reader sees whether a knob acted (e.g. loo-8op's lag, loo-fp32's log-prob mismatch)
independently of the reward. Metrics a sweep did not log are left out; a sweep without any
(imported curves) gets an empty figure with a note.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import pandas as pd

from scalerl.harness.report._style import esc, variant_colors

if TYPE_CHECKING:
    import plotly.graph_objects as go

# Panel order and titles; keep in sync with scalerl.harness.rl.diagnostics.DIAG_METRICS.
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
    "train/response_len": "response length (tokens)",
}

# The metric(s) that show each knob of scalerl.harness.recipe.schema acted, whatever it did to the reward.
KNOB_DIAGNOSTICS: dict[str, tuple[str, ...]] = {
    "pipeline": ("diag/lag_mean",),
    "loss": ("diag/clip_share",),
    "lm_head": ("diag/logp_abs_diff",),
    "aggregation": ("train/response_len",),
    "advantage_norm": ("diag/adv_std",),
    "zero_variance_filter": ("diag/zero_var_share",),
    "length_control": ("train/truncation_rate", "train/interruption_rate"),
    "no_positive_resampling": ("diag/retired_prompts",),
}
_DASHES = ("solid", "dash")


def diagnostics_figure(frame: pd.DataFrame, *, baseline: str = "baseline", cols: int = 3) -> go.Figure:
    """Small multiples of the diagnostics in ``frame`` (``scalerl.db.queries.curves`` columns: at least
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
    keys = ["metric", "variant", "step"]
    means = data.groupby(keys, sort=True, observed=True)["value"].mean().reset_index()
    for i, metric in enumerate(present):
        row, col = i // cols + 1, i % cols + 1
        for variant, part in means[means["metric"] == metric].groupby("variant", sort=True, observed=True):
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


def _message(fig: go.Figure, text: str) -> go.Figure:
    fig.add_annotation(text=text, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper",
                       font={"size": 12, "color": "#555"})  # fmt: skip
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return fig


def mechanism_figure(
    frame: pd.DataFrame,
    variant: str,
    knob: str | None,
    *,
    baseline: str = "baseline",
    colors: dict[str, str] | None = None,
    height: int = 470,
) -> go.Figure:
    """The diagnostic that proves ``knob`` acted, for ``variant`` against ``baseline``: the mean
    over seeds at each step of the metric(s) :data:`KNOB_DIAGNOSTICS` names for the knob, from
    ``frame`` (``scalerl.db.queries.curves`` columns). The title gives each line's mean over the second
    half of training; ``colors`` maps variant to colour (default: the
    report's palette over the two). A knob without a known diagnostic, or a sweep that did not log it, gets a
    figure that says so instead of empty axes."""
    import plotly.graph_objects as go

    fig = go.Figure()
    fig.update_layout(template="plotly_white", height=height, margin={"t": 74, "l": 56, "r": 12, "b": 50},
                      showlegend=False)  # fmt: skip
    wanted = KNOB_DIAGNOSTICS.get(str(knob), ()) if knob else ()
    if not wanted:
        return _message(fig, f"no mechanism diagnostic is known for knob {esc(knob or variant)}")
    data = (
        frame[frame["metric"].isin(wanted) & frame["variant"].isin([baseline, variant])]
        if not frame.empty
        else frame
    )
    present = [m for m in wanted if not data.empty and (data["metric"] == m).any()]
    if not present:
        names = ", ".join(wanted)
        return _message(
            fig, f"{esc(names)} not logged for this sweep<br>(diag/* metrics come from the reference trainer)"
        )
    colors = {**variant_colors([baseline, variant], baseline), **(colors or {})}
    keys = ["metric", "variant", "step"]
    means = data.groupby(keys, sort=True, observed=True)["value"].mean().reset_index()
    summary = []
    for i, metric in enumerate(present):
        for name in (baseline, variant):
            part = means[(means["metric"] == metric) & (means["variant"] == name)]
            if part.empty:
                continue
            late = part[part["step"] >= part["step"].max() / 2]["value"].mean()
            summary.append(f'<span style="color:{colors[name]}">{esc(name)} {late:.3g}</span>')
            fig.add_trace(
                go.Scatter(
                    x=part["step"].tolist(), y=part["value"].tolist(), mode="lines",
                    name=f"{esc(name)} · {esc(metric)}",
                    line={"color": colors[name], "width": 2, "dash": _DASHES[i % len(_DASHES)]},
                    hovertemplate=f"{esc(name)}<br>{esc(metric)}<br>step %{{x}}<br>%{{y:.4g}}<extra></extra>",
                )
            )  # fmt: skip
    label = " / ".join(DIAGNOSTIC_PANELS.get(m, m) for m in present)
    dashes = " (solid, dashed)" if len(present) > 1 else ""
    fig.update_layout(
        title={"text": f"<b>mechanism</b>: {esc(label)}{dashes}<br>"
               f"<span style='font-size:11px'>late mean: {' · '.join(summary)}</span>",
               "x": 0, "xanchor": "left", "font": {"size": 12}},
        xaxis={"title": {"text": "step"}},
    )  # fmt: skip
    return fig
