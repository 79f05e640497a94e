"""The local executor for real: ``scalerl sweep`` returns while a detached scheduler runs the
queue as subprocesses; a kill -9'd job is seen as failed and a resubmission converges."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from scalerl import db
from scalerl.db import queries
from scalerl.harness.execution.executors.local_files import LocalLayout
from tests.unit.execution.helpers import REPO, expected_steps, wait_until_done, write_command_sweep


def _scalerl(*args: str, env_extra: dict[str, str] | None = None, timeout: float = 240) -> str:
    env = {**os.environ, **(env_extra or {})}
    done = subprocess.run(
        [sys.executable, "-m", "scalerl.harness", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_two_run_sweep_end_to_end_with_wait(tmp_path: Path) -> None:
    sweep = write_command_sweep(tmp_path, steps=20, executor="local")
    url = f"sqlite:///{tmp_path / 's.db'}"
    out = _scalerl("sweep", str(sweep), "--db", url, "--state-dir", str(tmp_path / "st"), "--wait")
    assert "2 runs planned; submitted 2 to local" in out
    assert "2/2 done, 0 running, 0 waiting, 0 failed; 8 points" in out
    store = db.open_store(url)
    runs = queries.runs(store, "cmd")
    assert list(runs["status"]) == ["completed", "completed"]
    assert list(runs["executor"]) == ["local", "local"]
    curves = queries.curves(store, "cmd", metric="val/pass_rate")
    assert sorted(curves["step"]) == sorted(expected_steps(20) * 2)
    # the scheduler exits when its queue is empty: no process holds the sweep's lock
    layout = LocalLayout(tmp_path / "st")
    for _ in range(20):
        probe = layout.lock.open("a")
        try:
            fcntl.flock(probe.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except OSError:
            time.sleep(0.5)
        finally:
            probe.close()
    else:
        raise AssertionError("the local scheduler is still running after the sweep finished")
    status = _scalerl("status", "cmd", "--db", url)
    assert "2/2 done" in status and status.count("completed") == 2


def _children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def test_kill_9_of_a_local_job_then_resubmission_converges(tmp_path: Path) -> None:
    sweep = write_command_sweep(tmp_path, steps=40, knobs=(), executor="local", step_seconds=0.1)
    url = f"sqlite:///{tmp_path / 's.db'}"
    state = tmp_path / "st"
    out = _scalerl("sweep", str(sweep), "--db", url, "--state-dir", str(state))
    assert "submitted 1 to local" in out  # returned without waiting
    store = db.open_store(url)
    run_id = str(queries.runs(store, "cmd")["run_id"].iloc[0])
    layout = LocalLayout(state)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        runs = queries.runs(store, "cmd")
        if layout.pid_file(run_id).exists() and int(runs["n_points"].iloc[0]) >= 2:
            break
        time.sleep(0.2)
    else:
        raise AssertionError("the local job never wrote two points")
    pid = int(layout.pid_file(run_id).read_text())
    for victim in [*_children(pid), pid]:  # the job and the trainer it launched
        os.kill(victim, signal.SIGKILL)

    status = _scalerl("status", "cmd", "--db", url)
    assert "failed" in status and "ended without finishing the run" in status
    assert store.get_run(run_id).status == "failed"

    out = _scalerl("sweep", str(sweep), "--db", url, "--state-dir", str(state))
    assert "retry" in out
    runs = wait_until_done(store, "cmd", timeout_s=180)
    assert (runs["status"].iloc[0], int(runs["attempts"].iloc[0])) == ("completed", 2)
    curve = queries.curves(store, "cmd", metric="val/pass_rate")
    assert list(curve["step"]) == expected_steps(40)  # resumed from its checkpoint: no gap, no duplicate


def test_cancel_stops_the_job_and_marks_the_run_cancelled(tmp_path: Path) -> None:
    sweep = write_command_sweep(tmp_path, steps=200, knobs=(), executor="local", step_seconds=0.1)
    url = f"sqlite:///{tmp_path / 's.db'}"
    state = tmp_path / "st"
    _scalerl("sweep", str(sweep), "--db", url, "--state-dir", str(state))
    store = db.open_store(url)
    run_id = str(queries.runs(store, "cmd")["run_id"].iloc[0])
    layout = LocalLayout(state)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and store.get_run(run_id).status != "running":
        time.sleep(0.2)
    pid = int(layout.pid_file(run_id).read_text())
    out = _scalerl("cancel", "cmd", "--run", run_id, "--db", url)
    assert f"{run_id}: cancelled" in out and "cancelled 1 run(s)" in out
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
        time.sleep(0.2)
    assert not Path(f"/proc/{pid}").exists()  # the job stopped (SIGTERM -> checkpoint -> exit)
    assert layout.exit_file(run_id).read_text() == "0"
    assert store.get_run(run_id).status == "cancelled"
    # a later sweep submits it again (the user asked for it) and it resumes from its checkpoint
    again = _scalerl("sweep", str(sweep), "--db", url, "--state-dir", str(state))
    assert "submitted 1 to local" in again
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and store.get_run(run_id).attempts < 2:
        time.sleep(0.2)
    assert store.get_run(run_id).attempts == 2
    assert "cancelled 1 run(s)" in _scalerl("cancel", "cmd", "--db", url)  # leave nothing running
