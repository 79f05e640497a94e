"""The one-file HTML page: plotly.js once, every figure, escaped text, no store URL."""

from __future__ import annotations

import re

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from plotly.offline import get_plotlyjs

from scalerl.harness.report._style import anchor_id
from scalerl.harness.report.document import ReportData, render_html
from tests.unit.report.frames import curves_frame, fits_frame, runs_frame, verdicts_frame

EVIL = "</script><script>window.__scalerl_injected=1</script>"


def report_data(**over: object) -> ReportData:
    curves = curves_frame(n_points=30, seeds=2)
    curves["run_id"] = curves["run_id"].where(curves["run_id"] != "loo-dapo-s1", EVIL)
    verdicts = verdicts_frame()
    verdicts.loc[0, "reason"] = EVIL
    fields: dict[str, object] = {
        "sweep": "loo <b>sweep</b>", "metric": "val/pass_rate", "axis": "flops",
        "runs": runs_frame(curves), "curves": curves, "fits": fits_frame(), "verdicts": verdicts,
        "fits_source": "store", "store_kind": "sqlite", "generated_at": "2026-11-22 05:00 UTC",
    }  # fmt: skip
    fields.update(over)
    return ReportData(**fields)  # type: ignore[arg-type]


def figure_calls(page: str) -> int:
    """``Plotly.newPlot(`` calls of the page's figures: some plotly.js builds (5.23's) name the call
    in their own text too, so the embedded library's count is taken off."""
    return page.count("Plotly.newPlot(") - get_plotlyjs().count("Plotly.newPlot(")


def test_page_embeds_plotlyjs_once_and_every_figure() -> None:
    page = render_html(report_data())
    # plotly.min.js starts with its licence banner; it must be there exactly once.
    assert page.count("plotly.js v") == 1
    # Overview, knob map, and per knob (loo-dapo, loo-savg) a reward and a mechanism figure.
    assert page.count('class="plotly-graph-div"') == 6
    assert figure_calls(page) == 6
    assert page.count('<section class="knob-panel"') == 2
    # The verdict table lists both variants with their ΔA, and each knob links to its panel.
    table = page[page.index('<table class="verdicts">') :]
    assert "<td>loo-dapo</td>" in table and "<td>-0.100</td>" in table
    for variant, knob in (("loo-dapo", "loss"), ("loo-savg", "loss_aggregation")):
        anchor = anchor_id(variant)
        assert f'<td><a href="#{anchor}">{knob}</a></td>' in table
        assert f'<section class="knob-panel" id="{anchor}" data-variant="{variant}">' in page
    assert '<tr data-verdict="asymptote-mover"' in table
    # One line of run statuses instead of a bar chart of them.
    assert "6 runs: 3 completed, 3 running" in page


def test_a_single_variant_sweep_gets_the_curves_figure_instead_of_panels() -> None:
    curves = curves_frame(n_points=20, seeds=2)
    curves = curves[curves["variant"] == "baseline"]
    page = render_html(
        report_data(curves=curves, runs=runs_frame(curves), verdicts=verdicts_frame().iloc[0:0])
    )
    assert "knob-panel" not in page.replace(".knob-panel", "")
    assert "Curves, fits and extrapolations" in page and figure_calls(page) == 2


def test_user_text_cannot_open_or_close_a_script() -> None:
    page = render_html(report_data())
    # Only the page's own script tags: plotly.js, the templates, one per figure and the page script.
    opens = [m.start() for m in re.finditer(r"<script", page)]
    closes = page.count("</script>")
    assert len(opens) == closes
    assert "__scalerl_injected=1</script>" not in page
    assert "&lt;/script&gt;&lt;script&gt;window.__scalerl_injected=1" in page  # the table reason
    assert "loo &lt;b&gt;sweep&lt;/b&gt;" in page
    # The run name rides in the figure JSON HTML-escaped (for plotly.js, which renders a subset of
    # HTML), and the page writes that JSON with "<", ">" and "&" as \u escapes.
    assert "\\u0026lt;/script\\u0026gt;\\u0026lt;script\\u0026gt;window.__scalerl_injected=1" in page
    # Defence in depth: even unescaped text cannot close a script tag through the page's JSON.
    from scalerl.harness.report.document import _script_json

    raw = _script_json({"name": EVIL})
    assert "</script>" not in raw and "<" not in raw and "\\u003c/script\\u003e" in raw
    assert "</script>" not in pio.to_json(go.Figure(go.Scatter(x=[1], y=[1], name=EVIL)))


def test_missing_fits_are_announced_and_no_url_leaks() -> None:
    no_fits = pd.DataFrame(columns=fits_frame().columns)
    no_verdicts = pd.DataFrame(columns=verdicts_frame().columns)
    page = render_html(report_data(fits=no_fits, verdicts=no_verdicts, fits_source="missing"))
    assert "<code>scalerl fit loo &lt;b&gt;sweep&lt;/b&gt;</code> has not been run" in page
    assert "No verdicts for this sweep." in page
    computed = render_html(report_data(fits_source="computed"))
    assert "computed for this report and are not stored" in computed
    assert "sqlite:///" not in page and "store: sqlite" in page
