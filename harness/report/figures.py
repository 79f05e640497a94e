"""The public figure API: each takes the store's DataFrames and returns a ``plotly`` Figure.

``scalerl.db.queries.curves/fits/verdicts/runs`` give the frames; tests and notebooks may pass frames they
build themselves with the same columns (see ``docs/architecture.md``). Plotly is imported when a
figure is built, not when this module is imported. The HTML report is made of exactly these:

- :func:`overview_figure`: compute spent per variant (run statuses in its title);
- :func:`knob_map_figure`: ΔA against the efficiency change, per knob;
- :func:`knob_panels` / :func:`knob_panel_figure`: one reward panel per knob (baseline against
  the variant: points, fits, forecast band, window, parameters and verdict) and, beside it,
  :func:`mechanism_figure`, the diagnostic that shows the knob acted;
- :func:`knob_panels_figure`: all of those panels in one figure, a row per knob (notebooks);
- :func:`verdict_table_figure` / :func:`verdict_table_html`: the verdicts with their numbers;
- :func:`curves_figure` and :func:`diagnostics_figure`: every variant in one axis, every
  diagnostic in small multiples (notebooks; the page uses the curves figure for one variant).
"""

from __future__ import annotations

from scalerl.harness.report.curves import curves_figure
from scalerl.harness.report.diagnostics import diagnostics_figure, mechanism_figure
from scalerl.harness.report.grid import knob_panels_figure
from scalerl.harness.report.knobmap import knob_map_figure
from scalerl.harness.report.overview import overview_figure
from scalerl.harness.report.panels import KnobPanel, knob_panel_figure, knob_panels
from scalerl.harness.report.verdicts import verdict_table_figure, verdict_table_html

__all__ = [
    "KnobPanel",
    "curves_figure",
    "diagnostics_figure",
    "knob_map_figure",
    "knob_panel_figure",
    "knob_panels",
    "knob_panels_figure",
    "mechanism_figure",
    "overview_figure",
    "verdict_table_figure",
    "verdict_table_html",
]
