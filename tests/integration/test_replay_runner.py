"""The replay runner through the real job body and a real SQLite store: a file curve stopped and
resumed by a second attempt, and a stored run replayed as another run, point for point."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from scalerl import db
from scalerl.db import RunRecord, queries
from scalerl.harness.execution.job import execute
from scalerl.harness.execution.submit import register
from scalerl.harness.execution.sweep import Prepared, launch, prepare
from scalerl.harness.importers import read_curves

REAL = Path("/work/shared/data/real-rl-curves")
WANDB = REAL / "wandb-export-deep-grpo" / "tree_methods_training_instability__test_reward.csv"
JSONL = REAL / "speedrl-dapo-json" / "1.5B-Math-FAST-RLOO-dataDAPO-N4+20" / "processed_metrics.json"
WANDB_METRIC = "val-core/openai/gsm8k/acc/mean@1"
COLUMNS = ["step", "metric", "value", "n", "gpu_hours", "flops", "tokens", "samples", "wall_s"]

pytestmark = pytest.mark.skipif(not REAL.is_dir(), reason="the real curves are not on this machine")


class StopAfter(threading.Event):
    """A stop event that reads as set from its ``n``-th check on: a preemption at an exact point."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.left = n

    def is_set(self) -> bool:
        self.left -= 1
        return self.left <= 0 or super().is_set()


def _sweep(folder: Path, name: str, runner: dict[str, Any], budget: dict[str, Any] | None = None) -> Path:
    recipe = {
        "name": f"{name}-recipe",
        "runner": runner,
        "budget": budget or {"value": 100_000, "unit": "steps"},
    }
    (folder / f"{name}-recipe.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
    sweep = {
        "sweep": name,
        "base": f"{name}-recipe.yaml",
        "design": "loo",
        "loo": {"knobs": []},
        "seeds": [0],
        "fit": {"metric": WANDB_METRIC, "axis": "step", "window": {"fraction": 0.1}},
        "resources": {"cpus": 1, "gpus": 0, "mem_gb": 1, "time_min": 10},
        "executor": "debug",
        "max_retries": 1,
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(sweep, sort_keys=False))
    return path


def _prepare(sweep_file: Path, url: str, state: Path) -> Prepared:
    return prepare(sweep_file, [], executor="debug", profile=None, db_url=url, state_dir=state)


def _run(store: Any, run_id: str) -> db.RunInfo:
    info = store.get_run(run_id)
    assert info is not None, run_id
    return info


def _points(store: Any, sweep: str) -> pd.DataFrame:
    frame = queries.curves(store, sweep)
    frame = frame.assign(metric=frame["metric"].astype(str))
    return frame[COLUMNS].sort_values(["metric", "step"]).reset_index(drop=True)


def test_file_replay_stopped_and_resumed_by_the_job_body_equals_the_source(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    prepared = _prepare(_sweep(tmp_path, "wb", {"type": "replay", "file": str(WANDB)}), url, tmp_path / "st")
    store = db.open_store(url)
    register(store, "wb", prepared.sweep.model_dump(mode="json", by_alias=True), prepared.planned)
    (spec,) = prepared.specs

    assert execute(spec, executor="debug", stop=StopAfter(60)) == "stopped"
    first = _points(store, "wb")
    assert list(first["step"]) == list(range(0, 59 * 5, 5))  # 59 points, then the stop
    assert _run(store, spec.run_id).status == "running"  # stopped runs stay unfinished

    assert execute(spec, executor="debug", stop=threading.Event()) == "completed"
    run = _run(store, spec.run_id)
    assert run.status == "completed" and run.attempts == 2
    (curve,) = read_curves(WANDB)
    stored = _points(store, "wb")
    assert list(stored["metric"].unique()) == [WANDB_METRIC]
    assert stored["step"].tolist() == curve.steps.tolist()  # no gap, no duplicate
    assert stored["value"].tolist() == curve.values.tolist()  # exact, not approximately
    assert stored[["n", "gpu_hours", "flops", "tokens", "samples", "wall_s"]].isna().all().all()
    # A requeue after completion is skipped by the job body.
    assert execute(spec, executor="debug", stop=threading.Event()) == "skipped"


def test_a_stored_run_replayed_as_another_run_has_the_same_points(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    runner_a = {
        "type": "replay",
        "file": str(JSONL),
        "metrics": ["val-core/MATH500-*/acc/mean@1", "val-core/AIME-*/acc/mean@16"],
        "compute": {
            "gpu_hours": {"column": "accumulated_training_time", "scale": 2 / 3600},
            "flops": {"column": "step", "scale": 1e15},
        },
    }
    prepared_a = _prepare(_sweep(tmp_path, "src", runner_a), url, tmp_path / "st")
    store = db.open_store(url)
    report = launch(store, prepared_a)
    assert [d.action for d in report.decisions] == ["submit"]
    (run_a,) = (s.run_id for s in prepared_a.specs)
    assert _run(store, run_a).status == "completed"
    a = _points(store, "src")
    assert len(a) == 2 * 18 and sorted(a["metric"].unique()) == [
        "val-core/AIME-Qwen-instruct/acc/mean@16",
        "val-core/MATH500-Qwen-instruct/acc/mean@1",
    ]

    # Run B replays run A from the store (the job's own store: no db_url), compute carried over.
    prepared_b = _prepare(_sweep(tmp_path, "copy", {"type": "replay", "run_id": run_a}), url, tmp_path / "st")
    launch(store, prepared_b)
    (run_b,) = (s.run_id for s in prepared_b.specs)
    assert run_b != run_a and _run(store, run_b).status == "completed"
    pd.testing.assert_frame_equal(_points(store, "copy"), a)

    # A budget in a compute unit of the stored run caps run C (another store URL form: db_url).
    runner_c = {"type": "replay", "run_id": run_a, "db_url": url, "metrics": ["*MATH500*"]}
    prepared_c = _prepare(
        _sweep(tmp_path, "cap", runner_c, {"value": 4.0, "unit": "gpu_hours"}), url, tmp_path / "st"
    )
    launch(store, prepared_c)
    c = _points(store, "cap")
    math500 = a[a.metric == "val-core/MATH500-Qwen-instruct/acc/mean@1"]
    pd.testing.assert_frame_equal(c, math500[math500.gpu_hours <= 4.0].reset_index(drop=True))
    assert 0 < len(c) < len(math500)


def test_sample_counts_and_nonfinite_values_survive_a_store_replay(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    store = db.open_store(url)
    store.ensure_sweep("hand", {})
    store.register_run(
        RunRecord(
            run_id="hand0000hand0000-s0",
            sweep="hand",
            variant="baseline",
            seed=0,
            config={},
            config_hash="hand0000hand0000",
            knob=None,
            alternative=None,
        )
    )
    attempt = store.start_attempt("hand0000hand0000-s0", executor="test", job_id=None, host="here")
    with store.writer("hand0000hand0000-s0", attempt) as writer:
        for step in range(0, 50, 10):
            value = float("nan") if step == 20 else 0.3 + step / 100
            writer.add(
                step,
                {"val/pass_rate": value, "train/loss": 1.0 / (step + 1)},
                {"flops": step * 1e12, "samples": step * 64.0},
                n={"val/pass_rate": 128},
            )
    store.finish_run("hand0000hand0000-s0", attempt, "completed")

    runner = {
        "type": "replay",
        "run_id": "hand0000hand0000-s0",
        "compute": {"tokens": {"column": "samples", "scale": 16}},
    }
    launch(store, _prepare(_sweep(tmp_path, "rep", runner), url, tmp_path / "st"))
    got = _points(store, "rep")
    src = _points(store, "hand")
    assert got[["step", "metric"]].equals(src[["step", "metric"]])
    np.testing.assert_array_equal(got["value"].to_numpy(), src["value"].to_numpy())  # NaN where NaN
    assert got["n"].tolist()[5:] == [128.0] * 5 and got["n"].iloc[:5].isna().all()  # train/loss has none
    assert got["tokens"].tolist() == (src["samples"] * 16).tolist()
    assert got[["gpu_hours", "flops", "samples", "wall_s"]].isna().all().all()  # only the mapped unit
