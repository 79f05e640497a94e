"""`scalerl report` on a real SQLite store, opened in headless Chromium at 1400 and 1024 px.

One store, one report, one browser load per width (the slow part: Chromium parses the embedded
plotly.js) shared by the assertions: every figure drawn, no console errors, the screenshot is not
blank, a run name carrying a ``<script>`` shows as text and runs nothing, every knob has its
panel, each panel's plot area takes at least half of its figure's width, no figure is empty
without a message, and the page's controls (compute-axis switch, table sort and filter) work.

The layout is read from the DOM by a probe that extends the driver's own
(:data:`tests.fixtures.chromium._PROBE`): it measures each figure and drives the controls once
every plot is drawn, then appends its JSON to the page text after :data:`MARK`.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from scalerl.harness.cli import main
from tests.fixtures import chromium, report_sweep
from tests.fixtures.chromium import ChromiumError, PageResult, chromium_binary, load_page
from tests.fixtures.real import unavailable

# A run id holds at most 64 characters (the store's column, checked before any write), so the
# payload is the shortest script that leaves a trace: an undeclared assignment makes a global.
EVIL = "<script>__scalerl_injected=1</script>"
KNOBS = ("loo-dapo", "loo-savg")  # every variant but the baseline has a verdict and a panel
MARK = "\n@@layout@@"

# Runs in the page; only once every plot is drawn does it measure and click.
_LAYOUT = """
const measure = () => {
  const figs = Array.from(document.querySelectorAll('.js-plotly-plot')).map(p => {
    const drag = p.querySelector('.nsewdrag');
    const panel = p.closest('.knob-panel');
    const marks = Array.from(p.querySelectorAll('.scatterlayer path, .barlayer path'))
      .filter(e => (e.getAttribute('d') || '').length > 4).length;
    return {
      panel: panel ? panel.dataset.variant : null,
      role: panel ? (p.closest('.reward') ? 'reward' : 'mechanism') : 'page',
      width: p.getBoundingClientRect().width,
      plot: drag ? drag.getBoundingClientRect().width : 0,
      marks: marks,
      messages: Array.from(p.querySelectorAll('.annotation-text')).map(a => a.textContent),
    };
  });
  const rewards = Array.from(document.querySelectorAll('.knob-panel .reward .js-plotly-plot'));
  scalerlAxis('linear');
  const linear = rewards.map(p => p.layout.xaxis.type);
  scalerlAxis('log');
  const table = document.querySelector('table.verdicts');
  const order = () => Array.from(table.tBodies[0].rows).map(r => r.cells[1].textContent);
  const dA = table.tHead.rows[0].cells[4];
  dA.click(); const asc = order(); dA.click(); const desc = order();
  const kind = document.getElementById('verdict-kind');
  kind.value = 'asymptote-mover'; kind.dispatchEvent(new Event('change'));
  const shown = Array.from(table.tBodies[0].rows).filter(r => r.style.display !== 'none').length;
  kind.value = ''; kind.dispatchEvent(new Event('change'));
  return {
    figs: figs, page: document.documentElement.clientWidth,
    panels: Array.from(document.querySelectorAll('.knob-panel')).map(s => [s.id, s.dataset.variant]),
    links: Array.from(table.querySelectorAll('a')).map(a => a.getAttribute('href')),
    linear: linear, log: rewards.map(p => p.layout.xaxis.type), asc: asc, desc: desc, shown: shown,
  };
};
"""


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("report")
    url = f"sqlite:///{tmp / 'store.db'}"
    report_sweep.write_sweep(url, name_suffix={"loo-savg": EVIL}, n_points=40, diagnostics=True)
    out = tmp / "report.html"
    assert main(["report", report_sweep.SWEEP, "-o", str(out), "--db", url, "--axis", "flops"]) == 0
    return out


def _load(report: Path, width: int, monkeypatch: pytest.MonkeyPatch) -> tuple[PageResult, dict[str, Any]]:
    if chromium_binary() is None:
        unavailable("Chromium", "no chromium on PATH (apt-get install -y chromium)")
    probe = chromium._PROBE.replace(
        "text: document.body ? document.body.innerText : '',",
        "text: (document.body ? document.body.innerText : '') + "
        f"(drawn >= plots.length ? {json.dumps(MARK)} + JSON.stringify(measure()) : ''),",
    )
    assert probe != chromium._PROBE
    monkeypatch.setattr(chromium, "_PROBE", probe.replace("(() => {", "(() => {" + _LAYOUT, 1))
    try:
        result = load_page(report, width=width)
    except ChromiumError as err:
        unavailable("Chromium", str(err))
    # Kept beside the report for a person to look at when the test fails.
    (report.parent / f"screenshot-{width}.png").write_bytes(result.screenshot)
    text, _, layout = result.text.partition(MARK)
    assert layout, "the probe did not measure: not every plot was drawn"
    result.text = text
    return result, json.loads(layout)


@pytest.fixture(scope="module")
def wide(report: Path) -> tuple[PageResult, dict[str, Any]]:
    with pytest.MonkeyPatch.context() as mp:
        return _load(report, 1400, mp)


@pytest.fixture(scope="module")
def narrow(report: Path) -> tuple[PageResult, dict[str, Any]]:
    with pytest.MonkeyPatch.context() as mp:
        return _load(report, 1024, mp)


def test_report_is_one_offline_file_without_the_store_url(report: Path, wide: tuple[PageResult, Any]) -> None:
    html = report.read_text(encoding="utf-8")
    assert html.count("plotly.js v") == 1  # embedded once
    assert re.search(r"<script[^>]*\bsrc=", html) is None
    # Offline: the page asked for nothing but itself.
    assert wide[0].requests == [report.resolve().as_uri()]
    assert str(report.parent / "store.db") not in html and "sqlite:///" not in html


def test_every_figure_is_drawn_without_console_errors(wide: tuple[PageResult, Any]) -> None:
    page, _ = wide
    assert page.errors == []
    # Overview, knob map, and per knob its reward and mechanism figures.
    assert page.plots == 2 + 2 * len(KNOBS) and page.drawn == page.plots
    assert page.main_svg >= 2 * page.plots  # plotly draws two stacked main-svg layers per plot
    assert page.paths > 100  # curve lines, bands, markers, bars


@pytest.mark.parametrize("width", [1400, 1024])
def test_every_knob_has_a_panel_whose_plot_area_fills_its_figure(
    width: int, wide: tuple[PageResult, Any], narrow: tuple[PageResult, Any]
) -> None:
    page, layout = wide if width == 1400 else narrow
    assert page.errors == [] and layout["page"] <= width
    assert sorted(variant for _, variant in layout["panels"]) == sorted(KNOBS)
    # The verdict table's knobs link to exactly these panels.
    assert sorted(layout["links"]) == sorted(f"#{anchor}" for anchor, _ in layout["panels"])
    for fig in layout["figs"]:
        share = fig["plot"] / fig["width"]
        assert share >= 0.5, f"{fig['role']} figure of {fig['panel']}: plot {share:.2f} of {fig['width']} px"
    assert sorted(f["panel"] for f in layout["figs"] if f["role"] == "reward") == sorted(KNOBS)
    # A knob's row (reward beside mechanism) is mostly plot: over 70% of the page's width.
    for knob in KNOBS:
        row = sum(f["plot"] for f in layout["figs"] if f["panel"] == knob)
        assert row > 0.7 * width, f"{knob}: plot areas {row} px of {width}"


def test_no_figure_is_empty_without_a_message(wide: tuple[PageResult, Any]) -> None:
    _, layout = wide
    for fig in layout["figs"]:
        assert fig["marks"] > 0 or any(len(m) > 20 for m in fig["messages"]), fig
    mechanisms = {f["panel"]: f for f in layout["figs"] if f["role"] == "mechanism"}
    # loo-dapo's loss knob shows its clip share; the fixture's loss_aggregation knob has no known
    # diagnostic, and its figure says so in words.
    assert mechanisms["loo-dapo"]["marks"] >= 2
    assert mechanisms["loo-savg"]["marks"] == 0
    assert any("no mechanism diagnostic" in m for m in mechanisms["loo-savg"]["messages"])


def test_controls_switch_every_panel_and_sort_and_filter_the_table(wide: tuple[PageResult, Any]) -> None:
    _, layout = wide
    assert layout["linear"] == ["linear"] * len(KNOBS) and layout["log"] == ["log"] * len(KNOBS)
    assert layout["asc"] == ["loo-dapo", "loo-savg"]  # ΔA ascending: the mover (-0.15) first
    assert layout["desc"] == ["loo-savg", "loo-dapo"]
    assert layout["shown"] == 1  # filtered to asymptote-movers


def test_screenshot_is_not_blank(wide: tuple[PageResult, Any]) -> None:
    from PIL import Image

    image = Image.open(io.BytesIO(wide[0].screenshot)).convert("RGB")
    assert image.size == (1400, 1000)
    colors = image.getcolors(maxcolors=1 << 20)
    assert colors is not None and len(colors) > 50  # text, axes, curves: far from one colour


def test_script_in_a_run_name_shows_as_text_and_runs_nothing(wide: tuple[PageResult, Any]) -> None:
    page, _ = wide
    assert page.injected is False
    assert page.title == f"scalerl report: {report_sweep.SWEEP}"
    assert EVIL in page.text  # the fits table shows the run id literally
