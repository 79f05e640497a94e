"""The diagnostics small multiples: one panel per logged diag metric, one seed-mean line per variant."""

from __future__ import annotations

import pandas as pd
import pytest

from scalerl.harness.report.diagnostics import DIAGNOSTIC_PANELS, diagnostics_figure, mechanism_figure


def _frame() -> pd.DataFrame:
    rows = []
    for variant, lag in (("baseline", 1.0), ("loo-8op", 0.5)):
        for seed in (0, 1):
            for step in (10, 20):
                rows.append((variant, seed, step, "diag/lag_mean", lag + seed))  # seed mean: lag + 0.5
                rows.append((variant, seed, step, "diag/logp_kl", 1e-6 * step))
    rows.append(("baseline", 0, 10, "val/pass_rate", 0.5))  # not a diagnostic: ignored
    return pd.DataFrame(rows, columns=["variant", "seed", "step", "metric", "value"])


def test_one_panel_per_logged_metric_and_one_seed_mean_line_per_variant() -> None:
    fig = diagnostics_figure(_frame())
    titles = [a.text for a in fig.layout.annotations]
    assert titles == [DIAGNOSTIC_PANELS["diag/lag_mean"], DIAGNOSTIC_PANELS["diag/logp_kl"]]
    assert len(fig.data) == 4  # 2 metrics x 2 variants
    lag = {t.name: list(t.y) for t in fig.data if t.xaxis == "x"}
    assert lag == {"baseline": [1.5, 1.5], "loo-8op": [1.0, 1.0]}
    kl = [t for t in fig.data if t.xaxis == "x2"]
    assert [list(t.x) for t in kl] == [[10, 20], [10, 20]]
    assert list(kl[0].y) == pytest.approx([1e-5, 2e-5])
    assert [t.showlegend for t in fig.data] == [True, True, False, False]  # legend once per variant


def test_no_diagnostics_gives_an_empty_figure_with_a_note() -> None:
    fig = diagnostics_figure(_frame().query("metric == 'val/pass_rate'"))
    assert len(fig.data) == 0 and "no diagnostics" in fig.layout.annotations[0].text


def test_mechanism_panel_shows_the_knobs_own_metric_for_baseline_and_variant() -> None:
    fig = mechanism_figure(_frame(), "loo-8op", "pipeline")
    assert [t.name for t in fig.data] == ["baseline · diag/lag_mean", "loo-8op · diag/lag_mean"]
    assert [list(t.y) for t in fig.data] == [[1.5, 1.5], [1.0, 1.0]]  # mean over the two seeds
    assert DIAGNOSTIC_PANELS["diag/lag_mean"] in fig.layout.title.text
    assert "baseline 1.5" in fig.layout.title.text and "loo-8op 1" in fig.layout.title.text


def test_mechanism_panel_says_why_when_it_has_nothing_to_draw() -> None:
    unknown = mechanism_figure(_frame(), "loo-x", "my_knob")
    assert len(unknown.data) == 0 and "no mechanism diagnostic is known for knob my_knob" in (
        unknown.layout.annotations[0].text
    )
    missing = mechanism_figure(_frame(), "loo-lp", "length_control")
    assert len(missing.data) == 0 and missing.layout.xaxis.visible is False
    assert "train/truncation_rate, train/interruption_rate not logged" in missing.layout.annotations[0].text
