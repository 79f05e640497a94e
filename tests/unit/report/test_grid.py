"""All knob panels in one notebook figure: the same traces and numbers, one switch for all."""

from __future__ import annotations

import pandas as pd

from scalerl.harness.report.grid import knob_panels_figure
from scalerl.harness.report.panels import knob_panels
from tests.unit.report.frames import curves_frame, fits_frame, verdicts_frame


def test_grid_holds_every_panel_row_by_row_with_one_compute_switch() -> None:
    curves, fits, verdicts = curves_frame(n_points=20, seeds=1), fits_frame(), verdicts_frame()
    panels = knob_panels(curves, fits, verdicts)
    fig = knob_panels_figure(curves, fits, verdicts)
    assert len(fig.data) == sum(len(p.reward.data) + len(p.mechanism.data) for p in panels)
    # Row 1 (x/y) is loo-dapo's reward panel, row 2 (x3/y3) loo-savg's; both share one y range.
    assert {t.name for t in fig.data if t.xaxis == "x"} >= {"fit loo-dapo", "fit baseline"}
    assert {t.name for t in fig.data if t.xaxis == "x3"} >= {"fit loo-savg", "fit baseline"}
    assert (
        tuple(fig.layout.yaxis.range)
        == tuple(fig.layout.yaxis3.range)
        == tuple(panels[0].reward.layout.yaxis.range)
    )
    texts = [a.text for a in fig.layout.annotations]
    assert any("asymptote-mover" in t and "<b>loss</b> → dapo" in t for t in texts)
    assert any("no mechanism diagnostic" in t for t in texts)  # no diag frame passed
    linear, log = fig.layout.updatemenus[0].buttons
    assert linear.args[0] == {"xaxis.type": "linear", "xaxis3.type": "linear"}
    assert log.args[0] == {"xaxis.type": "log", "xaxis3.type": "log"}


def test_grid_with_nothing_to_compare_says_so() -> None:
    curves = curves_frame(n_points=10, seeds=1)
    fig = knob_panels_figure(curves[curves["variant"] == "baseline"], None, pd.DataFrame())
    assert len(fig.data) == 0 and "no variant to compare" in fig.layout.annotations[0].text
