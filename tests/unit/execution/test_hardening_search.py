"""Issue 26, rules 5 and 6 on searches: reuse and concurrency behave, cancel cancels.

Trials train recipes/examples/my_trainer.py through the command runner (a fraction of a second
each, or a few seconds with ``step_seconds``), in-process (debug executor) on a SQLite store.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml

from scalerl import db
from scalerl.db import queries
from scalerl.harness.cli import main
from scalerl.harness.errors import ConfigError
from scalerl.harness.execution.spec import Resources
from scalerl.harness.recipe import load_sweep
from scalerl.harness.recipe.search import FloatParam
from scalerl.harness.search import WorkerSpec, launch_search, run_worker
from scalerl.harness.search import worker as worker_mod
from scalerl.harness.search.worker import grid_points, worker_slot
from tests.integration.test_search import write_search

States = optuna.trial.TrialState


def _spec(sweep: Path, tmp_path: Path, url: str, index: int = 0) -> WorkerSpec:
    return WorkerSpec(str(sweep), (), url, str(tmp_path / "state"), executor="debug", index=index)


def _edit(sweep: Path, name: str, **optuna_section: Any) -> Path:
    """A copy of ``sweep`` named ``name`` (same base recipe) with its optuna section updated."""
    spec = yaml.safe_load(sweep.read_text())
    spec["sweep"] = name
    spec["optuna"].update(optuna_section)
    out = sweep.with_name(f"{name}.yaml")
    out.write_text(yaml.safe_dump(spec, sort_keys=False))
    return out


def _states(url: str, study: str = "srch") -> list[str]:
    return [t.state.name for t in optuna.load_study(study_name=study, storage=url).trials]


# ----------------------------------------------------------------- grids stay within bounds


@pytest.mark.parametrize(
    ("low", "high", "step", "want"),
    [
        (0.0, 1.0, 0.6, [0.0, 0.6]),
        (0.0, 0.3, 0.1, [0.0, 0.1, 0.2, 0.3]),
        (-1.0, 0.0, 0.4, [-1.0, -0.6, -0.2]),
    ],
)
def test_a_float_grid_never_leaves_its_bounds(
    low: float, high: float, step: float, want: list[float]
) -> None:
    grid = FloatParam(type="float", low=low, high=high, step=step).grid()
    assert grid == pytest.approx(want)
    assert grid is not None and all(low <= v <= high for v in grid)


def test_a_grid_search_trains_no_trial_outside_the_space(tmp_path: Path) -> None:
    sweep = write_search(tmp_path, n_trials=5, sampler={"type": "grid", "seed": 0})
    spec = yaml.safe_load(sweep.read_text())
    spec["optuna"]["space"] = {
        "optimizer.weight_decay": {"type": "float", "low": 0.0, "high": 1.0, "step": 0.6}
    }
    sweep.write_text(yaml.safe_dump(spec, sort_keys=False))
    points = grid_points(load_sweep(sweep))
    assert sorted(p["optimizer.weight_decay"] for p in points) == pytest.approx([0.0, 0.6])


# ----------------------------------------------------------------- a study is not someone else's


def _first_search(tmp_path: Path, url: str) -> Path:
    sweep = write_search(tmp_path, n_trials=2, sampler={"type": "grid", "seed": 0})
    run_worker(_spec(sweep, tmp_path, url))
    assert _states(url) == ["COMPLETE", "COMPLETE"]
    return sweep


def test_the_opposite_direction_on_an_existing_study_is_refused_by_name(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    sweep = _first_search(tmp_path, url)
    other = _edit(sweep, "srch-min", study="srch", objective={"kind": "final", "direction": "minimize"})

    def launch() -> Any:
        return launch_search(
            load_sweep(other), other, [], executor="local", resources=Resources(), profile=None,
            db_url=url, state_dir=tmp_path / "st2",
        )  # fmt: skip

    for attempt in (lambda: run_worker(_spec(other, tmp_path, url)), launch):
        with pytest.raises(ConfigError) as info:
            attempt()
        msg = str(info.value)
        assert "'srch'" in msg and "maximize" in msg and "minimize" in msg
        assert info.value.field == "optuna.objective.direction"
    assert _states(url) == ["COMPLETE", "COMPLETE"]  # nothing asked, nothing left RUNNING
    assert not (tmp_path / "st2" / "search").exists() or not list((tmp_path / "st2" / "search").iterdir())


def test_another_space_on_an_existing_study_is_refused_and_leaves_no_trial_running(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    sweep = _first_search(tmp_path, url)
    other = _edit(
        sweep,
        "srch-2",
        study="srch",
        space={"knobs.loss.choice": {"type": "categorical", "choices": ["cispo", "dapo"]}},
    )
    with pytest.raises(ConfigError) as info:
        run_worker(_spec(other, tmp_path, url))
    msg = str(info.value)
    assert "'srch'" in msg and "another space" in msg and "knobs.loss.choice" in msg and "fix:" in msg
    assert _states(url) == ["COMPLETE", "COMPLETE"]


def test_a_worker_error_after_ask_fails_its_trial_instead_of_leaving_it_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    sweep = write_search(tmp_path, n_trials=2)

    def broken(*_: Any, **__: Any) -> None:
        raise RuntimeError("the store went away")

    monkeypatch.setattr(worker_mod, "_run_trial", broken)
    with pytest.raises(RuntimeError):
        run_worker(_spec(sweep, tmp_path, url))
    study = optuna.load_study(study_name="srch", storage=url)
    assert [t.state for t in study.trials] == [States.FAIL]
    assert "the store went away" in study.trials[0].user_attrs["error"]


# ----------------------------------------------------------------- two launches, one store


def test_two_launches_seed_their_workers_apart(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    sweep = load_sweep(write_search(tmp_path))
    store = db.open_store(url)
    store.ensure_sweep(sweep.sweep, sweep.model_dump(mode="json", by_alias=True))
    # Each launch numbers its workers from 0; their sampler seeds must differ all the same.
    slots = [worker_slot(store, sweep, _spec(Path(), tmp_path, url, index=i)) for i in (0, 1, 0, 1)]
    assert slots == [0, 1, 2, 3]


def test_two_trials_on_one_run_at_once_both_end_with_its_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two workers whose trials ask for the same run at the same instant (the twin check races):
    the later attempt fences the earlier, whose trial then takes the run's result, not FAIL."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    sweep = write_search(tmp_path, n_trials=2, steps=40, step_seconds=0.05)
    spec = yaml.safe_load(sweep.read_text())
    spec["optuna"]["space"] = {"knobs.loss.choice": {"type": "categorical", "choices": ["cispo"]}}
    sweep.write_text(yaml.safe_dump(spec, sort_keys=False))
    real = worker_mod._wait_for_twin

    def racing(*args: Any, earlier_only: bool = True, **kwargs: Any) -> None:
        if not earlier_only:  # only the twin check before a trial starts loses the race
            real(*args, earlier_only=earlier_only, **kwargs)

    monkeypatch.setattr(worker_mod, "_wait_for_twin", racing)
    store = db.open_store(url)
    reports: list[Any] = []
    threads = [
        threading.Thread(target=lambda i=i: reports.append(run_worker(_spec(sweep, tmp_path, url, i))))
        for i in (0, 1)
    ]
    threads[0].start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # the second worker asks while the first trains the run
        runs = queries.runs(store, "srch")
        if not runs.empty and int(runs["n_points"].fillna(0).max()) >= 1:
            break
        time.sleep(0.05)
    threads[1].start()
    for t in threads:
        t.join(120)
    assert len(reports) == 2  # neither worker died
    study = optuna.load_study(study_name="srch", storage=url)
    assert [t.state for t in study.trials] == [States.COMPLETE, States.COMPLETE]
    assert sum(r.failed for r in reports) == 0
    assert sum(r.complete for r in reports) == 2
    (run_id,) = {t.user_attrs["run_id"] for t in study.trials}
    assert study.trials[0].value == study.trials[1].value
    run = store.get_run(run_id)
    assert run is not None and run.status == "completed"
    steps = queries.curves(store, "srch", metric="val/pass_rate")["step"].tolist()
    assert sorted(steps) == sorted(set(steps))  # one curve, no duplicate point


# ----------------------------------------------------------------- cancel cancels


def test_cancel_stops_a_running_search_and_a_new_launch_resumes_it(tmp_path: Path, capsys: Any) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    sweep = write_search(
        tmp_path, n_trials=3, sampler={"type": "grid", "seed": 0}, steps=60, step_seconds=0.05
    )
    reports: list[Any] = []
    worker = threading.Thread(target=lambda: reports.append(run_worker(_spec(sweep, tmp_path, url))))
    worker.start()
    store = db.open_store(url)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # cancel once the first run has a few points
        runs = queries.runs(store, "srch")
        if not runs.empty and int(runs["n_points"].fillna(0).max()) >= 2:
            break
        time.sleep(0.1)
    assert main(["cancel", "srch", "--db", url]) == 0
    out = capsys.readouterr().out
    assert "search srch: cancelled" in out and ": cancelled" in out.split("search srch")[0]
    worker.join(60)
    assert not worker.is_alive(), "the worker kept going after the cancel"
    study = optuna.load_study(study_name="srch", storage=url)
    states = [t.state for t in study.trials]
    assert states.count(States.FAIL) == 1 and States.RUNNING not in states
    assert States.COMPLETE not in states  # no trial started after the cancel
    failed = next(t for t in study.trials if t.state == States.FAIL)
    assert "cancelled" in failed.user_attrs["error"]
    run = store.get_run(failed.user_attrs["run_id"])
    assert run is not None and run.status == "cancelled"
    # nothing left to cancel now: the exit status says so
    assert main(["cancel", "srch", "--db", url]) == 1
    # a new launch lifts the cancel and resumes the cancelled run from its checkpoint
    launch_search(
        load_sweep(sweep), sweep, [], executor="debug", resources=Resources(), profile=None,
        db_url=url, state_dir=tmp_path / "state",
    )  # fmt: skip
    study = optuna.load_study(study_name="srch", storage=url)
    assert [t.state for t in study.trials].count(States.COMPLETE) == 3
    run = store.get_run(failed.user_attrs["run_id"])
    assert run is not None and run.status == "completed" and run.attempts == 2
