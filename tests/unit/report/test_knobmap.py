"""The knob map: every knob with a ΔA placed at its numbers, ranges from the data, and words
instead of empty axes when nothing can be placed."""

from __future__ import annotations

import numpy as np
import pytest

from scalerl.harness.report.knobmap import knob_map_figure
from tests.unit.report.frames import verdicts_frame


def _by_name(fig, name):  # type: ignore[no-untyped-def]
    return next(t for t in fig.data if t.name == name)


def test_each_knob_sits_at_its_deltas_with_intervals_in_ranges_from_the_data() -> None:
    fig = knob_map_figure(verdicts_frame())
    mover = _by_name(fig, "asymptote-mover")
    assert list(mover.text) == ["loo-dapo"]
    assert mover.x[0] == pytest.approx(-0.10) and mover.y[0] == pytest.approx(0.0)
    assert mover.error_x.array[0] == pytest.approx(0.01)
    assert mover.error_x.arrayminus[0] == pytest.approx(0.01)
    shaper = _by_name(fig, "efficiency-shaper")
    assert shaper.x[0] == pytest.approx(0.0) and shaper.y[0] == pytest.approx(-0.6)
    assert shaper.error_y.array[0] == pytest.approx(0.1)
    assert mover.marker.color != shaper.marker.color
    rect = fig.layout.shapes[0]
    assert (rect.x0, rect.x1) == (-0.02, 0.02)
    # The ranges hug the intervals (ΔA in [-0.11, 0.01], ΔB in [-0.7, 0.1]), padded.
    x0, x1 = fig.layout.xaxis.range
    y0, y1 = fig.layout.yaxis.range
    assert -0.15 < x0 < -0.11 and 0.03 <= x1 < 0.06
    assert -0.85 < y0 < -0.7 and 0.1 <= y1 < 0.25
    labels = " ".join(a.text for a in fig.layout.annotations)
    for words in ("mover up", "mover down", "shaper: faster", "shaper: slower", "no effect"):
        assert words in labels


def test_open_intervals_and_missing_efficiency_are_drawn_as_such() -> None:
    verdicts = verdicts_frame()
    verdicts.loc[0, ["d_a_hi", "d_b", "d_b_lo", "d_b_hi"]] = np.nan  # ΔA >= -0.11, no ΔB
    fig = knob_map_figure(verdicts)
    mover = _by_name(fig, "asymptote-mover")
    assert mover.y[0] == 0.0 and list(mover.marker.symbol) == ["circle-open"]
    assert mover.error_x.array[0] == 0.0  # no made-up upper whisker...
    arrows = [a for a in fig.layout.annotations if a.showarrow]
    assert len(arrows) == 1 and arrows[0].ax == pytest.approx(-0.10)  # ...an arrow instead
    assert "efficiency not measured" in mover.hovertext[0]


def test_unplaced_knobs_are_named_and_an_empty_map_says_why() -> None:
    verdicts = verdicts_frame()
    verdicts.loc[1, ["d_a", "d_a_lo", "d_a_hi"]] = np.nan
    verdicts.loc[1, "verdict"] = "undecided"
    fig = knob_map_figure(verdicts)
    assert [t.name for t in fig.data] == ["asymptote-mover"]
    assert fig.layout.title.subtitle.text == "not placed (no ΔA): loo-savg (undecided)"
    verdicts.loc[0, ["d_a", "d_a_lo", "d_a_hi"]] = np.nan
    empty = knob_map_figure(verdicts)
    assert len(empty.data) == 0 and empty.layout.xaxis.visible is False
    assert "No knob placed: none of the 2 verdicts has a ΔA" in empty.layout.annotations[0].text
    assert "loo-savg (undecided)" in empty.layout.annotations[0].text
    none = knob_map_figure(verdicts.iloc[0:0])
    assert "No verdicts to place" in none.layout.annotations[0].text


def test_efficiency_as_log_c_mid_puts_faster_up() -> None:
    verdicts = verdicts_frame()
    verdicts["d_log_c_mid"] = [0.0, 0.5]  # loo-savg needs more compute to reach half its gain
    verdicts["d_log_c_mid_lo"] = [-0.1, 0.3]
    verdicts["d_log_c_mid_hi"] = [0.1, 0.7]
    fig = knob_map_figure(verdicts, efficiency="log_c_mid")
    shaper = _by_name(fig, "efficiency-shaper")
    assert shaper.y[0] == pytest.approx(-0.5)
    assert shaper.error_y.array[0] == pytest.approx(0.2) and shaper.error_y.arrayminus[0] == pytest.approx(
        0.2
    )
    assert "C_mid" in fig.layout.yaxis.title.text


def test_labels_never_overlap_each_other_markers_or_quadrant_labels() -> None:
    import itertools

    from scalerl.harness.report.knobmap import _label_box, _overlaps, _quadrant_boxes, label_positions

    # Twelve knobs crowded near the origin (a lab's typical sweep: most knobs do little).
    rng = np.random.default_rng(3)
    x = rng.normal(0.0, 0.004, 12)
    y = rng.normal(0.0, 0.03, 12)
    names = [f"loo-knob-{i:02d}" for i in range(12)]
    x_range, y_range = (-0.05, 0.05), (-0.2, 0.2)
    obstacles = _quadrant_boxes(0.02, x_range, y_range)
    spots, boxes = label_positions(x, y, names, x_range, y_range, obstacles=obstacles)
    placed = [b for b in boxes if b is not None]
    assert [s is None for s in spots] == [b is None for b in boxes]
    assert 3 <= len(placed) < 12  # some fit, and the rest are left to the hover, not piled up
    for a, b in itertools.combinations(placed, 2):
        assert not _overlaps(a, b)
    for b in placed:
        assert not any(_overlaps(b, o) for o in obstacles)
    # Far apart, every name sits above its marker.
    far_spots, _ = label_positions(np.array([-0.04, 0.0, 0.04]), np.array([-0.1, 0.0, 0.1]), names[:3],
                                   x_range, y_range)  # fmt: skip
    assert far_spots == ["top center"] * 3
    box = _label_box("middle right", 100.0, 50.0, 70.0, 15.0)
    assert box[0] > 100.0 and box[1] < 50.0 < box[3]
    # The figure: a hidden name is left to the hover and counted in the subtitle.
    frame = verdicts_frame()
    crowd = frame.loc[[0] * 12].reset_index(drop=True)
    crowd["variant"] = names
    crowd["d_a"] = x
    crowd["d_a_lo"], crowd["d_a_hi"] = x - 0.002, x + 0.002
    crowd["d_b"], crowd["d_b_lo"], crowd["d_b_hi"] = y, y - 0.01, y + 0.01
    fig = knob_map_figure(crowd)
    shown = [t for tr in fig.data for t in (tr.text or ()) if t]
    assert 0 < len(shown) < 12
    assert f"{12 - len(shown)} name(s) left to the hover" in fig.layout.title.subtitle.text
