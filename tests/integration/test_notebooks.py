"""The three notebooks, executed (nbclient + ipykernel) against a small store written through the
store's real writer, and again against a sweep `scalerl import` wrote from verl JSON lines on a
logged compute axis (the notebooks then take the metric and axis the import stored); assertions
read the executed outputs. Committed notebooks carry no outputs."""

from __future__ import annotations

import base64
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.fixtures import report_sweep
from tests.unit.importers.test_axis import write_verl

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
NAMES = ("01-quickstart", "02-loo-analysis", "03-live-forecast")


Executed = dict[str, tuple[str, list[Any]]]


def _run_all(env: dict[str, str], workdir: Path) -> Executed:
    """Every notebook, run side by side (each is mostly start-up and imports: this halves the
    wall time on two cores), its kernel given ``env``."""
    with pytest.MonkeyPatch.context() as mp:
        # Kernels inherit this environment; Plotly's JSON renderer keeps outputs small and lets
        # the tests read the figures back.
        for key, value in {**env, "PLOTLY_RENDERER": "plotly_mimetype"}.items():
            mp.setenv(key, value)
        for key in ("SCALERL_METRIC", "SCALERL_AXIS"):
            if key not in env:
                mp.delenv(key, raising=False)
        with ThreadPoolExecutor(max_workers=len(NAMES)) as pool:
            futures = {name: pool.submit(_execute, name, workdir) for name in NAMES}
            return {name: f.result() for name, f in futures.items()}


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
    """Every notebook run once against one store (a recipe-like sweep: val/pass_rate on flops)."""
    tmp = tmp_path_factory.mktemp("notebooks")
    url = f"sqlite:///{tmp / 'scalerl.db'}"
    report_sweep.write_sweep(url)
    return _run_all({"SCALERL_DB_URL": url, "SCALERL_SWEEP": report_sweep.SWEEP}, tmp)


IMPORTED = "verl"
VAL = "val-core/gsm8k/acc/mean@1"


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Executed:
    """Every notebook run against a sweep imported from verl JSON lines on the running total of
    perf/total_num_tokens, mapped onto a baseline (ceiling 0.6) and a variant (0.45), two seeds
    each; no SCALERL_METRIC / SCALERL_AXIS: the notebooks read the defaults the import stored."""
    from scalerl.harness.cli import main

    tmp = tmp_path_factory.mktemp("imported")
    files = []
    for alt, ceiling in (("base", 0.6), ("dapo", 0.45)):
        for seed in range(2):
            f = tmp / f"{alt}-s{seed}" / "metrics.jsonl"
            write_verl(f, 1000 + 100 * seed, ceiling)
            files.append(str(f))
    url = f"sqlite:///{tmp / 'scalerl.db'}"
    regex = r"(?P<alt>[a-z]+)-s(?P<seed>\d+)"
    flags = ["--variant-from", "alt", "--seed-from", "seed", "--baseline", "base", "--run-regex", regex]
    args = ["import", *files, "--sweep", IMPORTED, *flags, "--db", url]
    assert main([*args, "--axis-column", "perf/total_num_tokens", "--axis-cumulative"]) == 0
    return _run_all({"SCALERL_DB_URL": url, "SCALERL_SWEEP": IMPORTED}, tmp)


def test_notebooks_are_committed_without_outputs() -> None:
    import nbformat

    for name in NAMES:
        nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert code, name
        assert all(c.outputs == [] and c.execution_count is None for c in code), f"{name} has outputs"
        assert code[0].metadata.get("tags") == ["parameters"], f"{name}: no papermill parameters cell"


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


def _values(data: Any) -> np.ndarray:
    """A Plotly array as written to JSON: a list, or a typed array (``{"dtype", "bdata"}``)."""
    if isinstance(data, dict):
        return np.frombuffer(base64.b64decode(data["bdata"]), dtype=data["dtype"])
    return np.asarray(data, dtype=float)


def test_notebooks_run_on_an_imported_sweep_with_its_stored_metric_and_axis(imported: Executed) -> None:
    text, figures = imported["01-quickstart"]
    assert f"sweep: {IMPORTED}; metric {VAL} on tokens" in text
    assert "164 points, 4 runs" in text  # 41 steps (0, the validation before training, to 40) x 4
    (fig,) = figures
    xs = np.concatenate([_values(trace["x"]) for trace in fig["data"]])
    assert len(fig["data"]) == 4 and xs.max() == pytest.approx(44_000)  # the tokens, not the steps

    text, figures = imported["02-loo-analysis"]
    assert f"metric {VAL} on tokens" in text
    pooled = {
        m.group(1): float(m.group(2)) for m in re.finditer(r"^\s*(baseline|alt=dapo)\s+(\d\.\d+)", text, re.M)
    }
    assert pooled["baseline"] == pytest.approx(0.6, abs=0.02)
    assert pooled["alt=dapo"] == pytest.approx(0.45, abs=0.02)
    assert len(figures) == 3

    text, figures = imported["03-live-forecast"]
    assert "0 of 4 runs still running; forecasting at tokens=4.4e+04" in text
    assert len(re.findall(r"^\s*\S+-s\d\s+completed\s.*\sfinished\s*$", text, re.M)) == 4
    assert len(figures) == 1
