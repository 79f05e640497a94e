"""`scalerl report` on a real SQLite store, opened in headless Chromium.

One store, one report, one browser load (the slow part: Chromium parses the embedded plotly.js)
shared by the assertions: every figure drawn, no console errors, the screenshot is not blank,
and a run name carrying a ``<script>`` shows as text and runs nothing.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from harness.cli import main
from tests.fixtures import report_sweep
from tests.fixtures.chromium import ChromiumError, PageResult, chromium_binary, load_page
from tests.fixtures.real import unavailable

EVIL = "<script>window.__scalerl_injected=1;document.title='pwned'</script>"


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("report")
    url = f"sqlite:///{tmp / 'store.db'}"
    report_sweep.write_sweep(url, name_suffix={"loo-savg": EVIL}, n_points=40)
    out = tmp / "report.html"
    assert main(["report", report_sweep.SWEEP, "-o", str(out), "--db", url, "--axis", "flops"]) == 0
    return out


@pytest.fixture(scope="module")
def page(report: Path) -> PageResult:
    if chromium_binary() is None:
        unavailable("Chromium", "no chromium on PATH (apt-get install -y chromium)")
    try:
        result = load_page(report)
    except ChromiumError as err:
        unavailable("Chromium", str(err))
    # Kept beside the report for a person to look at when the test fails.
    (report.parent / "screenshot.png").write_bytes(result.screenshot)
    return result


def test_report_is_one_offline_file_without_the_store_url(report: Path, page: PageResult) -> None:
    html = report.read_text(encoding="utf-8")
    assert html.count("plotly.js v") == 1  # embedded once
    assert re.search(r"<script[^>]*\bsrc=", html) is None
    # Offline: the page asked for nothing but itself.
    assert page.requests == [report.resolve().as_uri()]
    assert str(report.parent / "store.db") not in html and "sqlite:///" not in html


def test_every_figure_is_drawn_without_console_errors(page: PageResult) -> None:
    assert page.errors == []
    assert page.plots == 3 and page.drawn == 3  # overview, curves, knob map
    assert page.main_svg >= 6  # plotly draws two stacked main-svg layers per plot
    assert page.paths > 100  # curve lines, bands, markers, bars


def test_screenshot_is_not_blank(page: PageResult) -> None:
    from PIL import Image

    image = Image.open(io.BytesIO(page.screenshot)).convert("RGB")
    assert image.size == (1400, 1000)
    colors = image.getcolors(maxcolors=1 << 20)
    assert colors is not None and len(colors) > 50  # text, axes, curves: far from one colour


def test_script_in_a_run_name_shows_as_text_and_runs_nothing(page: PageResult) -> None:
    assert page.injected is False
    assert page.title == f"scalerl report: {report_sweep.SWEEP}"
    assert EVIL in page.text  # the fits table shows the run id literally
