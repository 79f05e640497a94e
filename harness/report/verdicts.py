"""The verdict table, as a Plotly table (notebooks) or an HTML table that sorts and filters.

Built from ``scalerl.db.queries.verdicts`` frames. Every verdict carries its numbers, so a reader can
disagree: the table lists how sure the rule is of each claim, ΔA, ΔB and Δlog C_mid with their
intervals, the margin, the smallest detectable effects and the reason. In the HTML report each
row's knob links to its panel, every header sorts (numbers as numbers), and the page's filter box
and verdict menu hide rows (see
:mod:`scalerl.harness.report.document`). The knob map lives in :mod:`scalerl.harness.report.knobmap`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from scalerl.harness.report._style import VERDICT_COLORS, anchor_id, esc, fmt, fmt_interval, verdict_color
from scalerl.harness.report.knobmap import knob_map_figure

if TYPE_CHECKING:
    import plotly.graph_objects as go

# Table columns: (header, how to render a row).
# After the original columns, before the reason: "Δlog C_mid interval" (efficiency's second
# parameter), "P ceiling" / "P efficiency" (how sure the rule is of each claim: 1 - its
# false-discovery-adjusted p-value over the sweep's knobs) and "efficiency" ("differs" when that
# claim is made, on a mover: the knob is both; "same" when equivalence is shown).
_TABLE_HEADERS: tuple[str, ...] = (
    "knob", "variant", "alternative", "verdict", "ΔA", "ΔA interval", "ΔB", "ΔB interval",
    "A base", "A variant", "margin", "MDE ΔA", "MDE ΔB", "Δlog C_mid interval", "P ceiling",
    "P efficiency", "efficiency", "reason",
)  # fmt: skip


def _table_cells(row: pd.Series) -> list[str]:
    """One escaped cell string per header (numbers formatted, text HTML-escaped)."""
    return [
        esc(row.get("knob")), esc(row.get("variant")), esc(row.get("alternative")),
        esc(row.get("verdict")), fmt(row.get("d_a")),
        fmt_interval(row.get("d_a_lo"), row.get("d_a_hi")), fmt(row.get("d_b")),
        fmt_interval(row.get("d_b_lo"), row.get("d_b_hi")), fmt(row.get("a_base")),
        fmt(row.get("a_variant")), fmt(row.get("margin")), fmt(row.get("mde_a")),
        fmt(row.get("mde_b")), fmt_interval(row.get("d_log_c_mid_lo"), row.get("d_log_c_mid_hi")),
        fmt(row.get("p_ceiling")), fmt(row.get("p_efficiency")), esc(row.get("efficiency")),
        esc(row.get("reason")),
    ]  # fmt: skip


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


def verdict_table_html(verdicts: pd.DataFrame, *, link_panels: bool = False) -> str:
    """The verdict table as an HTML ``<table>``; every cell HTML-escaped. Each row carries its
    verdict in ``data-verdict`` (the page's filter reads it); with ``link_panels`` the knob cell
    links to the variant's panel (``#`` + :func:`anchor_id`)."""
    head = "".join(f'<th data-col="{i}" title="sort">{esc(h)}</th>' for i, h in enumerate(_TABLE_HEADERS))
    body = []
    for _, row in verdicts.iterrows():
        # Cells are already escaped by _table_cells; nothing raw goes into the markup.
        cells = _table_cells(row)
        if link_panels:
            cells[0] = f'<a href="#{anchor_id(row.get("variant"))}">{cells[0] or "panel"}</a>'
        tds = "".join(f"<td>{c}</td>" for c in cells)
        color = _tint(verdict_color(row.get("verdict")))
        body.append(f'<tr data-verdict="{esc(row.get("verdict"))}" style="background:{color}">{tds}</tr>')
    return f'<table class="verdicts"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _tint(hex_color: str, alpha: float = 0.18) -> str:
    r, g, b = (int(hex_color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


__all__ = ["VERDICT_COLORS", "knob_map_figure", "verdict_table_figure", "verdict_table_html"]
