"""``design: optuna`` for real: trials are runs in a real SQLite store, the study is an Optuna
RDBStorage in the same file, workers run in-process, as local processes and after a stop.

Trials train recipes/examples/my_trainer.py (a command runner; a sigmoid whose ceiling depends on
the loss: cispo 0.62 > gspo 0.60 > dapo 0.55 > grpo 0.50), which takes a fraction of a second.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml

from scalerl import db
from scalerl.db import queries
from scalerl.harness.search import WorkerSpec, run_worker
from tests.unit.execution.helpers import REPO, expected_steps, write_command_sweep


def write_search(
    folder: Path,
    *,
    n_trials: int = 6,
    pruner: dict[str, Any] | None = None,
    sampler: dict[str, Any] | None = None,
    objective: dict[str, Any] | None = None,
    steps: int = 40,
    step_seconds: float = 0.0,
    workers: int = 1,
    executor: str = "debug",
) -> Path:
    base = write_command_sweep(folder, name="srch", steps=steps, step_seconds=step_seconds, executor=executor)
    spec = yaml.safe_load(base.read_text())
    spec.pop("loo")
    spec.update(
        design="optuna",
        optuna={
            "space": {
                "knobs.loss.choice": {"type": "categorical", "choices": ["cispo", "dapo", "gspo", "grpo"]}
            },
            "sampler": sampler or {"type": "tpe", "seed": 0},
            "n_trials": n_trials,
            "objective": objective or {"kind": "final"},
            "pruner": pruner or {"type": "none"},
            "workers": workers,
            "heartbeat_s": 5,
        },
    )
    out = folder / "search.yaml"
    out.write_text(yaml.safe_dump(spec, sort_keys=False))
    return out


def _spec(sweep: Path, tmp_path: Path, url: str, index: int = 0) -> WorkerSpec:
    return WorkerSpec(str(sweep), (), url, str(tmp_path / "state"), executor="debug", index=index)


def test_a_search_in_process_records_trials_as_runs_beside_its_study(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    sweep = write_search(tmp_path, n_trials=6, sampler={"type": "grid", "seed": 0})
    report = run_worker(_spec(sweep, tmp_path, url))
    # a grid over 4 losses is exhausted after 4 trials: Optuna's grid sampler stops the study
    study = optuna.load_study(study_name="srch", storage=url)
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert report.complete == len(done) >= 4
    store = db.open_store(url)
    runs = queries.runs(store, "srch").set_index("run_id")
    assert set(runs["status"]) == {"completed"}
    by_loss = {}
    for t in done:
        run_id = t.user_attrs["run_id"]
        assert run_id in runs.index  # every trial is a run of the sweep, under the run-id rules
        by_loss[t.params["knobs.loss.choice"]] = (t.value, run_id)
        stored = store.get_run(run_id)
        assert stored is not None and stored.status == "completed"
    assert len(runs) == 4 == len(by_loss)  # repeated parameters are the same run, trained once
    # the objective (final = mean of the last 3 points) follows the trainer's ceilings
    order = sorted(by_loss, key=lambda k: by_loss[k][0], reverse=True)
    assert order == ["cispo", "gspo", "dapo", "grpo"]
    assert study.best_trial.params == {"knobs.loss.choice": "cispo"}
    curves = queries.curves(store, "srch", metric="val/pass_rate")
    assert sorted(set(curves["step"])) == expected_steps(40)
    events = queries.events(store, "srch")
    trials = events[events.kind == "trial"]
    assert {d["params"]["knobs.loss.choice"] for d in trials["detail"]} == set(by_loss)
    assert {int(d["number"]) for d in trials["detail"]} >= {0, 1, 2, 3}


def test_a_forecast_objective_is_recorded_with_its_interval(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    sweep = write_search(
        tmp_path,
        n_trials=2,
        sampler={"type": "grid", "seed": 1},
        objective={"kind": "forecast", "at": 8.0e13, "level": 0.9},
        steps=40,
    )
    run_worker(_spec(sweep, tmp_path, url))
    study = optuna.load_study(study_name="srch", storage=url)
    for t in study.trials:
        assert t.state == optuna.trial.TrialState.COMPLETE
        lo, hi = t.user_attrs["objective_lo"], t.user_attrs["objective_hi"]
        assert lo < t.value < hi and t.user_attrs["objective_at"] == 8.0e13
        # my_trainer's curve at 8e13 FLOPs: 0.1 + (c - 0.1) / (1 + (15/80)^1.5), c the loss's ceiling
        ceiling = {"cispo": 0.62, "dapo": 0.55, "gspo": 0.60, "grpo": 0.50}[t.params["knobs.loss.choice"]]
        truth = 0.1 + (ceiling - 0.1) / (1 + (15 / 80) ** 1.5)
        assert lo <= truth <= hi  # the interval holds the curve's true value at the target


def test_a_pruned_trial_stops_its_run_with_a_checkpoint_and_status_pruned(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    sweep = write_search(
        tmp_path,
        n_trials=4,
        sampler={"type": "grid", "seed": 0},
        pruner={"type": "median", "options": {"n_startup_trials": 1, "n_warmup_steps": 0}},
        steps=40,
        step_seconds=0.05,  # the trainer runs while its points are read, so a prune can stop it
    )
    report = run_worker(_spec(sweep, tmp_path, url))
    study = optuna.load_study(study_name="srch", storage=url)
    pruned = [t for t in study.trials if t.state == optuna.trial.TrialState.PRUNED]
    assert report.pruned == len(pruned) >= 1
    store = db.open_store(url)
    runs = queries.runs(store, "srch").set_index("run_id")
    for t in pruned:
        run_id = t.user_attrs["run_id"]
        assert runs.loc[run_id, "status"] == "pruned"
        assert int(runs.loc[run_id, "last_step"]) < 40  # stopped before its budget
        assert (tmp_path / "state" / "runs" / run_id / "checkpoint" / "state.json").exists()
        # a pruned trial was below the median of the earlier trials at the step it stopped
        assert t.params["knobs.loss.choice"] in ("dapo", "grpo", "gspo")
    events = queries.events(store, "srch")
    assert len(events[events.kind == "pruned"]) == len(pruned)


def test_a_stopped_worker_hands_its_trial_to_the_next_which_resumes_the_same_run(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    sweep = write_search(
        tmp_path, n_trials=1, sampler={"type": "grid", "seed": 0}, steps=60, step_seconds=0.05
    )
    stop = threading.Event()
    first = threading.Thread(target=run_worker, args=(_spec(sweep, tmp_path, url), stop))
    first.start()
    store = db.open_store(url)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # stop once the run has a few points
        runs = queries.runs(store, "srch")
        if not runs.empty and int(runs["n_points"].iloc[0] or 0) >= 3:
            break
        time.sleep(0.1)
    stop.set()
    first.join(60)
    assert not first.is_alive()
    study = optuna.load_study(study_name="srch", storage=url)
    assert [t.state.name for t in study.trials] == ["FAIL", "WAITING"]
    run_worker(_spec(sweep, tmp_path, url, index=1))  # pops the copy, resumes the run
    study = optuna.load_study(study_name="srch", storage=url)
    assert [t.state.name for t in study.trials] == ["FAIL", "COMPLETE"]
    first_run, second_run = (t.user_attrs["run_id"] for t in study.trials)
    assert first_run == second_run
    assert study.trials[1].user_attrs["retry_of"] == 0
    rec = store.get_run(second_run)
    assert rec is not None and rec.status == "completed" and rec.attempts == 2
    steps = queries.curves(store, "srch", metric="val/pass_rate")["step"].tolist()
    assert steps == expected_steps(60)  # no gap, no duplicate


def test_local_workers_share_one_study_from_the_cli(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    sweep = write_search(tmp_path, n_trials=5, workers=2, executor="local", step_seconds=0.01)
    done = subprocess.run(
        [sys.executable, "-m", "scalerl.harness", "sweep", str(sweep), "--db", url, "--state-dir",
         str(tmp_path / "st"), "--wait"],
        capture_output=True, text=True, timeout=300, cwd=REPO, env={**os.environ},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:] + done.stdout[-2000:]
    assert "workers on local" in done.stdout
    study = optuna.load_study(study_name="srch", storage=url)
    finished = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert 5 <= len(finished) <= 6  # two workers asking at once may overshoot by one
    workers = {
        int(d["worker"])
        for d in queries.events(db.open_store(url), "srch").query("kind == 'trial'")["detail"]
    }
    assert workers == {0, 1}
    for i in (0, 1):
        log = (tmp_path / "st" / "search" / f"worker-{i}.log").read_text()
        assert f"scalerl search worker {i}:" in log
    fit = subprocess.run(
        [sys.executable, "-m", "scalerl.harness", "fit", "srch", "--db", url],
        capture_output=True, text=True, timeout=120, cwd=REPO,
    )  # fmt: skip
    assert fit.returncode == 0, fit.stderr[-2000:]
    assert "trial-0000" in fit.stdout


def test_a_space_corner_that_breaks_the_recipe_is_refused_before_any_worker(tmp_path: Path) -> None:
    from scalerl.harness.errors import ConfigError
    from scalerl.harness.recipe import load_sweep
    from scalerl.harness.search.space import check_space

    sweep = write_search(tmp_path)
    spec = yaml.safe_load(sweep.read_text())
    spec["optuna"]["space"]["scale.max_gen_len"] = {"type": "int", "low": 4, "high": 16}
    sweep.write_text(yaml.safe_dump(spec, sort_keys=False))
    with pytest.raises(ConfigError) as info:
        check_space(load_sweep(sweep))
    msg = str(info.value)
    assert "optuna.space.scale.max_gen_len=4" in msg and "search.yaml" in msg and "fix:" in msg


@pytest.mark.slurm
def test_search_workers_run_as_one_slurm_job_array(slurm_cluster: Any, tmp_path: Path) -> None:
    """Two workers as the tasks of one submitit array on the real testbed, sharing one study."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    sweep = write_search(tmp_path, n_trials=4, workers=2, executor="slurm", step_seconds=0.01)
    done = subprocess.run(
        [sys.executable, "-m", "scalerl.harness", "sweep", str(sweep), "--db", url, "--state-dir",
         str(tmp_path / "st"), "--profile", str(REPO / "slurm" / "profiles" / "testbed.yaml"), "--wait"],
        capture_output=True, text=True, timeout=420, cwd=REPO, env={**os.environ},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:] + done.stdout[-2000:]
    first = done.stdout.splitlines()[0]
    jobs = first.split("workers on slurm: ")[1].split(", ")
    assert len(jobs) == 2 and len({j.split("_")[0] for j in jobs}) == 1  # one array, two tasks
    study = optuna.load_study(study_name="srch", storage=url)
    finished = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert 4 <= len(finished) <= 5
    store = db.open_store(url)
    runs = queries.runs(store, "srch")
    assert set(runs["status"]) == {"completed"} and set(runs["executor"]) == {"slurm"}
    assert {t.user_attrs["run_id"] for t in finished} == set(runs["run_id"])
