"""Verdict figures: the knob map (ΔA against ΔB with intervals) and the verdict table.

Built from ``db.queries.verdicts`` frames. Every verdict carries its numbers, so a reader can
disagree: the map shows each variant's ΔA and ΔB with their intervals and the ±margin band on A
inside which a knob does not move the ceiling; the table lists the numbers and the reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from harness.report._style import VERDICT_COLORS, esc, fmt, fmt_interval, verdict_color

if TYPE_CHECKING:
    import plotly.graph_objects as go

# Table columns: (header, how to render a row).
_TABLE_HEADERS: tuple[str, ...] = (
    "knob", "variant", "alternative", "verdict", "ΔA", "ΔA interval", "ΔB", "ΔB interval",
    "A base", "A variant", "margin", "MDE ΔA", "MDE ΔB", "reason",
)  # fmt: skip


def _table_cells(row: pd.Series) -> list[str]:
    """One escaped cell string per header (numbers formatted, text HTML-escaped)."""
    return [
        esc(row.get("knob")), esc(row.get("variant")), esc(row.get("alternative")),
        esc(row.get("verdict")), fmt(row.get("d_a")),
        fmt_interval(row.get("d_a_lo"), row.get("d_a_hi")), fmt(row.get("d_b")),
        fmt_interval(row.get("d_b_lo"), row.get("d_b_hi")), fmt(row.get("a_base")),
        fmt(row.get("a_variant")), fmt(row.get("margin")), fmt(row.get("mde_a")),
        fmt(row.get("mde_b")), esc(row.get("reason")),
    ]  # fmt: skip


def _errors(frame: pd.DataFrame, col: str) -> tuple[np.ndarray, np.ndarray]:
    mid = frame[col].to_numpy(dtype=float)
    lo = frame[f"{col}_lo"].to_numpy(dtype=float)
    hi = frame[f"{col}_hi"].to_numpy(dtype=float)
    # Missing interval ends draw no whisker rather than a misleading zero-width one.
    return np.nan_to_num(hi - mid, nan=0.0), np.nan_to_num(mid - lo, nan=0.0)


def knob_map_figure(verdicts: pd.DataFrame, *, title: str | None = None) -> go.Figure:
    """ΔA (x) against ΔB (y) per variant, with interval whiskers, coloured by verdict.

    A vertical band marks |ΔA| ≤ margin. Variants without a ΔA (unfit) are listed in the
    title's subtitle rather than placed at a made-up position.
    """
    import plotly.graph_objects as go

    fig = go.Figure()
    frame = verdicts.copy()
    placed = frame[frame["d_a"].notna()]
    missing = frame[frame["d_a"].isna()]
    for verdict, group in placed.groupby("verdict", sort=False):
        ax_plus, ax_minus = _errors(group, "d_a")
        y = group["d_b"].to_numpy(dtype=float)
        # A variant with ΔA but no ΔB (an asymptote-mover is not refit at a shared A) sits on 0.
        y_drawn = np.nan_to_num(y, nan=0.0)
        by_plus, by_minus = _errors(group, "d_b")
        hover = [
            f"<b>{esc(r.variant)}</b> ({esc(r.knob)} → {esc(r.alternative)})<br>{esc(r.verdict)}"
            f"<br>ΔA={fmt(r.d_a)} {fmt_interval(r.d_a_lo, r.d_a_hi)}"
            f"<br>ΔB={fmt(r.d_b)} {fmt_interval(r.d_b_lo, r.d_b_hi)}<br>{esc(r.reason)}"
            for r in group.itertuples()
        ]
        fig.add_trace(
            go.Scatter(
                x=group["d_a"].to_numpy(dtype=float), y=y_drawn, mode="markers+text",
                text=[esc(v) for v in group["variant"]], textposition="top center",
                name=esc(verdict), marker={"size": 11, "color": verdict_color(verdict)},
                error_x={"type": "data", "array": ax_plus, "arrayminus": ax_minus, "visible": True},
                error_y={"type": "data", "array": by_plus, "arrayminus": by_minus, "visible": True},
                hovertext=hover, hoverinfo="text",
            )
        )  # fmt: skip
    margin = float(frame["margin"].dropna().max()) if frame["margin"].notna().any() else None
    if margin is not None:
        fig.add_vrect(
            x0=-margin, x1=margin, fillcolor="#999", opacity=0.15, line_width=0,
            annotation_text=f"|ΔA| ≤ margin {fmt(margin)}", annotation_position="top left",
        )  # fmt: skip
    fig.add_hline(y=0, line={"color": "#bbb", "width": 1})
    subtitle = ""
    if not missing.empty:
        subtitle = "not placed (no ΔA): " + ", ".join(esc(v) for v in missing["variant"])
    fig.update_layout(
        title={"text": esc(title) if title else "Knob map: ΔA (ceiling) against ΔB (efficiency)",
               "subtitle": {"text": subtitle}},
        xaxis={"title": {"text": "ΔA = A_variant − A_baseline"}, "zeroline": True},
        yaxis={"title": {"text": "ΔB = B_variant − B_baseline (at shared A)"}},
        template="plotly_white", legend={"title": {"text": "verdict"}},
    )  # fmt: skip
    return fig


def verdict_table_figure(verdicts: pd.DataFrame) -> go.Figure:
    """The verdict table as a Plotly table (cells escaped); rows coloured by verdict."""
    import plotly.graph_objects as go

    rows = [_table_cells(r) for _, r in verdicts.iterrows()]
    columns = [list(col) for col in zip(*rows, strict=True)] if rows else [[] for _ in _TABLE_HEADERS]
    fill = [_tint(verdict_color(v)) for v in verdicts.get("verdict", pd.Series(dtype=str))]
    fig = go.Figure(
        go.Table(
            header={"values": [f"<b>{h}</b>" for h in _TABLE_HEADERS], "align": "left"},
            cells={"values": columns, "align": "left", "fill": {"color": [fill] * len(_TABLE_HEADERS)}},
        )
    )
    fig.update_layout(margin={"l": 10, "r": 10, "t": 30, "b": 10}, height=120 + 32 * len(rows))
    return fig


def verdict_table_html(verdicts: pd.DataFrame) -> str:
    """The verdict table as an HTML ``<table>``; every cell HTML-escaped."""
    head = "".join(f"<th>{esc(h)}</th>" for h in _TABLE_HEADERS)
    body = []
    for _, row in verdicts.iterrows():
        # Cells are already escaped by _table_cells; nothing raw goes into the markup.
        cells = "".join(f"<td>{c}</td>" for c in _table_cells(row))
        color = _tint(verdict_color(row.get("verdict")))
        body.append(f'<tr style="background:{color}">{cells}</tr>')
    return f'<table class="verdicts"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _tint(hex_color: str, alpha: float = 0.18) -> str:
    r, g, b = (int(hex_color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


__all__ = ["VERDICT_COLORS", "knob_map_figure", "verdict_table_figure", "verdict_table_html"]
