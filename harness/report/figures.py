"""The public figure API: each takes the store's DataFrames and returns a ``plotly`` Figure.

``db.queries.curves/fits/verdicts/runs`` give the frames; tests and notebooks may pass frames they
build themselves with the same columns (see ``docs/architecture.md``). Plotly is imported when a
figure is built, not when this module is imported.
"""

from __future__ import annotations

from harness.report.curves import curves_figure
from harness.report.overview import overview_figure
from harness.report.verdicts import knob_map_figure, verdict_table_figure, verdict_table_html

__all__ = [
    "curves_figure",
    "knob_map_figure",
    "overview_figure",
    "verdict_table_figure",
    "verdict_table_html",
]
