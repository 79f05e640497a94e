"""A lab's own compute axis, from its own logs, through the real libraries: an MLflow store and W&B
offline runs that log ``perf/gpu_hours`` (a running total), and a verl-layout TensorBoard log
directory that logs ``perf/total_num_tokens`` per step (``--axis-cumulative``). Each is imported
once with ``--axis-column`` and then fitted, forecast and reported with no ``--axis`` / ``--metric``:
the import stored the sweep's defaults.

Every run follows R(C) = A / (1 + (C_mid / C)^3) on its compute C, baseline A = 0.5 and the
``cispo`` variant A = 0.7 (three seeds each, noise 0.005), so the fit on the compute axis must find
both ceilings and call ``cispo`` an asymptote-mover.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from scalerl import db
from scalerl.harness.cli import main
from tests.integration.helpers import wandb_offline_env

STEPS = np.arange(1, 61)
C_MID_STEPS = 8  # the inflection: 52 points past it, the last fifth flat (a measured ceiling)
CEILING = {"base": 0.5, "cispo": 0.7}
HOURS_PER_STEP = 0.25
# --seed-sd: three seeds barely measure the seed noise (these synthetic runs carry none beyond 0.005).
FIT = ["--boot", "30", "--seed-sd", "0.02"]
MAPPING = ["--variant-from", "alt", "--seed-from", "seed", "--baseline", "base"]


def ceiling_curve(a: float, compute: np.ndarray, c_mid: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return a / (1.0 + (c_mid / compute) ** 3.0) + rng.normal(0.0, 0.005, compute.size)


def runs() -> Iterator[tuple[str, str, int]]:
    for alt in CEILING:
        for seed in range(3):
            yield f"{alt}-s{seed}", alt, seed


def check_fit(url: str, sweep: str, metric: str, axis: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`scalerl fit SWEEP` with no --axis / --metric fits ``metric`` on ``axis`` and finds both
    ceilings; the stored fits are on that axis."""
    assert main(["fit", sweep, *FIT, "--db", url]) == 0
    out = capsys.readouterr().out
    assert f"sweep {sweep}: metric {metric} on {axis};" in out
    row = next(line for line in out.splitlines() if line.startswith("alt "))
    knob, variant, verdict, a_base, a_var = row.split()[:5]
    assert (knob, variant, verdict) == ("alt", "alt=cispo", "asymptote-mover")
    assert float(a_base) == pytest.approx(0.5, abs=0.01) and float(a_var) == pytest.approx(0.7, abs=0.01)
    store = db.open_store(url)
    try:
        fits = db.queries.fits(store, sweep)
    finally:
        store.close()
    assert set(fits["axis"]) == {axis} and set(fits["metric"]) == {metric}
    # The pooled fits' C_mid sits on the compute axis, not on the step.
    c_mid = fits.loc[fits["run_id"].isna(), "c_mid"]
    expected = {"gpu_hours": HOURS_PER_STEP, "tokens": 1100.0}[axis] * C_MID_STEPS
    assert np.allclose(c_mid, expected, rtol=0.25)


# --- MLflow ----------------------------------------------------------------------------------------


def test_mlflow_sweep_on_logged_gpu_hours(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("mlflow")
    from mlflow import MlflowClient
    from mlflow.entities import Metric, Param

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    eid = client.create_experiment("loo")
    hours = STEPS * HOURS_PER_STEP
    for name, alt, seed in runs():
        run = client.create_run(eid, run_name=name)
        values = ceiling_curve(CEILING[alt], hours, C_MID_STEPS * HOURS_PER_STEP, 10 * seed + len(alt))
        stamp = 1_700_000_000_000
        metrics = [
            m
            for s, v, h in zip(STEPS.tolist(), values.tolist(), hours.tolist(), strict=True)
            for m in (
                Metric("val/acc", v, stamp + 1000 * s, s),
                Metric("train/loss", 1.0 / s, stamp + 1000 * s, s),
                Metric("perf/gpu_hours", h, stamp + 1000 * s, s),
            )
        ]
        client.log_batch(
            run.info.run_id, params=[Param("alt", alt), Param("seed", str(seed))], metrics=metrics
        )
        client.set_terminated(run.info.run_id)
    url = f"sqlite:///{tmp_path / 's.db'}"
    args = ["import", f"mlflow:{uri}", "--experiment", "loo", "--sweep", "ml", *MAPPING, "--db", url]
    assert main([*args, "--axis-column", "perf/gpu_hours"]) == 0
    out = capsys.readouterr().out
    # Two metrics per run (the axis is the x now), 60 points each.
    assert "imported 12 curve(s), 720 point(s) into sweep 'ml'" in out
    assert "defaults for fit/report/forecast: metric 'val/acc' on axis 'gpu_hours'" in out
    check_fit(url, "ml", "val/acc", "gpu_hours", capsys)
    # forecast needs no flags either: at 2x each variant's largest GPU-hours.
    assert main(["forecast", "ml", "--json", "--db", url]) == 0
    got = json.loads(capsys.readouterr().out)
    assert (got["metric"], got["axis"]) == ("val/acc", "gpu_hours")
    base = next(v for v in got["variants"] if v["variant"] == "baseline")
    assert base["last_compute"] == pytest.approx(60 * HOURS_PER_STEP)


# --- W&B offline runs ------------------------------------------------------------------------------

# wandb.init sets os.environ and starts a service process: the runs are written in a child.
WRITER = textwrap.dedent(
    """
    import json, sys
    import wandb
    for name, config, rows in json.load(sys.stdin):
        run = wandb.init(project="loo", name=name, config=config)
        for step, row in rows:
            run.log(row, step=step)
        run.finish()
    """
)


def test_wandb_offline_sweep_on_logged_gpu_hours(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("wandb")
    hours = STEPS * HOURS_PER_STEP
    payload = []
    for name, alt, seed in runs():
        values = ceiling_curve(CEILING[alt], hours, C_MID_STEPS * HOURS_PER_STEP, 10 * seed + len(alt))
        rows = [
            (s, {"eval/accuracy": v, "train/reward": v + 0.1, "perf/gpu_hours": h})
            for s, v, h in zip(STEPS.tolist(), values.tolist(), hours.tolist(), strict=True)
        ]
        payload.append((name, {"alt": alt, "seed": seed}, rows))
    env = wandb_offline_env(tmp_path)
    subprocess.run(
        [sys.executable, "-c", WRITER],
        input=json.dumps(payload),
        text=True,
        check=True,
        timeout=120,
        env={**os.environ, **env},
    )
    url = f"sqlite:///{tmp_path / 's.db'}"
    args = ["import", f"wandb-offline:{tmp_path / 'wandb'}", "--sweep", "wb", *MAPPING, "--db", url]
    assert main([*args, "--axis-column", "perf/gpu_hours"]) == 0
    out = capsys.readouterr().out
    assert "imported 12 curve(s), 720 point(s) into sweep 'wb'" in out
    assert "defaults for fit/report/forecast: metric 'eval/accuracy' on axis 'gpu_hours'" in out
    check_fit(url, "wb", "eval/accuracy", "gpu_hours", capsys)


# --- a verl-layout TensorBoard log directory -------------------------------------------------------

VAL = "val-core/openai/gsm8k/reward/mean@1"


def write_verl_run(run_dir: Path, alt: str, seed: int) -> None:
    """What verl's TensorBoard logger writes (tensorboard_log/<project>/<experiment>/): one
    add_scalar event per metric and step; validation before training at step 0; a per-step token
    count, a per-step time and a throughput under perf/."""
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    tokens = 1000.0 + 200.0 * (STEPS % 2)  # 1000, 1200, 1000, ...: mean 1100 a step
    total = np.cumsum(tokens)
    values = ceiling_curve(CEILING[alt], total, C_MID_STEPS * 1100.0, 10 * seed + len(alt))
    writer = EventFileWriter(str(run_dir))

    def scalar(step: int, tag: str, value: float) -> None:
        summary = Summary(value=[Summary.Value(tag=tag, simple_value=value)])
        writer.add_event(Event(wall_time=time.time(), step=step, summary=summary))

    scalar(0, VAL, 0.0)
    scalar(0, "val-aux/openai/gsm8k/reward/std@1", 0.0)
    for s, n, v in zip(STEPS.tolist(), tokens.tolist(), values.tolist(), strict=True):
        scalar(s, "perf/total_num_tokens", n)
        scalar(s, "perf/time_per_step", 30.0)
        scalar(s, "perf/throughput", n / 30.0)
        scalar(s, "critic/score/mean", v + 0.1)
        scalar(s, VAL, v)
        scalar(s, "val-aux/openai/gsm8k/reward/std@1", 0.1)
    writer.close()


def test_verl_tensorboard_sweep_on_the_running_total_of_tokens(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("tensorboard")
    project = tmp_path / "tensorboard_log" / "gsm8k-grpo"
    for name, alt, seed in runs():
        write_verl_run(project / name, alt, seed)
    url = f"sqlite:///{tmp_path / 's.db'}"
    regex = r"(?P<alt>[a-z]+)-s(?P<seed>\d+)"
    args = ["import", str(project), "--sweep", "verl", *MAPPING, "--run-regex", regex, "--db", url]
    # As logged, the per-step count falls (1200 -> 1000): refused, naming the flag.
    assert main([*args, "--axis-column", "perf/total_num_tokens"]) == 7
    assert "falls from 1200 at step 1 to 1000 at step 2" in capsys.readouterr().err
    # A rate is no compute: refused before anything is written, naming --axis-unit.
    assert main([*args, "--axis-column", "perf/throughput"]) == 7
    assert "is a rate, not an amount of compute spent" in capsys.readouterr().err
    assert main([*args, "--axis-column", "perf/total_num_tokens", "--axis-cumulative"]) == 0
    out = capsys.readouterr().out
    # 5 metrics per run; the step-0 validations sit at no compute (tokens 0).
    assert "imported 30 curve(s), 1812 point(s) into sweep 'verl'" in out
    assert f"defaults for fit/report/forecast: metric '{VAL}' on axis 'tokens'" in out
    store = db.open_store(url)
    try:
        points = db.queries.curves(store, "verl", VAL)
    finally:
        store.close()
    first = points[points["run_id"] == points["run_id"].iloc[0]].sort_values("step")
    assert first["tokens"].tolist()[:4] == [0.0, 1200.0, 2200.0, 3400.0]
    assert first["tokens"].max() == pytest.approx(1100.0 * 60)
    check_fit(url, "verl", VAL, "tokens", capsys)
    # The report needs no flags: it draws the stored fits on tokens.
    page = tmp_path / "verl.html"
    assert main(["report", "verl", "-o", str(page), "--db", url]) == 0
    assert "fits: store" in capsys.readouterr().out
    assert "against compute (tokens)" in page.read_text(encoding="utf-8")
