"""Issue 38's first hour, replayed: a lab's MLflow store and W&B offline runs, each run logging its
full config (loss_type, kl_coef, seed and an output folder) and its compute (perf/gpu_hours), are
imported with no map file and no axis flag, fitted to the right verdicts and exported back, and
the values are read back from the real MLflow store and the W&B run's own transaction log.

The truth: ``loss_type=dapo`` raises the ceiling by 0.10 (an asymptote-mover); ``kl_coef=0.0``
changes nothing (anything but a mover is sensible at 3 seeds). Seeds differ in their ceiling
(sd 0.005) and every point has noise 0.005. One more dapo run failed (MLflow ``FAILED``): it stays
out of the verdicts and stays visible. The notebooks' HTML rendering is checked in
tests/integration/test_notebooks.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from scalerl.harness import Sweep
from scalerl.harness.cli import main

pytest.importorskip("mlflow")
pytest.importorskip("wandb")

STEPS = np.arange(1, 61)
GPU_HOURS_PER_STEP = 0.25
C_MID_STEPS = 8.0
BASE = {"loss_type": "cispo", "kl_coef": 0.001}
# Run name prefix -> (config changes, true ceiling).
VARIANTS: dict[str, tuple[dict[str, Any], float]] = {
    "baseline": ({}, 0.60),
    "dapo": ({"loss_type": "dapo"}, 0.70),
    "nokl": ({"kl_coef": 0.0}, 0.60),
}
SEEDS = (0, 1, 2)


def curve(ceiling: float, seed: int, salt: int) -> np.ndarray:
    rng = np.random.default_rng(1000 * seed + salt)
    a = ceiling + rng.normal(0.0, 0.005)
    return 0.1 + (a - 0.1) / (1.0 + (C_MID_STEPS / STEPS) ** 4.0) + rng.normal(0.0, 0.005, STEPS.size)


def config(name: str, seed: int) -> dict[str, Any]:
    # The output folder differs in every run, as a lab's does: it is no knob.
    return {**BASE, **VARIANTS[name][0], "seed": seed, "output_dir": f"/ckpt/{name}-s{seed}"}


def write_mlflow(uri: str) -> dict[str, str]:
    """The lab's MLflow experiment; run name -> MLflow run id."""
    from mlflow import MlflowClient
    from mlflow.entities import Metric, Param

    client = MlflowClient(tracking_uri=uri)
    eid = client.create_experiment("grpo-loo")
    ids: dict[str, str] = {}
    runs = [(name, seed, VARIANTS[name][1]) for name in VARIANTS for seed in SEEDS] + [("dapo", 3, -1.0)]
    for k, (name, seed, ceiling) in enumerate(runs):
        run = client.create_run(eid, run_name=f"{name}-s{seed}")
        failed = ceiling < 0  # this one diverged and crashed a third of the way in
        values = (
            curve(0.7, seed, k)[: STEPS.size // 3] * np.linspace(1, 0.2, STEPS.size // 3)
            if failed
            else curve(ceiling, seed, k)
        )
        metrics = []
        for s, v in zip(STEPS, values, strict=False):
            t = 1_700_000_000_000 + 1000 * int(s)
            metrics += [
                Metric("val/acc", float(v), t, int(s)),
                Metric("perf/gpu_hours", GPU_HOURS_PER_STEP * float(s), t, int(s)),
                Metric("train/loss", float(1.0 / s), t, int(s)),
            ]
        params = [Param(k, str(v)) for k, v in config(name, seed).items()]
        client.log_batch(run.info.run_id, params=params, metrics=metrics)
        client.set_terminated(run.info.run_id, status="FAILED" if failed else "FINISHED")
        ids[f"{name}-s{seed}"] = run.info.run_id
    return ids


def write_wandb(root: Path) -> None:
    """The lab's W&B offline runs (baseline and dapo, three seeds each) under ``root/wandb``."""
    import wandb

    for k, (name, seed) in enumerate((n, s) for n in ("baseline", "dapo") for s in SEEDS):
        settings = wandb.Settings(mode="offline", silent=True, console="off")
        run = wandb.init(project="grpo-loo", name=f"{name}-s{seed}", config=config(name, seed), dir=str(root),
                         settings=settings)  # fmt: skip
        for s, v in zip(STEPS, curve(VARIANTS[name][1], seed, 50 + k), strict=True):
            run.log({"val/acc": float(v), "perf/gpu_hours": GPU_HOURS_PER_STEP * float(s)}, step=int(s))
        run.finish()


def fit_json(sweep: str, url: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main(["fit", sweep, "--db", url, "--boot", "100", "--json"]) == 0
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return doc


def wandb_summaries(root: Path) -> dict[str, dict[str, Any]]:
    """Run id -> the summary keys its offline parts wrote (read from the .wandb logs)."""
    from wandb.proto import wandb_internal_pb2 as pb

    from scalerl.harness.importers.base import LossLog
    from scalerl.harness.importers.wandb_runs import _records

    out: dict[str, dict[str, Any]] = {}
    for f in sorted(root.glob("wandb/offline-run-*/run-*.wandb")):
        got = out.setdefault(f.parent.name.rsplit("-", 1)[-1], {})
        for data in _records(f, LossLog()):
            rec = pb.Record()
            rec.ParseFromString(data)
            if rec.WhichOneof("record_type") == "summary":
                got.update({i.key: json.loads(i.value_json) for i in rec.summary.update if i.key})
    return out


@pytest.mark.slow  # ~40 s: two real trackers, three imports, three fits, two exports
def test_the_first_hour_imports_fits_and_writes_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("SCALERL_SWEEP", raising=False)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    ids = write_mlflow(uri)
    store_path = tmp_path / "scalerl.db"
    url = str(store_path)  # a path, as MLflow and Optuna users pass one
    mapping = ["--baseline-run", "baseline-*", "--seed-from", "seed"]
    source = [f"mlflow:{uri}", "--experiment", "grpo-loo", "--sweep", "ml", *mapping, "--db", url]

    # --dry-run: the mapping the import infers, and nothing written.
    assert main(["import", *source, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "axis: perf/gpu_hours (gpu_hours), picked from the logged metrics" in out
    assert (
        "knob inferred from kl_coef, loss_type (not compared: output_dir: differs between the baseline's "
        in out
    )
    assert "seed: the seed" in out
    rows = {
        line.split()[0]: line.split()[1:]
        for line in out.splitlines()
        if line.startswith("  ") and "-s" in line
    }
    assert rows["dapo-s1"][:5] == ["completed", "loss_type=dapo", "loss_type", "dapo", "1"]
    assert rows["nokl-s2"][:5] == ["completed", "kl_coef=0.0", "kl_coef", "0.0", "2"]
    assert rows["baseline-s0"][:2] == ["completed", "baseline"]
    assert rows["dapo-s3"][:2] == ["failed", "loss_type=dapo"]
    assert not store_path.exists()

    # The import: no map file, no axis flag.
    assert main(["import", *source]) == 0
    out = capsys.readouterr().out
    assert "mapped 9 run(s) onto 3 variant(s): baseline, kl_coef=0.0, loss_type=dapo" in out
    assert "left out run 'dapo-s3': failed (FAILED): left out of the verdicts" in out
    assert "sweep 'ml' defaults for fit/report/forecast: metric 'val/acc' on axis 'gpu_hours'" in out

    # The right verdicts, on GPU-hours.
    doc = fit_json("ml", url, capsys)
    assert (doc["metric"], doc["axis"]) == ("val/acc", "gpu_hours")
    verdicts = {v["variant"]: v for v in doc["verdicts"]}
    mover = verdicts["loss_type=dapo"]
    assert mover["verdict"] == "asymptote-mover" and mover["knob"] == "loss_type"
    assert mover["d_a"] == pytest.approx(0.10, abs=0.02) and mover["d_a_lo"] > 0.02
    assert verdicts["kl_coef=0.0"]["verdict"] != "asymptote-mover"
    assert abs(verdicts["kl_coef=0.0"]["d_a"]) < 0.02

    # The failed run is not lost: listed with its state, and linked back like every run.
    assert main(["status", "ml", "--db", url, "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    states = sorted(r["status"] for r in status["runs"])
    assert states == ["completed"] * 9 + ["failed"]
    with Sweep.open("ml", db=url) as sweep:
        frame = sweep.runs_dataframe().set_index("params.output_dir")
    assert (frame["source"] == f"mlflow:{uri}#grpo-loo").all()
    assert frame.loc["/ckpt/dapo-s3", "source_run_id"] == ids["dapo-s3"]
    assert frame.loc["/ckpt/dapo-s3", "status"] == "failed"
    page = tmp_path / "report.html"
    assert main(["report", "ml", "--db", url, "-o", str(page)]) == 0
    assert "report:" in capsys.readouterr().out
    failed_id = str(frame.loc["/ckpt/dapo-s3", "run_id"])
    html = page.read_text()
    row = html[html.index(failed_id) : html.index(failed_id) + 300]
    assert "failed" in row  # the report's run table lists it, failed

    # Export: the numbers land on each source run in the real MLflow store.
    assert main(["export", "ml", "--db", url, "--boot", "100", "--to", "mlflow"]) == 0
    assert "written: 10 mlflow run(s)" in capsys.readouterr().out
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    with Sweep.open("ml", db=url) as sweep:
        fits = sweep.fit(n_boot=100, save=False)
        forecast = sweep.forecast().frame.set_index("variant")
    per_run = fits.fits[fits.fits["run_id"].notna()].set_index("run_id")
    dapo = client.get_run(ids["dapo-s1"]).data
    assert dapo.tags["scalerl.verdict"] == "asymptote-mover" and dapo.tags["scalerl.knob"] == "loss_type"
    assert dapo.metrics["scalerl/d_a"] == pytest.approx(mover["d_a"], abs=1e-9)
    assert dapo.metrics["scalerl/forecast"] == pytest.approx(
        forecast.loc["loss_type=dapo", "value"], abs=1e-9
    )
    dapo_id = frame.loc["/ckpt/dapo-s1", "run_id"]
    assert dapo.metrics["scalerl/A"] == pytest.approx(per_run.loc[dapo_id, "a"], abs=1e-9)
    assert dapo.metrics["scalerl/C_mid"] == pytest.approx(per_run.loc[dapo_id, "c_mid"], rel=1e-9)
    base = client.get_run(ids["baseline-s0"]).data
    assert "scalerl.verdict" not in base.tags and base.tags["scalerl.variant"] == "baseline"
    assert base.metrics["scalerl/A"] == pytest.approx(0.6, abs=0.02)

    # The same hour in W&B: offline runs, imported, fitted, and their summaries written back.
    root = tmp_path / "lab"
    write_wandb(root)
    assert main(["import", str(root / "wandb"), "--sweep", "wb", *mapping, "--db", url]) == 0
    out = capsys.readouterr().out
    assert "axis: perf/gpu_hours (gpu_hours)" in out and "onto 2 variant(s): baseline, loss_type=dapo" in out
    wb = {v["variant"]: v for v in fit_json("wb", url, capsys)["verdicts"]}
    assert wb["loss_type=dapo"]["verdict"] == "asymptote-mover"
    assert wb["loss_type=dapo"]["d_a"] == pytest.approx(0.10, abs=0.02)
    assert main(["export", "wb", "--db", url, "--boot", "100", "--json"]) == 0
    written = json.loads(capsys.readouterr().out)
    assert written["written"] == {"wandb-offline": 6}
    summaries = wandb_summaries(root)
    by_id = {r["where"].split()[3]: r for r in written["runs"]}
    assert set(by_id) <= set(summaries)
    for run_id, run in by_id.items():
        got = summaries[run_id]
        assert got["scalerl/A"] == pytest.approx(run["values"]["A"], abs=1e-12)
        assert got["scalerl/variant"] == run["values"]["variant"]
        assert (got.get("scalerl/verdict") == "asymptote-mover") == (run["values"]["variant"] != "baseline")
    # The written-back parts are parts of the same runs: a new import reads the same six runs.
    assert main(["import", str(root / "wandb"), "--sweep", "wb2", *mapping, "--db", url]) == 0
    out = capsys.readouterr().out
    assert "mapped 6 run(s) onto 2 variant(s)" in out and "360 point(s)" in out
    assert main(["status", "wb2", "--db", url, "--json"]) == 0
    assert {r["status"] for r in json.loads(capsys.readouterr().out)["runs"]} == {"completed"}
