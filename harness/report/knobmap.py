"""The knob map: what each knob does to the ceiling (ΔA) and to the efficiency at a shared A.

Each knob whose verdict has a ΔA is a point at (ΔA, ΔB) with both intervals as error bars,
coloured by its verdict. The vertical band |ΔA| ≤ margin is where a knob does not move the
ceiling; outside it a knob is a mover (up or down), inside it a shaper (faster above zero,
slower below) or no effect near the origin, and the quadrants are labelled so. The efficiency
axis is ΔB (the stored column) or, when the frame carries it, Δlog C_mid (``efficiency=
"log_c_mid"``; a lower C_mid is faster, so its sign is flipped to keep "faster" up).

Ranges come from the data (the intervals and the margin, padded), never fixed. A knob without a
ΔA (undecided, unfit) is not placed at a made-up position: the figure names it and says why; a
figure with nothing to place says so instead of drawing empty axes. A mover without a ΔB (its
fits do not share an A) sits on the ΔB = 0 line with a hollow marker. An open-ended ΔA interval
(a lower bound: the ceiling rises by at least this) is drawn as a one-sided whisker with an arrow.

Labels never overlap: :func:`label_positions` places each knob's name beside its marker where it
collides with no other label, marker or quadrant label (in the pixels of a plot
:data:`PLOT_WIDTH_PX` wide, the narrowest a report or the live view draws it), trying above,
below, right and left; a name with no free place is left to its marker's hover text, and the
subtitle says how many.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import numpy as np
import pandas as pd

from scalerl.harness.report._style import esc, fmt, fmt_interval, verdict_color

if TYPE_CHECKING:
    import plotly.graph_objects as go

Efficiency = Literal["b", "log_c_mid"]
DECIDED: tuple[str, ...] = ("asymptote-mover", "efficiency-shaper", "no-effect")
HEIGHT = 520
MARGIN_T, MARGIN_B = 90, 80
# The plot area labels are placed in: the narrowest the page draws the figure (a 1024 px window
# less the legend and margins); wider windows only add room.
PLOT_WIDTH_PX = 700.0
PLOT_HEIGHT_PX = float(HEIGHT - MARGIN_T - MARGIN_B)
CHAR_PX, LINE_PX, MARKER_PX = 7.0, 15.0, 9.0  # Plotly's default 12 px font; the 12 px marker
# Tried in this order; the offsets (dx, dy) place the label's box relative to the marker.
POSITIONS: tuple[str, ...] = (
    "top center", "bottom center", "middle right", "middle left",
    "top right", "top left", "bottom right", "bottom left",
)  # fmt: skip
Box = tuple[float, float, float, float]  # x0, y0, x1, y1 in pixels (y up)


def _label_box(position: str, px: float, py: float, w: float, h: float) -> Box:
    vertical, horizontal = position.split(" ")
    m = MARKER_PX / 2 + 2
    if vertical == "top":
        y0 = py + m
    elif vertical == "bottom":
        y0 = py - m - h
    else:
        y0 = py - h / 2
    if horizontal == "center":
        x0 = px - w / 2
    elif horizontal == "right":
        x0 = px + (m if vertical == "middle" else 0.0)
    else:
        x0 = px - w - (m if vertical == "middle" else 0.0)
    return (x0, y0, x0 + w, y0 + h)


def _overlaps(a: Box, b: Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def label_positions(
    x: np.ndarray,
    y: np.ndarray,
    labels: list[str],
    x_range: tuple[float, float],
    y_range: tuple[float, float],
    *,
    obstacles: tuple[Box, ...] = (),
    width_px: float = PLOT_WIDTH_PX,
    height_px: float = PLOT_HEIGHT_PX,
) -> tuple[list[str | None], list[Box | None]]:
    """A Plotly ``textposition`` per point (None: no place that overlaps nothing) and the label's
    box in pixels. Greedy, left to right: each label takes the first of :data:`POSITIONS` whose
    box stays inside the plot and meets no marker, earlier label or ``obstacles`` box."""
    sx = width_px / (x_range[1] - x_range[0])
    sy = height_px / (y_range[1] - y_range[0])
    px = (np.asarray(x, dtype=float) - x_range[0]) * sx
    py = (np.asarray(y, dtype=float) - y_range[0]) * sy
    half = MARKER_PX / 2
    taken: list[Box] = [
        *obstacles,
        *((a - half, b - half, a + half, b + half) for a, b in zip(px, py, strict=True)),
    ]
    chosen: list[str | None] = [None] * len(labels)
    boxes: list[Box | None] = [None] * len(labels)
    for i in np.argsort(px, kind="stable"):
        w, h = CHAR_PX * len(labels[i]), LINE_PX
        for position in POSITIONS:
            box = _label_box(position, float(px[i]), float(py[i]), w, h)
            inside = box[0] >= 0 and box[1] >= 0 and box[2] <= width_px and box[3] <= height_px
            if inside and not any(_overlaps(box, t) for t in taken):
                chosen[i], boxes[i] = position, box
                taken.append(box)
                break
    return chosen, boxes


def _efficiency(
    frame: pd.DataFrame, efficiency: Efficiency
) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    """(value, lo, hi, axis title) of the efficiency change, "faster" positive."""
    if efficiency == "log_c_mid" and "d_log_c_mid" in frame:
        mid, lo, hi = (
            -frame[c].to_numpy(dtype=float) for c in ("d_log_c_mid", "d_log_c_mid_hi", "d_log_c_mid_lo")
        )
        return mid, lo, hi, "−Δlog C_mid at shared A (faster ↑)"
    mid, lo, hi = (frame[c].to_numpy(dtype=float) for c in ("d_b", "d_b_lo", "d_b_hi"))
    return mid, lo, hi, "ΔB = B_variant − B_baseline at shared A (faster ↑)"


def _span(values: list[np.ndarray], floor: float) -> tuple[float, float]:
    flat = np.concatenate([v[np.isfinite(v)] for v in values] + [np.array([0.0, -floor, floor])])
    lo, hi = float(flat.min()), float(flat.max())
    pad = 0.12 * (hi - lo)
    return lo - pad, hi + pad


def _message(fig: go.Figure, text: str) -> go.Figure:
    fig.add_annotation(text=text, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper",
                       font={"size": 13, "color": "#555"}, align="center")  # fmt: skip
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    fig.update_layout(height=240)
    return fig


def knob_map_figure(
    verdicts: pd.DataFrame, *, title: str | None = None, efficiency: Efficiency = "b"
) -> go.Figure:
    """ΔA (x) against the efficiency change at the shared A (y) per knob, with interval whiskers,
    coloured by verdict, over the margin band and the quadrant labels (see the module docstring).

    ``verdicts`` has the columns of ``scalerl.db.queries.verdicts``. Knobs without a ΔA are listed in the
    subtitle with their verdict.
    """
    import plotly.graph_objects as go

    fig = go.Figure()
    fig.update_layout(
        title={"text": esc(title) if title else "Knob map: ΔA (ceiling) against the efficiency change"},
        template="plotly_white", legend={"title": {"text": "verdict"}}, height=HEIGHT,
    )  # fmt: skip
    if verdicts.empty:
        return _message(fig, "No verdicts to place: run <b>scalerl fit</b> on a sweep with a baseline.")
    frame = verdicts.reset_index(drop=True)
    d_a = frame["d_a"].to_numpy(dtype=float)
    placed_mask = np.isfinite(d_a)
    missing = frame[~placed_mask]
    not_placed = ", ".join(f"{esc(r.variant)} ({esc(r.verdict)})" for r in missing.itertuples())
    margin = float(frame["margin"].dropna().max()) if frame["margin"].notna().any() else 0.0
    if not placed_mask.any():
        return _message(
            fig, f"No knob placed: none of the {len(frame)} verdicts has a ΔA<br>"
            f"(not decided: {not_placed})<br>train further or add seeds, then rerun <b>scalerl fit</b>",
        )  # fmt: skip
    eff, eff_lo, eff_hi, eff_title = _efficiency(frame, efficiency)
    a_lo, a_hi = frame["d_a_lo"].to_numpy(dtype=float), frame["d_a_hi"].to_numpy(dtype=float)
    x_range = _span([d_a[placed_mask], a_lo[placed_mask], a_hi[placed_mask]], margin * 1.5)
    y_range = _span([eff[placed_mask], eff_lo[placed_mask], eff_hi[placed_mask]], 0.1)
    y_all = np.nan_to_num(eff, nan=0.0)
    names = [str(v) for v in frame["variant"]]
    where = np.flatnonzero(placed_mask)
    spots, _ = label_positions(
        d_a[where], y_all[where], [names[k] for k in where], x_range, y_range,
        obstacles=_quadrant_boxes(margin, x_range, y_range),
    )  # fmt: skip
    position: dict[int, str | None] = dict(zip(where.tolist(), spots, strict=True))
    hidden = sum(p is None for p in spots)
    for verdict, idx in pd.Series(range(len(frame)))[placed_mask].groupby(
        frame["verdict"][placed_mask], sort=False, observed=True
    ):
        rows = frame.iloc[idx.to_numpy()]
        color = verdict_color(verdict)
        i = idx.to_numpy()
        y = np.nan_to_num(eff[i], nan=0.0)
        no_y = ~np.isfinite(eff[i])
        open_hi = ~np.isfinite(a_hi[i]) & np.isfinite(a_lo[i])
        hover = [
            f"<b>{esc(r.variant)}</b> ({esc(r.knob)} → {esc(r.alternative)})<br>{esc(r.verdict)}"
            f"<br>ΔA={fmt(r.d_a)} {fmt_interval(r.d_a_lo, r.d_a_hi)}"
            f"<br>ΔB={fmt(r.d_b)} {fmt_interval(r.d_b_lo, r.d_b_hi)}"
            + ("<br>efficiency not measured at a shared A" if miss else "")
            for r, miss in zip(rows.itertuples(), no_y, strict=True)
        ]
        fig.add_trace(
            go.Scatter(
                x=d_a[i], y=y, mode="markers+text",
                text=[esc(v) if position[k] else "" for v, k in zip(rows["variant"], i, strict=True)],
                textposition=[position[k] or "top center" for k in i], name=esc(verdict),
                marker={"size": 12, "color": color, "line": {"width": 2, "color": color},
                        "symbol": ["circle-open" if m else "circle" for m in no_y]},
                error_x={"type": "data", "array": np.nan_to_num(a_hi[i] - d_a[i], nan=0.0),
                         "arrayminus": np.nan_to_num(d_a[i] - a_lo[i], nan=0.0), "visible": True},
                error_y={"type": "data", "array": np.nan_to_num(eff_hi[i] - eff[i], nan=0.0),
                         "arrayminus": np.nan_to_num(eff[i] - eff_lo[i], nan=0.0), "visible": True},
                hovertext=hover, hoverinfo="text",
            )
        )  # fmt: skip
        for x, yy, up in zip(d_a[i], y, open_hi, strict=True):
            if up:  # a lower bound on ΔA: the whisker runs off to the right
                fig.add_annotation(x=x_range[1], y=yy, ax=x, ay=yy, axref="x", ayref="y", xref="x", yref="y",
                                   showarrow=True, arrowhead=2, arrowcolor=color, text="")  # fmt: skip
    _quadrants(fig, margin, x_range, y_range)
    subtitle = [f"not placed (no ΔA): {not_placed}"] if not_placed else []
    if hidden:
        subtitle.append(f"{hidden} name(s) left to the hover: no room beside the marker")
    fig.update_layout(
        title={"subtitle": {"text": " · ".join(subtitle)}},
        xaxis={"title": {"text": "ΔA = A_variant − A_baseline (ceiling)"}, "range": list(x_range),
               "zeroline": False},
        yaxis={"title": {"text": eff_title}, "range": list(y_range), "zeroline": False},
        margin={"t": MARGIN_T, "b": MARGIN_B}, height=HEIGHT,
    )  # fmt: skip
    return fig


def _quadrant_labels(
    margin: float, x_range: tuple[float, float], y_range: tuple[float, float]
) -> tuple[tuple[float, float, str, str], ...]:
    right = (max(margin, 0.0) + x_range[1]) / 2
    left = (min(-margin, 0.0) + x_range[0]) / 2
    return (
        (right, y_range[1], "top", "mover up (higher ceiling)"),
        (left, y_range[1], "top", "mover down (lower ceiling)"),
        (0.0, y_range[1], "top", "↑ shaper: faster"),
        (0.0, y_range[0], "bottom", f"↓ shaper: slower<br>no effect: |ΔA| ≤ margin {fmt(margin)}, ΔB ≈ 0"),
    )


def _quadrant_boxes(
    margin: float, x_range: tuple[float, float], y_range: tuple[float, float]
) -> tuple[Box, ...]:
    """Where the quadrant labels sit, in the pixels :func:`label_positions` works in."""
    sx = PLOT_WIDTH_PX / (x_range[1] - x_range[0])
    out = []
    for x, _, anchor, text in _quadrant_labels(margin, x_range, y_range):
        lines = text.split("<br>")
        w, h = CHAR_PX * 0.92 * max(len(t) for t in lines), LINE_PX * len(lines)
        cx = (x - x_range[0]) * sx
        y0 = PLOT_HEIGHT_PX - h if anchor == "top" else 0.0
        out.append((cx - w / 2, y0, cx + w / 2, y0 + h))
    return tuple(out)


def _quadrants(
    fig: go.Figure, margin: float, x_range: tuple[float, float], y_range: tuple[float, float]
) -> None:
    grey = {"color": "#888", "size": 11}
    if margin > 0:
        fig.add_vrect(x0=-margin, x1=margin, fillcolor="#999", opacity=0.15, line_width=0)
    fig.add_hline(y=0, line={"color": "#bbb", "width": 1})
    fig.add_vline(x=0, line={"color": "#ddd", "width": 1})
    for x, y, anchor, text in _quadrant_labels(margin, x_range, y_range):
        fig.add_annotation(x=x, y=y, text=text, showarrow=False, yanchor=anchor, font=grey, opacity=0.9)
