"""The one-file HTML report: every figure, the verdict and fit tables, in a page that works offline.

The page reads top down in the order a lab asks, the answer first: what each knob did (the
verdict table, which sorts and filters in the page and links each knob to its panel; then the knob
map), then why (one panel per knob: the reward panel of :mod:`scalerl.harness.report.panels` beside
its mechanism diagnostic, with one log/linear compute switch for all panels), then what was spent
(the compute per variant), then the fit and run tables. A sweep with a single variant gets the
plain curves figure instead of panels. The tables wrap their text (long names included) so the
page reads at 1440 px without scrolling sideways.

plotly.js is embedded once, in the page's head, and so is each Plotly template the figures use
(every figure would otherwise carry its own copy of ``plotly_white``, ~7 kB); traces are
downsampled for drawing, so the file grows far slower than the points. Every piece of user text
on the page is HTML-escaped (:func:`esc`); the figures' JSON is written with ``<``, ``>``, ``&``
and the two JavaScript line separators as ``\\u`` escapes (:func:`_script_json`), so a name
containing ``</script>`` cannot close the script tag it sits in. The page never shows the database
URL: only the store's backend name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import pandas as pd

from scalerl.harness.execution.codechange import mixed_warning, versions_in
from scalerl.harness.execution.provenance import short
from scalerl.harness.report._style import AXIS_LABELS, esc, fmt, fmt_interval
from scalerl.harness.report.curves import curves_figure
from scalerl.harness.report.knobmap import knob_map_figure
from scalerl.harness.report.overview import latest_values, overview_figure, status_line
from scalerl.harness.report.panels import KnobPanel, knob_panels
from scalerl.harness.report.verdicts import verdict_table_html

if TYPE_CHECKING:
    import plotly.graph_objects as go

FitsSource = Literal["store", "computed", "missing"]

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px 32px; color: #222; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; } h2 { font-size: 1.2em; margin-top: 1.6em; }
.meta { color: #555; } .notice { background: #fff4d6; border: 1px solid #e0b84c; padding: 8px 12px; }
table { border-collapse: collapse; font-size: 0.88em; margin-top: 0.5em; max-width: 100%; }
th, td { border: 1px solid #ddd; padding: 4px 8px; text-align: left; vertical-align: top; }
td { overflow-wrap: anywhere; } th { overflow-wrap: normal; }
th { background: #f4f4f4; } code { background: #f4f4f4; padding: 0 3px; }
.figure { margin-top: 0.5em; }
.knob-panel { border-top: 1px solid #ddd; padding-top: 6px; margin-top: 10px; }
.panel-row { display: grid; grid-template-columns: minmax(0, 2fr) minmax(0, 1fr); gap: 8px; }
@media (max-width: 900px) { .panel-row { grid-template-columns: minmax(0, 1fr); } }
.controls { margin: 6px 0; } .controls button.active { font-weight: bold; background: #dde6ff; }
table.verdicts th { cursor: pointer; }
table.verdicts { width: 100%; } table.verdicts td:last-child { min-width: 16em; }
table.verdicts td:nth-child(-n+4) { min-width: 5.5em; } /* names wrap, anywhere if they must */
table.verdicts td:nth-child(n+5):nth-child(-n+13) { white-space: nowrap; } /* numbers never break */
table.verdicts th[data-sort=asc]::after { content: " ▲"; }
table.verdicts th[data-sort=desc]::after { content: " ▼"; } :target { outline: 2px solid #e0b84c; }
"""

# The page's own script: the compute-scale switch for every panel, and the verdict table's sort and
# filter. It reads only the DOM (no user text is ever written into it).
_JS = r"""
function scalerlAxis(type) {
  document.querySelectorAll('.knob-panel .reward .js-plotly-plot').forEach(function (el) {
    Plotly.relayout(el, {'xaxis.type': type});
  });
  document.querySelectorAll('.axis-toggle button').forEach(function (b) {
    b.classList.toggle('active', b.dataset.type === type);
  });
}
(function () {
  var table = document.querySelector('table.verdicts');
  if (!table) return;
  var body = table.tBodies[0], text = document.getElementById('verdict-filter'),
      kind = document.getElementById('verdict-kind');
  function apply() {
    var q = text.value.toLowerCase(), k = kind.value;
    Array.prototype.forEach.call(body.rows, function (r) {
      var ok = (!k || r.dataset.verdict === k) && r.textContent.toLowerCase().indexOf(q) >= 0;
      r.style.display = ok ? '' : 'none';
    });
  }
  text.addEventListener('input', apply);
  kind.addEventListener('change', apply);
  function key(r, i) {
    var t = r.cells[i].textContent.trim(), x = parseFloat(t.replace(/^\[/, ''));
    return isNaN(x) ? t : x;
  }
  Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, i) {
    th.addEventListener('click', function () {
      var asc = th.dataset.sort !== 'asc';
      Array.prototype.forEach.call(table.tHead.rows[0].cells, function (h) { delete h.dataset.sort; });
      th.dataset.sort = asc ? 'asc' : 'desc';
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = key(a, i), y = key(b, i), c;
        if (typeof x === typeof y) c = x < y ? -1 : x > y ? 1 : 0;
        else c = typeof x === 'number' ? -1 : 1;  // numbers before dashes and text
        return asc ? c : -c;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
})();
"""


@dataclass(frozen=True)
class ReportData:
    """Everything the page shows, already loaded; frames have the ``scalerl.db.queries`` columns."""

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


# Inside a JSON string these read the same; in a <script> element they cannot end it or a line.
_SCRIPT_ESCAPES = str.maketrans(
    {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
)


def _script_json(value: Any) -> str:
    """JSON that is safe inside a ``<script>`` element: no ``</script>`` can close it."""
    import json

    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).translate(_SCRIPT_ESCAPES)


class _Figures:
    """Each figure as a ``div`` and a ``Plotly.newPlot`` call; the templates they use, once."""

    def __init__(self) -> None:
        self.templates: dict[str, int] = {}  # the template's JSON -> its index in scalerlTemplates
        self.count = 0

    def html(self, fig: go.Figure) -> str:
        import json

        import plotly.io as pio

        spec = json.loads(pio.to_json(fig, validate=False))
        layout = spec.get("layout", {})
        template = layout.pop("template", None)
        key = json.dumps(template, sort_keys=True, separators=(",", ":")) if template else ""
        if key and key not in self.templates:
            self.templates[key] = len(self.templates)
        self.count += 1
        div = f"scalerl-fig-{self.count}"
        height = int(layout.get("height") or 450)
        tmpl = f"Object.assign({{template: scalerlTemplates[{self.templates[key]}]}}, L)" if key else "L"
        config = _script_json({"displaylogo": False, "responsive": True})
        return (
            f'<div id="{div}" class="plotly-graph-div" style="height:{height}px; width:100%;"></div>'
            f"<script>(function () {{ var L = {_script_json(layout)}; "
            f'Plotly.newPlot("{div}", {_script_json(spec.get("data", []))}, {tmpl}, {config}); }})();'
            "</script>"
        )

    def head(self) -> str:
        """plotly.js and the templates, for the page's ``<head>``."""
        import json

        from plotly.offline import get_plotlyjs

        templates = [json.loads(k) for k in sorted(self.templates, key=self.templates.__getitem__)]
        return (
            f'<script type="text/javascript">{get_plotlyjs()}</script>'
            f"<script>var scalerlTemplates = {_script_json(templates)};</script>"
        )


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
    headers = ("run", "variant", "seed", "status", "attempts", "code", "points", f"latest {esc(metric)}",
               f"latest {esc(AXIS_LABELS.get(axis, axis))}", "error")  # fmt: skip
    rows = []
    for _, r in runs.iterrows():
        rid = r.get("run_id")
        value, spent = last.get(str(rid), (None, None))
        prov = r.get("provenance")
        cells = (
            esc(rid), esc(r.get("variant")), esc(r.get("seed")), esc(r.get("status")),
            esc(r.get("attempts")), esc(short(prov if isinstance(prov, dict) else None)),
            esc(r.get("n_points")), fmt(value, 4), fmt(spent), esc(r.get("error")),
        )  # fmt: skip
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    head = "".join(f"<th>{h}</th>" for h in headers)
    return f'<table class="runs"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _code_line(provs: Any) -> str:
    """``code 1a2b3c4+dirty · `` for the meta line: the code versions the runs were made by."""
    versions = versions_in(provs)
    if not versions:
        return ""
    shown = ", ".join(label if len(versions) == 1 else f"{label} ({n})" for label, n in versions)
    return f"code {esc(shown)} · "


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


def _verdicts_html(verdicts: pd.DataFrame, linked: bool) -> str:
    kinds = sorted(map(str, verdicts["verdict"].dropna().unique()))
    options = "".join(f'<option value="{esc(k)}">{esc(k)}</option>' for k in kinds)
    controls = (
        '<div class="controls"><input id="verdict-filter" type="search" placeholder="filter rows" '
        f'aria-label="filter verdicts"> <select id="verdict-kind" aria-label="verdict">'
        f'<option value="">every verdict</option>{options}</select> '
        '<span class="meta">click a header to sort; a knob opens its panel</span></div>'
    )
    return "<h2>Verdicts</h2>" + controls + verdict_table_html(verdicts, link_panels=linked)


def _panel_html(panel: KnobPanel, figure: Callable[[go.Figure], str]) -> str:
    return (
        f'<section class="knob-panel" id="{panel.anchor}" data-variant="{esc(panel.variant)}">'
        f'<div class="panel-row"><div class="reward">{figure(panel.reward)}</div>'
        f'<div class="mechanism">{figure(panel.mechanism)}</div></div></section>'
    )


def render_html(data: ReportData) -> str:
    """The whole report as one self-contained HTML string (see the module docstring)."""
    n_runs = len(data.runs)
    sections: list[str] = []
    figures = _Figures()

    def figure(fig: go.Figure) -> str:
        return f'<div class="figure">{figures.html(fig)}</div>'

    panels: list[KnobPanel] = []
    if not data.curves.empty:
        panels = knob_panels(
            data.curves, data.fits, data.verdicts, data.diagnostics, metric=data.metric, axis=data.axis,
            max_points_per_run=data.max_points_per_run, log_x=True,
        )  # fmt: skip
    if not data.verdicts.empty:
        sections.append(_verdicts_html(data.verdicts, linked=bool(panels)))
        sections.append("<h2>Knob map</h2>" + figure(knob_map_figure(data.verdicts)))
    else:
        sections.append("<h2>Verdicts</h2><p>No verdicts for this sweep.</p>")
    if panels:
        sections.append(
            "<h2>One panel per knob</h2>"
            '<p class="meta">Points: each seed. Solid: the pooled fit over its window (dotted line: '
            "where the window starts). Dashed and shaded: the forecast beyond the data with its "
            "90% interval. Every panel shares one y range. Beside each: the diagnostic that shows "
            'the knob acted.</p><div class="controls axis-toggle">compute axis: '
            '<button type="button" data-type="linear" onclick="scalerlAxis(\'linear\')">linear</button> '
            '<button type="button" data-type="log" class="active" onclick="scalerlAxis(\'log\')">log</button>'
            "</div>" + "".join(_panel_html(p, figure) for p in panels)
        )  # fmt: skip
    elif not data.curves.empty:
        sections.append("<h2>Curves, fits and extrapolations</h2>" + figure(curves_figure(
            data.curves, data.fits, metric=data.metric, axis=data.axis,
            max_points_per_run=data.max_points_per_run, log_x=True)))  # fmt: skip
    else:
        sections.append("<h2>Curves</h2><p>No points recorded for this sweep yet.</p>")
    if n_runs:  # what was spent comes after the answer and its reasons
        sections.append("<h2>Compute spent</h2>" + figure(
            overview_figure(data.runs, data.curves, metric=data.metric, axis=data.axis)))  # fmt: skip
    sections.append("<h2>Fits</h2>" + _fits_table_html(data.fits, data.metric, data.axis))
    if n_runs:
        sections.append("<h2>Runs</h2>" + _runs_table_html(data.runs, data.curves, data.metric, data.axis))
    notes = "".join(f'<p class="meta">{esc(n)}</p>' for n in data.notes)
    provs = data.runs.get("provenance", ())
    mixed = mixed_warning(provs)
    if mixed:  # first thing under the title: every verdict on the page is affected
        notes = f'<p class="notice code-mixed">{esc(mixed)}</p>' + notes
    title = f"scalerl report: {esc(data.sweep)}"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{title}</title><style>{_CSS}</style>{figures.head() if figures.count else ''}</head><body>"
        f"<h1>{title}</h1>"
        f'<p class="meta">metric <code>{esc(data.metric)}</code> against '
        f"{esc(AXIS_LABELS.get(data.axis, data.axis))} · {status_line(data.runs)} · "
        f"{_code_line(provs)}store: {esc(data.store_kind)} · generated {esc(data.generated_at)}</p>"
        f"{_fits_notice(data)}{notes}{''.join(sections)}<script>{_JS}</script></body></html>\n"
    )
