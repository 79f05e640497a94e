"""Issue 40, runs that lie about how they ended: an attached script's exit status, SIGTERM and
SIGKILL, ``cancel`` of an attached run, a heartbeat gone quiet on another machine, and a command's
``setsid`` child that outlived its run.

Attached scripts run as real processes (the exit status is the interpreter's, not a test's);
several start at once to keep the wall time down."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from scalerl import db
from scalerl.db import queries
from scalerl.harness.cli import main
from scalerl.harness.execution import liveness
from tests.unit.execution.test_hardening_runs import _run, _script_sweep, _wait_dead

SCRIPT = """
import os, sys, time
from scalerl.harness import client
config = {{"mode": os.environ["MODE"]}}
run = client.init(sweep=os.environ["SWEEP"], seed=0, config=config, db=os.environ["URL"])
run.log(1, {{"m": 0.5}}, compute={{"flops": 1.0}})
run.flush()
{tail}
"""

# How a script ends -> the error its run is failed with (None: completed). Read at exit off the
# main module's frame and the sys.exit / exit() / quit() wrappers (client._exit_error).
ENDINGS = {
    "raise-3": ("raise SystemExit(3)", "status 3 (raise SystemExit at"),
    "raise-name": ("code = 7\nraise SystemExit(code)", "status 7 (raise SystemExit at"),
    "raise-text": ("raise SystemExit('bad')", "message 'bad' (status 1)"),
    "in-a-function": ("def main():\n    raise SystemExit(3)\nmain()", "Python does not show to exit hooks"),
    "raise-of-a-call": ("def main():\n    return 0\nraise SystemExit(main())", "does not show to exit hooks"),
    "raise-0": ("raise SystemExit(0)", None),
    "bare": ("raise SystemExit", None),
    "to-the-end": ("x = 1", None),
}


@pytest.mark.parametrize("mode", list(ENDINGS))
def test_how_a_script_ended_is_read_off_its_main_frame(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Was: raise SystemExit(3) (any status not given to sys.exit) completed the run."""
    from scalerl.harness import client

    tail, error = ENDINGS[mode]
    code = compile(f"x = 0\n{tail}\n", f"/lab/{mode}.py", "exec")
    frame = None
    try:
        exec(code, {"__name__": "__main__"})
    except SystemExit as exc:
        tb = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code is not code:
            tb = tb.tb_next
        frame = tb.tb_frame if tb is not None else None
    if frame is None:  # it ran to its end: its frame is the one exec left
        frame = _last_module_frame(code)
    monkeypatch.setattr(client, "_main_frame", frame)
    monkeypatch.setattr(client, "_exit_how", "")
    found = client._exit_error()
    assert (found is None) if error is None else (found is not None and error in found), found


def _last_module_frame(code: Any) -> Any:
    """The frame of ``code`` run to its end (exec keeps none: run it under a tracer that grabs it)."""
    grabbed: list[Any] = []

    def tracer(frame: Any, event: str, _arg: Any) -> Any:
        if frame.f_code is code:
            grabbed.append(frame)
        return None

    sys.settrace(tracer)
    try:
        exec(code, {"__name__": "__main__"})
    finally:
        sys.settrace(None)
    return grabbed[0]


def _start(folder: Path, url: str, sweep: str, mode: str, tail: str) -> subprocess.Popen[str]:
    script = folder / f"{mode}.py"
    script.write_text(SCRIPT.format(tail=tail))
    env = {**os.environ, "SWEEP": sweep, "MODE": mode, "URL": url}
    return subprocess.Popen([sys.executable, str(script)], env=env, stderr=subprocess.PIPE, text=True)


def _run_of(url: str, sweep: str) -> Any:
    try:
        store = db.open_store(url, readonly=True)
    except db.StoreError:  # not made yet (a process is creating it)
        return None
    try:
        runs = queries.runs(store, sweep)
        return None if runs.empty else store.get_run(str(runs["run_id"].iloc[0]))
    finally:
        store.close()


def test_an_attached_scripts_exit_status_is_its_runs_end_for_real(tmp_path: Path) -> None:
    """The same, end to end: a real interpreter exiting through raise SystemExit(3) and exit(4)
    (the status 0 cases complete, as the in-process cases above show)."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    db.open_store(url).close()
    cases = (
        ("raise", "raise SystemExit(3)", 3, "failed", "status 3 (raise SystemExit at"),
        ("exit", "exit(4)", 4, "failed", "status 4 (exit())"),
    )
    procs = {mode: _start(tmp_path, url, mode, mode, tail) for mode, tail, *_ in cases}
    for mode, _, code, status, error in cases:
        assert procs[mode].wait(timeout=120) == code, procs[mode].stderr.read() if procs[mode].stderr else ""
        run = _run_of(url, mode)
        assert run is not None and run.status == status, (mode, run)
        assert (run.error is None) if error is None else (error in str(run.error)), run.error


def _wait_running(url: str, sweep: str, proc: subprocess.Popen[str]) -> Any:
    """The attached run of ``sweep`` once it is running with its first point stored."""
    deadline = time.monotonic() + 60
    while True:
        run = _run_of(url, sweep)
        if (
            run is not None
            and run.status == "running"
            and queries.point_count(db.open_store(url), run.run_id)
        ):
            return run
        assert proc.poll() is None and time.monotonic() < deadline, "the attached script never started"
        time.sleep(0.1)


def test_sigterm_sigkill_and_cancel_end_an_attached_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: a SIGKILLed or SIGTERMed attached run stayed `running` forever; `cancel` could not end
    it ("no job to stop")."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    db.open_store(url).close()
    procs = {
        name: _start(tmp_path, url, name, name, "time.sleep(120)") for name in ("term", "kill", "cancel")
    }
    for name, proc in procs.items():
        _wait_running(url, name, proc)
    procs["term"].send_signal(signal.SIGTERM)
    procs["kill"].send_signal(signal.SIGKILL)
    assert procs["term"].wait(timeout=60) == 143 and procs["kill"].wait(timeout=60) == -signal.SIGKILL
    term = _run_of(url, "term")
    assert term.status == "failed" and "status 143 (SIGTERM)" in term.error
    assert _run_of(url, "kill").status == "running"  # nothing ran at its death: the next sync sees it
    assert main(["status", "kill", "--db", url]) == 0
    killed = _run_of(url, "kill")
    assert killed.status == "failed" and "lost: its process" in killed.error and "is gone" in killed.error
    capsys.readouterr()
    assert main(["cancel", "cancel", "--db", url]) == 0
    assert "cancelled" in capsys.readouterr().out
    assert procs["cancel"].wait(timeout=60) == 143  # its process got SIGTERM and ended
    cancelled = _run_of(url, "cancel")
    assert cancelled.status == "cancelled" and cancelled.error == "cancelled by user"


def test_a_run_whose_heartbeat_stopped_on_another_machine_is_lost(monkeypatch: pytest.MonkeyPatch) -> None:
    now = datetime.now(UTC)
    elsewhere = "00000000-0000-0000-0000-000000000000/4026531836/12345"
    row = SimpleNamespace(run_id="r", pid=77, pid_start=elsewhere, host="node7", heartbeat_at=now, attempts=1)
    assert liveness.lost(row, now=now) is None
    stale = now + timedelta(seconds=liveness.stale_after_s() + 1)
    reason = liveness.lost(row, now=stale)
    assert reason is not None and "no heartbeat from its process 77 on node7" in reason
    assert liveness.lost(SimpleNamespace(pid=None, pid_start=None, heartbeat_at=None)) is None  # pre-0007


def test_a_live_writer_beats_its_runs_heartbeat(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCALERL_HEARTBEAT_S", "0.1")
    store = db.open_store(f"sqlite:///{tmp_path / 's.db'}")
    store.register_run(db.RunRecord("r-s0", "s", "v", 0, {}, "h"))
    pid, start = liveness.this_process()
    attempt = store.start_attempt("r-s0", pid=pid, pid_start=start)
    first = store.get_run("r-s0")
    with store.writer("r-s0", attempt):
        time.sleep(0.6)
    later = store.get_run("r-s0")
    assert first is not None and later is not None and later.heartbeat_at > first.heartbeat_at
    assert liveness.lost(later) is None  # this very process: alive


_SETSID = (
    "import os, subprocess, sys, time\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'],\n"
    "                         start_new_session=True)\n"
    "open(os.path.join(os.environ['SCALERL_CHECKPOINT_DIR'], '..', 'pids'), 'w').write(f'{child.pid}')\n"
    "open(os.environ['SCALERL_METRICS_FILE'], 'a').write("
    '\'{"step": 1, "metrics": {"m": 1.0}, "compute": {"flops": 1}}\\n\')\n'
)


def test_a_setsid_child_does_not_outlive_its_run(tmp_path: Path) -> None:
    """Was: a child that called setsid left the command's process group and lived on."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    store, _ = _run(_script_sweep(tmp_path, _SETSID), url, tmp_path / "state")
    (row,) = queries.runs(store, "scr").to_dict("records")
    assert row["status"] == "completed"
    pid = int((tmp_path / "state" / "runs" / row["run_id"] / "pids").read_text())
    assert _wait_dead(pid), f"setsid child {pid} outlived run {row['run_id']}"


def test_a_setsid_child_does_not_outlive_a_cancelled_local_run(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    sweep = _script_sweep(tmp_path, _SETSID + "time.sleep(120)\n")
    text = sweep.read_text().replace("executor: debug", "executor: local")
    sweep.write_text(text)
    state = tmp_path / "state"
    assert main(["sweep", str(sweep), "--db", url, "--state-dir", str(state)]) == 0
    deadline = time.monotonic() + 60
    pids = None
    while pids is None:
        found = list((state / "runs").glob("*/pids")) if (state / "runs").is_dir() else []
        pids = found[0] if found and found[0].read_text() else None
        assert time.monotonic() < deadline, "the command never started"
        time.sleep(0.1)
    child = int(pids.read_text())
    assert main(["cancel", "scr", "--db", url]) == 0
    assert _wait_dead(child, timeout_s=20), f"setsid child {child} outlived the cancel"


@pytest.mark.slow
def test_a_sigkilled_search_worker_leaves_its_trial_and_run_failed(tmp_path: Path) -> None:
    """Was: the trial and its run stayed RUNNING and `sweep --wait` exited 0."""
    from tests.integration.test_search import write_search

    url = f"sqlite:///{tmp_path / 's.db'}"
    sweep = write_search(tmp_path, n_trials=1, steps=200, step_seconds=0.2, executor="local")
    state = tmp_path / "st"
    waiting = subprocess.Popen(
        [sys.executable, "-m", "scalerl.harness", "sweep", str(sweep), "--db", url, "--state-dir", str(state),
         "--wait"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 90
    while True:
        run = _run_of(url, "srch") if (tmp_path / "s.db").exists() else None
        if run is not None and run.status == "running":
            break
        assert waiting.poll() is None and time.monotonic() < deadline, "no trial started"
        time.sleep(0.2)
    worker = int((state / "search" / "worker-0.pid").read_text())
    os.kill(worker, signal.SIGKILL)
    out, _ = waiting.communicate(timeout=120)
    assert waiting.returncode == 1, out
    assert "trial 0 failed: worker lost: its process" in out
    lost = _run_of(url, "srch")
    assert lost.status == "failed" and "lost: its process" in lost.error
    import optuna

    study = optuna.load_study(study_name="srch", storage=url)
    assert [t.state.name for t in study.trials] == ["FAIL"]


def test_ending_a_command_spares_a_daemon_this_process_started_before_it() -> None:
    """The subreaper inherits every orphan, a database server started (and daemonised) earlier
    included: ending a command must not end that (the first version ended the tests' PostgreSQL)."""
    from scalerl.harness.execution.runners.procgroup import ProcessGroup, become_subreaper

    assert become_subreaper()
    spawn = (
        "import subprocess, sys\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'],\n"
        "                     start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        "print(p.pid)"
    )
    # Double-forked into its own session: when its parent exits it is re-parented to this process.
    daemon = subprocess.run([sys.executable, "-c", spawn], capture_output=True, text=True, check=True)
    pid = int(daemon.stdout)
    try:
        time.sleep(0.05)
        with ProcessGroup([sys.executable, "-c", "pass"], env=dict(os.environ), stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL) as group:  # fmt: skip
            group.proc.wait(timeout=30)
        assert not _wait_dead(pid, timeout_s=0.5), "a daemon born before the command was ended with it"
    finally:
        os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
