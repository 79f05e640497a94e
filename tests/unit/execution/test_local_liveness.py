"""The local executor's view of its jobs when attempts of one run overlap: a killed attempt reaped
after its successor started does not make the successor read as finished, and a job caught inside
execve is alive."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import IO, Any, ClassVar

import pytest

from scalerl.harness.execution.executors import local_scheduler as sched
from scalerl.harness.execution.executors.base import ExecutorContext, JobHandle, JobState
from scalerl.harness.execution.executors.local import LocalExecutor
from scalerl.harness.execution.executors.local_files import LocalLayout, pid_alive


def _exited(rc: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-c", f"raise SystemExit({rc})"])
    proc.wait()
    return proc


def _slot(tmp_path: Path, name: str) -> IO[str]:
    return (tmp_path / name).open("w")


def _state(layout: LocalLayout, run_id: str) -> JobState:
    ex = LocalExecutor(ExecutorContext(state_dir=layout.state_dir))
    handle = JobHandle(run_id, "local", "queued-0", {"state_dir": str(layout.state_dir)})
    return ex.poll([handle])[run_id]


def test_reaping_an_older_attempt_leaves_the_running_successor_alone(tmp_path: Path) -> None:
    layout = LocalLayout(tmp_path / "st")
    layout.make()
    old = _exited(137)  # the killed attempt, reaped only now
    live = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(30)", "scalerl.harness.execution.job"]
    )
    try:
        layout.pid_file("r1").write_text(str(live.pid))  # the successor already started
        job = sched._Running(old, _slot(tmp_path, "s0"), "r1")
        assert sched._reap(layout, job) is True  # its slot is freed all the same
        assert not layout.exit_file("r1").exists()
        assert _state(layout, "r1") is JobState.RUNNING
    finally:
        live.kill()
        live.wait()


def test_reaping_the_current_attempt_records_its_exit_status(tmp_path: Path) -> None:
    layout = LocalLayout(tmp_path / "st")
    layout.make()
    proc = _exited(3)
    layout.pid_file("r1").write_text(str(proc.pid))
    assert sched._reap(layout, sched._Running(proc, _slot(tmp_path, "s0"), "r1")) is True
    assert layout.exit_file("r1").read_text() == "3"
    assert _state(layout, "r1") is JobState.FINISHED


def test_a_running_job_is_not_reaped(tmp_path: Path) -> None:
    layout = LocalLayout(tmp_path / "st")
    layout.make()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert sched._reap(layout, sched._Running(live, _slot(tmp_path, "s0"), "r1")) is False
        assert not layout.exit_file("r1").exists()
    finally:
        live.kill()
        live.wait()


class _FakeProcess:
    """A process as psutil describes it, on any OS (the table below stands in for a macOS one)."""

    table: ClassVar[dict[int, tuple[list[str], str, int]]] = {}

    def __init__(self, pid: int) -> None:
        import psutil

        if pid not in self.table:
            raise psutil.NoSuchProcess(pid)
        self.cmd, self.state, self.parent = self.table[pid]

    def status(self) -> str:
        return self.state

    def cmdline(self) -> list[str]:
        return self.cmd

    def ppid(self) -> int:
        return self.parent


def test_pid_alive_asks_psutil_not_procfs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Liveness comes from psutil (no /proc on a macOS laptop): a job, one inside execve, a
    zombie, a kernel thread and a stranger that took a reused pid."""
    import psutil

    job = ["python", "-m", "scalerl.harness.execution.job", "spec.json"]
    _FakeProcess.table = {
        10: (job, psutil.STATUS_SLEEPING, 1),
        11: ([], psutil.STATUS_RUNNING, 4242),  # inside execve: no command line for a moment
        12: (job, psutil.STATUS_ZOMBIE, 1),  # exited, not reaped yet
        13: ([], psutil.STATUS_IDLE, 2),  # a kernel thread took the pid
        14: (["bash"], psutil.STATUS_SLEEPING, 1),  # someone else took the pid
    }
    monkeypatch.setattr(psutil, "Process", _FakeProcess)
    got = {pid: pid_alive(pid) for pid in (10, 11, 12, 13, 14, 15)}
    assert got == {10: True, 11: True, 12: False, 13: False, 14: False, 15: False}


def test_pid_alive_on_a_real_zombie_and_a_real_job() -> None:
    marker = "scalerl-liveness-test-marker"
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", marker])
    dead = subprocess.Popen([sys.executable, "-c", "pass", marker])
    try:
        os.waitid(os.P_PID, dead.pid, os.WEXITED | os.WNOWAIT)  # exited, left unreaped: a zombie
        assert pid_alive(live.pid, marker=marker.encode())
        assert not pid_alive(live.pid)  # alive, but not a harness job
        assert not pid_alive(dead.pid, marker=marker.encode())
    finally:
        live.kill()
        live.wait()
        dead.wait()


def test_pid_alive_on_real_processes() -> None:
    assert pid_alive(os.getpid(), marker=b"pytest") or pid_alive(os.getpid(), marker=b"python")
    assert not pid_alive(os.getpid(), marker=b"no-such-marker-anywhere")
    assert not pid_alive(2**22 + 12345)  # above pid_max's default: no such process


def test_sync_never_pairs_a_resubmission_with_the_old_jobs_end(tmp_path: Path, monkeypatch: Any) -> None:
    """A resubmission from another terminal lands while `sync` polls the jobs: the old job's end
    must not mark the resubmitted run failed (its attempt, the fence, is still the old one's)."""
    from scalerl import db
    from scalerl.harness.execution import status

    store = db.open_store(f"sqlite:///{tmp_path / 's.db'}")
    store.ensure_sweep("s", {})
    store.register_run(db.RunRecord("r1", "s", "baseline", 0, {}, "h"))
    attempt = store.start_attempt("r1")
    store.finish_run("r1", attempt, "failed", error="killed")
    handle = JobHandle("r1", "local", "queued-1", {"state_dir": str(tmp_path / "st")})
    store.log_events("s", "submitted", {"r1": handle.as_event()})

    def poll_while_resubmitted(handles: Any, *args: Any) -> dict[str, JobState]:
        store.mark_runs(["r1"], "submitted")  # `scalerl sweep` elsewhere, mid-poll
        return {run_id: JobState.LOST for run_id in handles}  # the old job: gone

    monkeypatch.setattr(status, "poll_jobs", poll_while_resubmitted)
    status.sync(store, "s")
    run = store.get_run("r1")
    assert run is not None and (run.status, run.attempts) == ("submitted", 1)
