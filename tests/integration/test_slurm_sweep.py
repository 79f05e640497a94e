"""Sweeps on the real single-node Slurm testbed through submitit job arrays.

The store is a real SQLite file the jobs reach over the (shared) filesystem. One test runs the
reference trainer on the tiny preset and preempts one run the way Slurm does (USR2); the others
use the example command trainer, which runs in a fraction of a second.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from scalerl import db
from scalerl.db import queries
from scalerl.harness.execution.sweep import launch, prepare
from tests.unit.execution.helpers import REPO, expected_steps, wait_until_done, write_command_sweep

pytestmark = pytest.mark.slurm
PROFILE = str(REPO / "slurm" / "profiles" / "testbed.yaml")


def _launch(sweep_file: Path, tmp_path: Path, overrides: list[str] | None = None) -> tuple[Any, Any]:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    prepared = prepare(
        sweep_file,
        overrides or [],
        executor="slurm",
        profile=PROFILE,
        db_url=url,
        state_dir=tmp_path / "state",
    )
    store = db.open_store(url)
    return store, launch(store, prepared)


def _first_point(store: Any, sweep: str, run_id: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        runs = queries.runs(store, sweep).set_index("run_id")
        if int(runs.loc[run_id, "n_points"]) > 0 and runs.loc[run_id, "status"] == "running":
            return
        time.sleep(0.5)
    raise AssertionError(f"run {run_id} wrote no point within {timeout_s} s")


def test_tiny_sweep_completes_and_a_usr2_preempted_run_resumes_cleanly(
    slurm_cluster: Any, tmp_path: Path
) -> None:
    overrides = [
        "loo.knobs=[loss]",  # baseline + loo-dapo
        "seeds=[0]",  # one run each (the demo sweep runs 3 seeds)
        "budget.value=12",
        "eval.every_steps=3",
        "checkpoint_every_steps=100",  # only the USR2 checkpoint can make the resume clean
    ]
    store, report = _launch(REPO / "recipes" / "tiny-loo.yaml", tmp_path, overrides)
    handles = {h.run_id: h for h in report.handles}
    assert len(handles) == 2
    array_ids = {h.job_id.split("_")[0] for h in handles.values()}
    assert len(array_ids) == 1  # one sbatch: both runs share a resource shape
    base = next(d.spec for d in report.decisions if d.spec.variant == "baseline")

    _first_point(store, "tiny-loo", base.run_id, timeout_s=240)
    subprocess.run(["scancel", "--signal=USR2", handles[base.run_id].job_id], check=True, timeout=30)

    runs = wait_until_done(store, "tiny-loo", timeout_s=300).set_index("variant")
    assert list(runs["status"]) == ["completed", "completed"]
    assert runs.loc["baseline", "attempts"] == 2
    assert runs.loc["loo-dapo", "attempts"] == 1
    events = queries.events(store, "tiny-loo")
    requeued = events[(events.kind == "requeued") & (events.run_id == base.run_id)]
    assert len(requeued) == 1 and requeued.iloc[0]["detail"]["checkpointed"] is True
    started = events[(events.kind == "started") & (events.run_id == base.run_id)]["detail"].tolist()
    resumed_at = started[1]["resume_step"]
    assert resumed_at is not None and 1 <= resumed_at < 12  # resumed from the USR2 checkpoint

    curves = queries.curves(store, "tiny-loo", metric="val/pass_rate")
    steps = {v: sorted(curves[curves.variant == v]["step"]) for v in ("baseline", "loo-dapo")}
    assert steps["baseline"] == [0, 3, 6, 9, 12]  # every eval step, each once, no gap
    assert steps["baseline"] == steps["loo-dapo"]  # = the uninterrupted run's step set
    assert curves["value"].between(0.0, 1.0).all()


def test_command_sweep_ingests_the_jsonl_file_and_resubmission_submits_nothing(
    slurm_cluster: Any, tmp_path: Path
) -> None:
    sweep = write_command_sweep(tmp_path, steps=20, executor="slurm")
    store, report = _launch(sweep, tmp_path)
    assert [d.action for d in report.decisions] == ["submit", "submit"]
    runs = wait_until_done(store, "cmd", timeout_s=180).set_index("variant")
    assert list(runs["status"]) == ["completed", "completed"]
    curves = queries.curves(store, "cmd", metric="val/pass_rate")
    for variant, run_id in zip(runs.index, runs["run_id"], strict=True):
        lines = [
            line
            for line in (tmp_path / "state" / "runs" / run_id / "metrics.jsonl").read_text().splitlines()
            if line
        ]
        got = curves[curves.variant == variant]
        assert sorted(got["step"]) == expected_steps(20) and len(lines) == 4
        assert list(got["flops"]) == pytest.approx([5e12, 10e12, 15e12, 20e12])

    submitted_before = int((queries.events(store, "cmd").kind == "submitted").sum())
    _, again = _launch(sweep, tmp_path)
    assert [d.action for d in again.decisions] == ["skip-completed", "skip-completed"]
    assert again.handles == ()
    assert int((queries.events(store, "cmd").kind == "submitted").sum()) == submitted_before == 2


def test_a_failing_job_is_marked_failed_and_only_it_is_retried(slurm_cluster: Any, tmp_path: Path) -> None:
    sweep = write_command_sweep(tmp_path, steps=20, executor="slurm", fail_variant_arg="dapo", max_retries=1)
    store, _ = _launch(sweep, tmp_path)
    runs = wait_until_done(store, "cmd", timeout_s=180).set_index("variant")
    assert runs.loc["baseline", "status"] == "completed"
    assert runs.loc["loo-dapo", "status"] == "failed"
    assert "simulated failure at step 7 (loss=dapo)" in str(runs.loc["loo-dapo", "error"])

    _, retry = _launch(sweep, tmp_path)
    assert {d.spec.variant: d.action for d in retry.decisions} == {
        "baseline": "skip-completed",
        "loo-dapo": "retry",
    }
    assert [h.run_id for h in retry.handles] == [runs.loc["loo-dapo", "run_id"]]
    runs = wait_until_done(store, "cmd", timeout_s=180).set_index("variant")
    assert (runs.loc["loo-dapo", "status"], runs.loc["loo-dapo", "attempts"]) == ("failed", 2)
    assert runs.loc["baseline", "attempts"] == 1


def test_a_real_preemption_by_the_urgent_partition_requeues_and_the_curve_stays_clean(
    slurm_cluster: Any, tmp_path: Path
) -> None:
    # 30 s of "training": the preemption must land while it runs, even on a loaded machine.
    sweep = write_command_sweep(tmp_path, steps=200, knobs=(), executor="slurm", step_seconds=0.15)
    store, report = _launch(sweep, tmp_path)
    run_id = report.handles[0].run_id
    _first_point(store, "cmd", run_id, timeout_s=120)
    # A job in "urgent" needing every CPU preempts (requeues) the sweep's job: Slurm sends it SIGTERM.
    subprocess.run(
        ["sbatch", f"--partition={slurm_cluster.urgent_partition}", f"--cpus-per-task={slurm_cluster.cpus}",
         "--wrap", "sleep 2"],
        check=True, capture_output=True, timeout=30,
    )  # fmt: skip
    runs = wait_until_done(store, "cmd", timeout_s=240)
    events = queries.events(store, "cmd")
    got = (runs["status"].iloc[0], int(runs["attempts"].iloc[0]))
    assert got == ("completed", 2), f"{got}; events:\n{events[['kind', 'detail']].to_string()}"
    requeued = events[events.kind == "requeued"]["detail"].tolist()
    assert len(requeued) == 1 and requeued[0]["by"] == "slurm" and requeued[0]["attempt"] == 1
    curve = queries.curves(store, "cmd", metric="val/pass_rate")
    assert list(curve["step"]) == expected_steps(200)  # resumed from its checkpoint, no gap or duplicate
