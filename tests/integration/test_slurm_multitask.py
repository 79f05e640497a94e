"""A multi-task Slurm job on the real testbed: every task runs the job body, only rank 0 owns
the run (one attempt, one writer, no fencing), and the other rank works in its own folder."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from scalerl import db
from scalerl.db import queries
from scalerl.harness.execution.sweep import launch, prepare
from tests.unit.execution.helpers import REPO, expected_steps, wait_until_done, write_command_sweep

pytestmark = pytest.mark.slurm


def test_a_two_task_run_has_one_attempt_written_by_rank_0(slurm_cluster: Any, tmp_path: Path) -> None:
    sweep = write_command_sweep(tmp_path, steps=20, knobs=(), executor="slurm", step_seconds=0.05)
    url = f"sqlite:///{tmp_path / 'store.db'}"
    prepared = prepare(
        sweep,
        ["resources.tasks_per_node=2"],
        executor="slurm",
        profile=str(REPO / "slurm" / "profiles" / "testbed.yaml"),
        db_url=url,
        state_dir=tmp_path / "state",
    )
    assert prepared.specs[0].resources.tasks_per_node == 2
    assert prepared.executor.parameters(prepared.specs[0].resources, "cmd")["ntasks_per_node"] == 2
    store = db.open_store(url)
    report = launch(store, prepared)
    runs = wait_until_done(store, "cmd", timeout_s=240)
    assert list(runs["status"]) == ["completed"] and list(runs["attempts"]) == [1]
    run_id = str(runs["run_id"].iloc[0])
    events = queries.events(store, "cmd")
    assert not (events.kind == "fenced").any()  # two writers would have fenced each other
    assert sorted(queries.curves(store, "cmd", metric="val/pass_rate")["step"]) == expected_steps(20)
    # both tasks ran the trainer: rank 1 in its own folder, its points written nowhere
    rank1 = tmp_path / "state" / "runs" / f"{run_id}.rank-1" / "metrics.jsonl"
    deadline = time.monotonic() + 60  # rank 1 may finish a moment after rank 0
    while time.monotonic() < deadline and not (rank1.is_file() and len(rank1.read_text().splitlines()) == 4):
        time.sleep(0.5)
    assert rank1.is_file() and len(rank1.read_text().splitlines()) == 4
    assert len(report.handles) == 1
