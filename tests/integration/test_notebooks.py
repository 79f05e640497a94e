"""The three notebooks, executed (nbclient + ipykernel) against a small store written through the
store's real writer, and again against a sweep `scalerl import` wrote from verl JSON lines on a
logged compute axis (the notebooks then take the metric and axis the import stored); assertions
read the executed outputs. The executed notebooks are then converted to HTML by nbconvert and
opened in headless Chromium: every figure is drawn, with the page's scripts (plotly.js inlined
once), and shown as a picture without them. Committed notebooks carry no outputs."""

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
# Figures each notebook shows (its fig.show() calls).
FIGURES = {"01-quickstart": 1, "02-loo-analysis": 3, "03-live-forecast": 1}
PLOTLY_MIME = "application/vnd.plotly.v1+json"


def _run_all(env: dict[str, str], workdir: Path) -> Executed:
    """Every notebook, run side by side (each is mostly start-up and imports: this halves the
    wall time on two cores), its kernel given ``env``."""
    with pytest.MonkeyPatch.context() as mp:
        # Kernels inherit this environment; the notebooks set their own renderer
        # (scalerl.harness.notebook.setup_figures), whose outputs carry the figure's JSON too.
        for key, value in env.items():
            mp.setenv(key, value)
        for key in ("SCALERL_METRIC", "SCALERL_AXIS", "PLOTLY_RENDERER"):
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
    nbformat.write(nb, workdir / f"{name}.executed.ipynb")  # for the HTML test
    text, figures = [], []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                text.append(out["text"])
            data = out.get("data", {})
            if "text/plain" in data and PLOTLY_MIME not in data:
                text.append(data["text/plain"])
            if PLOTLY_MIME in data:
                figures.append(data[PLOTLY_MIME])
    return "\n".join(text), figures


@pytest.fixture(scope="module")
def executed_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("notebooks")


@pytest.fixture(scope="module")
def executed(executed_dir: Path) -> Executed:
    """Every notebook run once against one store (a recipe-like sweep: val/pass_rate on flops)."""
    url = f"sqlite:///{executed_dir / 'scalerl.db'}"
    report_sweep.write_sweep(url)
    return _run_all({"SCALERL_DB_URL": url, "SCALERL_SWEEP": report_sweep.SWEEP}, executed_dir)


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
    (fig,) = figures  # the report's curves figure, through Sweep.figures()
    runs = [t["name"] for t in fig["data"] if " · seed " in str(t.get("name"))]
    assert len(runs) == 6 and {"fit baseline", "fit loo-dapo"} <= {t.get("name") for t in fig["data"]}


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
    # The variant's forecast is `scalerl forecast`'s (Sweep.forecast: seeds pooled, siblings
    # offered). Its ceiling moved (0.45 against 0.60), so its own points refuse the siblings'
    # prior (issue 37: borrowing never pulls a ceiling mover toward the others) and it is forecast
    # from its own curve; the baseline still borrows.
    forecast = re.search(r"^\s*loo-dapo\s+2\s+ok\s+single\s+(\d\.\d+)\s+(\d\.\d+)\s+(\d\.\d+)", text, re.M)
    assert re.search(r"^\s*baseline\s+\d+\s+ok\s+sweep\s", text, re.M), text
    assert forecast is not None
    value, lo, hi = map(float, forecast.groups())
    assert lo <= value <= hi and value == pytest.approx(0.45, abs=0.02)
    assert len(figures) == 1


def test_the_notebooks_use_the_public_api_only() -> None:
    """Nothing but scalerl.Sweep / list_sweeps and the notebook renderer (issue 38: they called
    fit_sweep, FitRequest, report._style.esc and a bootstrap forecast of their own)."""
    import nbformat

    for name in NAMES:
        nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
        code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
        imports = set(re.findall(r"^\s*(?:from|import)\s+(scalerl[\w.]*)", code, re.M))
        assert imports <= {"scalerl", "scalerl.harness.notebook"}, (name, imports)
        assert "scalerl.Sweep.open(" in code and "._" not in code.replace("__", ""), name


@pytest.mark.slow  # nbconvert + 4 Chromium page loads (~20 s)
def test_the_notebooks_render_their_figures_in_nbconvert_html(executed: Executed, executed_dir: Path) -> None:
    import nbformat
    from nbconvert import HTMLExporter

    from tests.fixtures.chromium import chromium_binary, load_page

    if chromium_binary() is None:
        pytest.skip("no chromium on PATH (apt-get install chromium; CI installs it)")
    for name, n in FIGURES.items():
        nb = nbformat.read(executed_dir / f"{name}.executed.ipynb", as_version=4)
        shown = [
            o["data"] for c in nb.cells for o in c.get("outputs", []) if PLOTLY_MIME in o.get("data", {})
        ]
        assert len(shown) == n, name
        # Each figure carries a static picture (viewers that run no script: a git host's preview).
        assert all(d["image/png"] and "text/html" in d for d in shown), name
        body, _ = HTMLExporter().from_notebook_node(nb)
        page = executed_dir / f"{name}.html"
        page.write_text(body, encoding="utf-8")
        drawn = load_page(page)
        assert (drawn.plots, drawn.drawn) == (n, n), (name, drawn.plots, drawn.drawn, drawn.errors)
        assert drawn.main_svg >= n and drawn.paths > 10 * n, name
        assert drawn.pictures == 0, name  # the static pictures gave way to the drawn figures
        # plotly.js came from the page itself: no request for it (only nbconvert's own template
        # asks a CDN for require.js and MathJax, which these figures need neither of).
        assert not [u for u in drawn.requests if "plot.ly" in u or "plotly" in u], name
        assert not [e for e in drawn.errors if "exception" in e], (name, drawn.errors)
    # A viewer that runs no script shows the pictures instead (one notebook is enough: the same
    # renderer made every output).
    still = load_page(executed_dir / "02-loo-analysis.html", javascript=False)
    assert (still.plots, still.pictures) == (0, FIGURES["02-loo-analysis"])


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
    runs = [trace for trace in fig["data"] if " · seed " in str(trace.get("name"))]
    xs = np.concatenate([_values(trace["x"]) for trace in runs])
    assert len(runs) == 4 and xs.max() == pytest.approx(44_000)  # the tokens, not the steps

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
    assert len(re.findall(r"^\s*\S+-s\d\s+\S+\s+completed\s.*\sfinished\s*$", text, re.M)) == 4
    assert len(figures) == 1
