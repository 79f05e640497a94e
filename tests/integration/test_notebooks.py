"""The three notebooks, executed (nbclient + ipykernel) against a small store written through the
store's real writer; assertions read the executed outputs. Committed notebooks carry no outputs."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures import report_sweep

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
NAMES = ("01-quickstart", "02-loo-analysis", "03-live-forecast")


Executed = dict[str, tuple[str, list[Any]]]


def _execute(name: str, workdir: Path) -> tuple[str, list[Any]]:
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    client = NotebookClient(
        nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(workdir)}}
    )
    client.execute()
    text, figures = [], []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                text.append(out["text"])
            data = out.get("data", {})
            if "text/plain" in data:
                text.append(data["text/plain"])
            if "application/vnd.plotly.v1+json" in data:
                figures.append(data["application/vnd.plotly.v1+json"])
    return "\n".join(text), figures


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> Executed:
    """Every notebook run once against one store; the three kernels run side by side (each is
    mostly start-up and imports), which halves the wall time on two cores."""
    tmp = tmp_path_factory.mktemp("notebooks")
    report_sweep.write_sweep(f"sqlite:///{tmp / 'scalerl.db'}")
    with pytest.MonkeyPatch.context() as mp:
        # Kernels inherit this environment: the store URL, the sweep, and Plotly's JSON renderer
        # (keeps outputs small and lets the tests read the figures back).
        mp.setenv("SCALERL_DB_URL", f"sqlite:///{tmp / 'scalerl.db'}")
        mp.setenv("SCALERL_SWEEP", report_sweep.SWEEP)
        mp.setenv("PLOTLY_RENDERER", "plotly_mimetype")
        with ThreadPoolExecutor(max_workers=len(NAMES)) as pool:
            futures = {name: pool.submit(_execute, name, tmp) for name in NAMES}
            return {name: f.result() for name, f in futures.items()}


def test_notebooks_are_committed_without_outputs() -> None:
    import nbformat

    for name in NAMES:
        nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert code, name
        assert all(c.outputs == [] and c.execution_count is None for c in code), f"{name} has outputs"


def test_quickstart_lists_the_sweep_and_plots_its_curves(executed: Executed) -> None:
    text, figures = executed["01-quickstart"]
    assert f"sweep: {report_sweep.SWEEP}" in text
    assert re.search(r"loo-report-loo-dapo-s1\s+loo-dapo\s+1\s+running\s+66", text)  # 33 steps x 2 metrics
    assert "258 points, 6 runs" in text  # 4 finished x 48 + 2 running x 33
    (fig,) = figures
    assert len(fig["data"]) == 6 and fig["layout"]["xaxis"]["type"] == "log"


def test_loo_analysis_finds_the_known_mover(executed: Executed) -> None:
    text, figures = executed["02-loo-analysis"]
    verdicts = {m.group(1): m for m in re.finditer(r"^\s*(loo-\w+)\s+(\S+)\s+(-?\d\.\d+)", text, re.M)}
    assert verdicts["loo-dapo"].group(2) == "asymptote-mover"
    # The injected drop in A is -0.15; the fit recovers it within 0.02.
    assert float(verdicts["loo-dapo"].group(3)) == pytest.approx(-0.15, abs=0.02)
    assert verdicts["loo-savg"].group(2) != "asymptote-mover"
    table, knob_map, curves = figures
    assert "asymptote-mover" in table["data"][0]["cells"]["values"][3]
    assert {t["name"] for t in knob_map["data"]} >= {"asymptote-mover"}
    assert any(t["name"] == "extrapolation loo-dapo" for t in curves["data"])


def test_live_forecast_stops_the_losing_running_run(executed: Executed) -> None:
    text, figures = executed["03-live-forecast"]
    assert "2 of 6 runs still running" in text
    rows = {
        m.group(1): m.group(2)
        for m in re.finditer(r"^\s*(loo-report-\S+)\s+.*\s(STOP|keep|finished)\s*$", text, re.M)
    }
    assert rows["loo-report-loo-dapo-s1"] == "STOP"  # ceiling 0.45 against the baseline's 0.60
    assert rows["loo-report-baseline-s1"] == "keep"
    assert rows["loo-report-baseline-s0"] == "finished"
    forecast = re.search(
        r"loo-report-loo-dapo-s1\s+running\s+\S+\s+\S+\s+(\d\.\d+)\s+(\d\.\d+)\s+(\d\.\d+)", text
    )
    assert forecast is not None
    value, lo, hi = map(float, forecast.groups())
    assert lo <= value <= hi and value == pytest.approx(0.45, abs=0.02)
    assert len(figures) == 1
