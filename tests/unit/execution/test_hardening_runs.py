"""Issue 26, rules 5 and 7 on planned sweeps: a flag never destroys a good run, success means
success, and a run's processes end with the run.

Every sweep here runs recipes/examples/my_trainer.py (or a small inline script) through the
command runner on the debug executor, in a fraction of a second.
"""

from __future__ import annotations

import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from scalerl import db
from scalerl.db import queries
from scalerl.harness.cli import main
from scalerl.harness.errors import ConfigError
from scalerl.harness.execution.sweep import extend, launch, prepare
from tests.unit.execution.helpers import expected_steps, write_command_sweep


def _run(sweep_file: Path, url: str, state: Path) -> tuple[Any, Any]:
    prepared = prepare(sweep_file, [], executor="debug", profile=None, db_url=url, state_dir=state)
    store = db.open_store(url)
    launch(store, prepared)
    return store, prepared


def _events(store: Any, sweep: str, kind: str) -> list[Any]:
    frame = queries.events(store, sweep)
    return list(frame.loc[frame.kind == kind, "detail"])


# ----------------------------------------------------------------- rule 5: --extend


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, "nan", "inf", 0.0, -5.0, 10.0, "x"])
def test_a_bad_extend_budget_is_refused_before_any_run_is_touched(tmp_path: Path, bad: Any) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    sweep_file = write_command_sweep(tmp_path, steps=20, knobs=())
    store, prepared = _run(sweep_file, url, tmp_path / "state")
    before = queries.runs(store, "cmd")[["run_id", "status", "attempts"]]
    assert list(before["status"]) == ["completed"]
    with pytest.raises(ConfigError) as info:
        extend(store, prepared, bad)
    assert info.value.field == "--extend"
    assert "fix" in str(info.value)
    after = queries.runs(store, "cmd")[["run_id", "status", "attempts"]]
    assert after.equals(before)  # still completed, no attempt spent
    assert _events(store, "cmd", "extended") == []


def test_extend_nan_on_the_cli_exits_non_zero_and_keeps_the_completed_run(
    tmp_path: Path, capsys: Any
) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    sweep_file = write_command_sweep(tmp_path, steps=20, knobs=())
    common = ["--db", url, "--executor", "debug", "--state-dir", str(tmp_path / "state")]
    assert main(["sweep", str(sweep_file), *common]) == 0
    capsys.readouterr()
    try:  # argparse may refuse the flag itself (SystemExit 2) before the sweep's own check
        code = main(["sweep", str(sweep_file), *common, "--extend", "nan"])
    except SystemExit as exit_:
        code = exit_.code
    assert code not in (0, None)
    err = capsys.readouterr().err
    assert "--extend" in err and "finite" in err
    store = db.open_store(url)
    runs = queries.runs(store, "cmd")
    assert list(runs["status"]) == ["completed"] and list(runs["attempts"]) == [1]
    assert _events(store, "cmd", "extended") == []


def test_extend_takes_a_command_run_further_from_its_own_checkpoint(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    sweep_file = write_command_sweep(tmp_path, steps=20, knobs=("loss",))
    store, prepared = _run(sweep_file, url, tmp_path / "state")
    assert set(queries.runs(store, "cmd")["status"]) == {"completed"}
    report = extend(store, prepared, 30)
    actions = {d.spec.variant: d.action for d in report.decisions}
    assert set(actions.values()) == {"extend"}, [d.reason for d in report.decisions]
    runs = queries.runs(store, "cmd")
    assert set(runs["status"]) == {"completed"} and set(runs["attempts"]) == {2}
    curves = queries.curves(store, "cmd", metric="val/pass_rate")
    for _, group in curves.groupby("run_id", observed=True):
        assert sorted(group["step"]) == expected_steps(30)  # no gap, no duplicate
    (first, *_) = _events(store, "cmd", "extended")
    assert (first["from"], first["to"], first["resume_step"]) == (20.0, 30.0, None)


# ----------------------------------------------------------------- rule 5: success means success


def _script_sweep(folder: Path, body: str, *, name: str = "scr", max_retries: int = 0) -> Path:
    """A one-run LOO sweep whose command is ``python script.py`` with ``body``."""
    script = folder / "script.py"
    script.write_text(body)
    sweep_file = write_command_sweep(folder, name=name, steps=10, knobs=(), max_retries=max_retries)
    recipe_path = folder / f"{name}-recipe.yaml"
    recipe = yaml.safe_load(recipe_path.read_text())
    recipe["runner"]["argv"] = [sys.executable, str(script)]
    recipe_path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    return sweep_file


def test_a_command_that_exits_0_and_logs_no_points_is_failed(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    sweep_file = _script_sweep(tmp_path, "print('all done')\n")
    store, _ = _run(sweep_file, url, tmp_path / "state")
    (row,) = queries.runs(store, "scr").to_dict("records")
    assert row["status"] == "failed"
    run = store.get_run(row["run_id"])
    assert run is not None and run.error is not None
    assert "logged no points" in run.error and "SCALERL_METRICS_FILE" in run.error


# ----------------------------------------------------------------- rule 7: non-finite points


def test_a_nan_metric_is_a_counted_non_finite_point_not_a_failed_run(tmp_path: Path) -> None:
    body = (
        "import os\n"
        "with open(os.environ['SCALERL_METRICS_FILE'], 'a') as fh:\n"
        '    fh.write(\'{"step": 5, "metrics": {"val/pass_rate": 0.5}, "compute": {"flops": 5}}\\n\')\n'
        '    fh.write(\'{"step": 10, "metrics": {"val/pass_rate": NaN, "loss": Infinity}, '
        '"compute": {"flops": 10}}\\n\')\n'
        '    fh.write(\'{"step": 15, "metrics": {"val/pass_rate": 0.6}, "compute": {"flops": NaN}}\\n\')\n'
        '    fh.write(\'{"step": 20, "metrics": {"val/pass_rate": 0.7}, "compute": {"flops": -20}}\\n\')\n'
    )
    url = f"sqlite:///{tmp_path / 's.db'}"
    store, _ = _run(_script_sweep(tmp_path, body), url, tmp_path / "state")
    (row,) = queries.runs(store, "scr").to_dict("records")
    assert row["status"] == "completed"
    curves = queries.curves(store, "scr").sort_values(["metric", "step"])
    got = {(r.metric, r.step): r.value for r in curves.itertuples()}
    assert got[("val/pass_rate", 5)] == 0.5
    assert math.isnan(got[("val/pass_rate", 10)]) and got[("loss", 10)] == math.inf
    assert ("val/pass_rate", 15) not in got  # no finite compute: it cannot be placed, as importers do
    assert ("val/pass_rate", 20) not in got  # nor a negative one (compute is cumulative)
    (losses,) = _events(store, "scr", "losses")
    assert losses["counts"] == {"non-finite-value": 2, "bad-axis": 2}


# ----------------------------------------------------------------- rule 7: processes end with the run


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead; only the init process may still have to reap it
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def _wait_dead(pid: int, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


_SPAWNS = (
    "import os, subprocess, sys, time\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
    "open(os.path.join(os.environ['SCALERL_CHECKPOINT_DIR'], '..', 'pids'), 'w').write("
    "f'{os.getpid()} {child.pid}')\n"
)


@pytest.mark.parametrize(
    "tail",
    [
        # a malformed metrics line fails the run while the trainer still runs
        "open(os.environ['SCALERL_METRICS_FILE'], 'a').write('not json\\n')\ntime.sleep(120)\n",
        # a clean exit that leaves a background child behind
        "open(os.environ['SCALERL_METRICS_FILE'], 'a').write("
        '\'{"step": 1, "metrics": {"m": 1.0}, "compute": {"flops": 1}}\\n\')\n',
    ],
    ids=["malformed-line", "leftover-child"],
)
def test_a_runs_processes_end_with_the_run(tmp_path: Path, tail: str) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    store, _ = _run(_script_sweep(tmp_path, _SPAWNS + tail), url, tmp_path / "state")
    (row,) = queries.runs(store, "scr").to_dict("records")
    pids = (tmp_path / "state" / "runs" / row["run_id"] / "pids").read_text().split()
    for pid in map(int, pids):
        assert _wait_dead(pid), f"process {pid} outlived run {row['run_id']} ({row['status']})"


def test_a_commands_processes_end_when_its_job_is_killed(tmp_path: Path) -> None:
    """SIGKILL the job process mid-run: the command and its children must not live on."""
    import signal
    import subprocess

    from scalerl.harness.execution.submit import register

    url = f"sqlite:///{tmp_path / 's.db'}"
    sweep_file = _script_sweep(tmp_path, _SPAWNS + "time.sleep(120)\n")
    prepared = prepare(sweep_file, [], executor="debug", profile=None, db_url=url, state_dir=tmp_path / "st")
    store = db.open_store(url)
    sweep = prepared.sweep
    register(store, sweep.sweep, sweep.model_dump(mode="json", by_alias=True), prepared.planned)
    (spec,) = prepared.specs
    path = tmp_path / "spec.json"
    spec.write(path)
    job = subprocess.Popen(
        [sys.executable, "-m", "scalerl.harness.execution.job", str(path), "local"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    pids_file = Path(spec.workdir) / "pids"
    deadline = time.monotonic() + 60
    while not (pids_file.is_file() and len(pids_file.read_text().split()) == 2):
        assert time.monotonic() < deadline and job.poll() is None, "the command never started"
        time.sleep(0.05)
    pids = [int(p) for p in pids_file.read_text().split()]
    job.send_signal(signal.SIGKILL)
    job.wait()
    for pid in pids:
        assert _wait_dead(pid), f"process {pid} outlived its SIGKILLed job"
