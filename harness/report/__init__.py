"""Reports: Plotly figures of a sweep and the one-file offline HTML report.

- :mod:`scalerl.harness.report.figures`: ``curves_figure``, ``knob_map_figure``, ``verdict_table_figure``,
  ``overview_figure`` (each from the store's DataFrames, returning a Plotly figure).
- :mod:`scalerl.harness.report.document`: ``ReportData`` and ``render_html`` (the self-contained page).
- :mod:`scalerl.harness.report.build`: ``load_report_data`` (read a sweep from the store; compute fits
  when ``scalerl fit`` has not stored any).

Importing this package imports neither plotly nor the store; the submodules do when used.
"""
