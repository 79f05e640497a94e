"""Local runs that wait for a machine-wide slot say who holds it, for real: a sweep's run holds
the only slot, another sweep's runs queue behind it, and ``scalerl status`` and the ``--wait``
progress name the holding sweep, run and pid; ``scalerl logs -f`` follows the holder's log until
its run ends."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from scalerl import db
from scalerl.harness.cli import main
from scalerl.harness.execution.executors.local_files import LocalLayout
from scalerl.harness.execution.executors.local_slots import holders
from scalerl.harness.execution.progress import follow
from tests.unit.execution.helpers import REPO, wait_until_done, write_command_sweep


def _scalerl(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scalerl.harness", *args],
        capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO,
    )  # fmt: skip


def _until(what: str, check: object, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def test_a_waiting_run_names_the_sweep_run_and_pid_that_hold_the_slot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Slots live in the user's private slot folder: give this test its own, so no other sweep on
    # the machine holds one (the schedulers inherit $SCALERL_SLOT_DIR; so does this process).
    slots_tmp = tmp_path / "tmp"
    slots_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(slots_tmp))
    monkeypatch.setenv("SCALERL_SLOT_DIR", str(slots_tmp / "slots"))
    monkeypatch.setattr(tempfile, "tempdir", str(slots_tmp))
    env = dict(os.environ)
    url = f"sqlite:///{tmp_path / 's.db'}"
    (tmp_path / "hog").mkdir()
    (tmp_path / "cmd").mkdir()
    # One run that would hold the only slot for 100 s: every look below sees it there; then it
    # is cancelled.
    hog = write_command_sweep(
        tmp_path / "hog", name="hog", knobs=(), steps=200, step_seconds=0.5, executor="local"
    )
    cmd = write_command_sweep(tmp_path / "cmd", name="cmd", steps=10, executor="local")
    common = ["--db", url, "--max-parallel", "1"]
    assert main(["sweep", str(hog), *common, "--state-dir", str(tmp_path / "st-hog")]) == 0
    _until("the hog's run to hold the slot", lambda: holders(1))
    (held,) = holders(1)
    hog_pid = int(LocalLayout(tmp_path / "st-hog").pid_file(held.run_id).read_text())
    assert (held.sweep, held.pid, held.slot) == ("hog", hog_pid, 0)

    assert main(["sweep", str(cmd), *common, "--state-dir", str(tmp_path / "st-cmd")]) == 0
    capsys.readouterr()
    waiting_file = LocalLayout(tmp_path / "st-cmd").root / "waiting.json"
    _until("the cmd scheduler to say it waits", waiting_file.exists)

    status = _scalerl("status", "cmd", "--db", url, "--json", env=env)
    assert status.returncode == 0, status.stderr
    doc = json.loads(status.stdout)
    (wait,) = doc["waiting"]
    assert wait["queued"] == 2 and wait["max_parallel"] == 1 and doc["counts"]["waiting"] == 2
    (holder,) = wait["holders"]
    assert (holder["sweep"], holder["run_id"], holder["pid"]) == ("hog", held.run_id, hog_pid)
    assert main(["status", "cmd", "--db", url]) == 0
    text = capsys.readouterr().out
    assert f"2 run(s) waiting for a machine-wide local slot (1 of 1 held): sweep hog run {held.run_id} " \
           f"(pid {hog_pid})" in text  # fmt: skip

    # The progress of `scalerl sweep --wait` (one tick) says the same.
    store = db.open_store(url)
    out = io.StringIO()
    follow(store, "cmd", metric="val/pass_rate", timeout_s=0.0, out=out)
    assert f"sweep hog run {held.run_id} (pid {hog_pid})" in out.getvalue()

    # `scalerl logs -f` on the holder (by a prefix of its id) follows until its run ends.
    logs = subprocess.Popen(
        [sys.executable, "-m", "scalerl.harness", "logs", held.run_id[:10], "-f", "--poll-s", "0.2",
         "--db", url],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO,
    )  # fmt: skip
    time.sleep(1.0)
    assert logs.poll() is None  # still following: the run goes on
    assert main(["cancel", "hog", "--db", url]) == 0
    out, err = logs.communicate(timeout=60)
    assert logs.returncode == 0, err
    assert f"scalerl job: run {held.run_id}:" in out  # the job's last line, written as it stopped

    # Once the slot is free, the queue moves on: the cmd scheduler takes it and stops waiting.
    _until("the cmd queue to move", lambda: not waiting_file.exists())
    assert main(["cancel", "cmd", "--db", url]) == 0  # (its runs need not finish here)
    wait_until_done(store, "hog", timeout_s=60)
    wait_until_done(store, "cmd", timeout_s=60)
