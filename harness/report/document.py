"""The one-file HTML report: every figure, the verdict and fit tables, in a page that works offline.

plotly.js is embedded once, with the first figure (``include_plotlyjs=True``), and the other
figures reuse it. Every piece of user text on the page is HTML-escaped (:func:`esc`); the figures'
JSON goes through Plotly's serializer, which writes ``<``, ``>`` and ``/`` as ``\\u`` escapes, so a
name containing ``</script>`` cannot close the script tag it sits in. The page never shows the
database URL: only the store's backend name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import pandas as pd

from harness.report._style import AXIS_LABELS, esc, fmt, fmt_interval
from harness.report.curves import curves_figure
from harness.report.diagnostics import diagnostics_figure
from harness.report.overview import latest_values, overview_figure
from harness.report.verdicts import knob_map_figure, verdict_table_html

if TYPE_CHECKING:
    import plotly.graph_objects as go

FitsSource = Literal["store", "computed", "missing"]

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px 32px; color: #222; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; } h2 { font-size: 1.2em; margin-top: 1.6em; }
.meta { color: #555; } .notice { background: #fff4d6; border: 1px solid #e0b84c; padding: 8px 12px; }
table { border-collapse: collapse; font-size: 0.88em; margin-top: 0.5em; }
th, td { border: 1px solid #ddd; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f4f4f4; } code { background: #f4f4f4; padding: 0 3px; }
.figure { margin-top: 0.5em; }
"""


@dataclass(frozen=True)
class ReportData:
    """Everything the page shows, already loaded; frames have the ``db.queries`` columns."""

    sweep: str
    metric: str
    axis: str
    runs: pd.DataFrame
    curves: pd.DataFrame
    fits: pd.DataFrame
    verdicts: pd.DataFrame
    fits_source: FitsSource
    store_kind: str  # backend name only ("sqlite", "postgresql"), never the URL
    generated_at: str
    notes: tuple[str, ...] = field(default_factory=tuple)
    max_points_per_run: int = 400
    diagnostics: pd.DataFrame = field(default_factory=pd.DataFrame)  # diag/* points (curves columns)


def _figure_html(fig: go.Figure, first: bool) -> str:
    import plotly.io as pio

    return str(
        pio.to_html(
            fig, full_html=False, include_plotlyjs=first, default_width="100%",
            config={"displaylogo": False, "responsive": True},
        )
    )  # fmt: skip


def _fits_table_html(fits: pd.DataFrame, metric: str, axis: str) -> str:
    if fits.empty:
        return "<p>No fits.</p>"
    f = fits[(fits["metric"] == metric) & (fits["axis"] == axis)]
    headers = ("variant", "run", "status", "A", "A interval", "B", "B interval", "C_mid",
               "C_mid interval", "R0", "RMSE", "points", "method", "reason")  # fmt: skip
    rows = []
    for _, r in f.sort_values(["variant", "run_id"], na_position="first").iterrows():
        run = "pooled" if pd.isna(r.get("run_id")) else esc(r.get("run_id"))
        cells = (
            esc(r.get("variant")), run, esc(r.get("status")), fmt(r.get("a")),
            fmt_interval(r.get("a_lo"), r.get("a_hi")), fmt(r.get("b")),
            fmt_interval(r.get("b_lo"), r.get("b_hi")), fmt(r.get("c_mid")),
            fmt_interval(r.get("c_mid_lo"), r.get("c_mid_hi")), fmt(r.get("r0")), fmt(r.get("rmse"), 4),
            esc(r.get("n_points")), esc(r.get("method")), esc(r.get("reason")),
        )  # fmt: skip
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    head = "".join(f"<th>{h}</th>" for h in headers)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _runs_table_html(runs: pd.DataFrame, curves: pd.DataFrame, metric: str, axis: str) -> str:
    last = {
        str(r.run_id): (r.value, getattr(r, axis)) for r in latest_values(curves, metric, axis).itertuples()
    }
    headers = ("run", "variant", "seed", "status", "attempts", "points", f"latest {esc(metric)}",
               f"latest {esc(AXIS_LABELS.get(axis, axis))}", "error")  # fmt: skip
    rows = []
    for _, r in runs.iterrows():
        rid = r.get("run_id")
        value, spent = last.get(str(rid), (None, None))
        cells = (
            esc(rid), esc(r.get("variant")), esc(r.get("seed")), esc(r.get("status")),
            esc(r.get("attempts")), esc(r.get("n_points")), fmt(value, 4), fmt(spent), esc(r.get("error")),
        )  # fmt: skip
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    head = "".join(f"<th>{h}</th>" for h in headers)
    return f'<table class="runs"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _fits_notice(data: ReportData) -> str:
    sweep = esc(data.sweep)
    if data.fits_source == "store":
        return ""
    if data.fits_source == "computed":
        return (
            '<p class="notice">Fits and verdicts on this page were computed for this report and '
            f"are not stored: <code>scalerl fit {sweep}</code> has not been run for this metric and "
            "axis.</p>"
        )
    return (
        f'<p class="notice"><code>scalerl fit {sweep}</code> has not been run and no fits could be '
        "computed from the points yet: the page shows the raw curves only.</p>"
    )


def render_html(data: ReportData) -> str:
    """The whole report as one self-contained HTML string."""
    n_runs = len(data.runs)
    by_status = data.runs["status"].astype(str).value_counts() if n_runs else pd.Series(dtype=int)
    status_text = ", ".join(f"{esc(k)}: {int(v)}" for k, v in sorted(by_status.items()))
    sections: list[str] = []
    first = True

    def add_figure(heading: str, fig: go.Figure) -> None:
        nonlocal first
        sections.append(f'<h2>{heading}</h2><div class="figure">{_figure_html(fig, first)}</div>')
        first = False

    if n_runs:
        add_figure("Overview", overview_figure(data.runs, data.curves, metric=data.metric, axis=data.axis))
    if not data.curves.empty:
        add_figure(
            "Curves, fits and extrapolations",
            curves_figure(
                data.curves, data.fits, metric=data.metric, axis=data.axis,
                max_points_per_run=data.max_points_per_run, log_x=True,
            ),
        )  # fmt: skip
    else:
        sections.append("<h2>Curves</h2><p>No points recorded for this sweep yet.</p>")
    if not data.diagnostics.empty:
        add_figure("Mechanism diagnostics (mean over seeds)", diagnostics_figure(data.diagnostics))
    if not data.verdicts.empty:
        add_figure("Knob map", knob_map_figure(data.verdicts))
        sections.append("<h2>Verdicts</h2>" + verdict_table_html(data.verdicts))
    else:
        sections.append("<h2>Verdicts</h2><p>No verdicts for this sweep.</p>")
    sections.append("<h2>Fits</h2>" + _fits_table_html(data.fits, data.metric, data.axis))
    if n_runs:
        sections.append("<h2>Runs</h2>" + _runs_table_html(data.runs, data.curves, data.metric, data.axis))
    notes = "".join(f'<p class="meta">{esc(n)}</p>' for n in data.notes)
    title = f"scalerl report: {esc(data.sweep)}"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{title}</title><style>{_CSS}</style></head><body>"
        f"<h1>{title}</h1>"
        f'<p class="meta">metric <code>{esc(data.metric)}</code> against '
        f"{esc(AXIS_LABELS.get(data.axis, data.axis))} · {n_runs} runs ({status_text}) · "
        f"store: {esc(data.store_kind)} · generated {esc(data.generated_at)}</p>"
        f"{_fits_notice(data)}{notes}{''.join(sections)}</body></html>\n"
    )
