"""Submission rules end to end with the debug executor and a real SQLite store: what is submitted,
skipped and retried, and what a failed run records."""

from __future__ import annotations

from pathlib import Path

import pytest

from scalerl import db
from scalerl.db import queries
from scalerl.harness.execution.sweep import launch, prepare
from tests.unit.execution.helpers import expected_steps, write_command_sweep


def _launch(sweep_file: Path, url: str, state: Path) -> tuple[object, dict[str, str]]:
    prepared = prepare(sweep_file, [], executor="debug", profile=None, db_url=url, state_dir=state)
    store = db.open_store(url)
    report = launch(store, prepared)
    return store, {d.spec.variant: d.action for d in report.decisions}


def test_two_runs_complete_and_resubmission_submits_nothing(tmp_path: Path) -> None:
    sweep = write_command_sweep(tmp_path, steps=20)
    url = f"sqlite:///{tmp_path / 's.db'}"
    store, actions = _launch(sweep, url, tmp_path / "state")
    assert actions == {"baseline": "submit", "loo-dapo": "submit"}
    runs = queries.runs(store, "cmd").set_index("variant")
    assert list(runs["status"]) == ["completed", "completed"]
    assert list(runs["attempts"]) == [1, 1]
    curves = queries.curves(store, "cmd", metric="val/pass_rate")
    for variant in ("baseline", "loo-dapo"):
        steps = sorted(curves[curves.variant == variant]["step"])
        assert steps == expected_steps(20)
    # the trainer's ceiling depends on the templated --loss: cispo 0.62 > dapo 0.55
    last = curves[curves.step == 20].set_index("variant")["value"]
    assert last["baseline"] > last["loo-dapo"] + 0.03

    _, again = _launch(sweep, url, tmp_path / "state")
    assert again == {"baseline": "skip-completed", "loo-dapo": "skip-completed"}
    events = queries.events(store, "cmd")
    assert int((events.kind == "submitted").sum()) == 2  # nothing new was submitted


def test_failed_run_records_stderr_and_only_it_is_retried(tmp_path: Path) -> None:
    sweep = write_command_sweep(tmp_path, steps=20, fail_variant_arg="dapo", max_retries=1)
    url = f"sqlite:///{tmp_path / 's.db'}"
    store, actions = _launch(sweep, url, tmp_path / "state")
    assert actions == {"baseline": "submit", "loo-dapo": "submit"}
    runs = queries.runs(store, "cmd").set_index("variant")
    assert runs.loc["baseline", "status"] == "completed"
    assert runs.loc["loo-dapo", "status"] == "failed"
    error = str(runs.loc["loo-dapo", "error"])
    assert "exited with status 3" in error
    assert "simulated failure at step 7 (loss=dapo)" in error  # the script's stderr tail
    # points before the failure were kept (steps 5 only: eval every 5, failure at 7)
    curves = queries.curves(store, "cmd", metric="val/pass_rate")
    assert sorted(curves[curves.variant == "loo-dapo"]["step"]) == [5]

    _, retry = _launch(sweep, url, tmp_path / "state")
    assert retry == {"baseline": "skip-completed", "loo-dapo": "retry"}
    assert store.get_run(runs.loc["loo-dapo", "run_id"]).attempts == 2

    # max_retries=1 is used up: a third launch gives up on it
    _, third = _launch(sweep, url, tmp_path / "state")
    assert third == {"baseline": "skip-completed", "loo-dapo": "exhausted"}


def test_client_reporting_writes_points_with_the_attempt(tmp_path: Path) -> None:
    sweep = write_command_sweep(tmp_path, steps=10, knobs=(), report="client")
    url = f"sqlite:///{tmp_path / 's.db'}"
    store, actions = _launch(sweep, url, tmp_path / "state")
    assert actions == {"baseline": "submit"}
    curves = queries.curves(store, "cmd", metric="val/pass_rate")
    assert sorted(curves["step"]) == [5, 10]
    assert list(curves["flops"]) == pytest.approx([5e12, 10e12])


def test_unknown_executor_names_the_valid_ones(tmp_path: Path) -> None:
    from scalerl.harness.errors import ConfigError

    sweep = write_command_sweep(tmp_path)
    with pytest.raises(ConfigError, match=r"--executor='nope'.*\['debug', 'local', 'slurm'\]"):
        prepare(sweep, [], executor="nope", profile=None, db_url=f"sqlite:///{tmp_path / 's.db'}")


def test_bad_placeholder_is_reported_before_anything_is_submitted(tmp_path: Path) -> None:
    from scalerl.harness.errors import ConfigError

    sweep = write_command_sweep(tmp_path, extra_args=("--lr", "{optimizer.learning_rate}"))
    with pytest.raises(ConfigError) as err:
        prepare(sweep, [], executor="debug", profile=None, db_url=f"sqlite:///{tmp_path / 's.db'}")
    assert "unknown placeholder {optimizer.learning_rate}" in str(err.value)
    assert "optimizer.lr" in str(err.value)  # the valid names are listed
    assert not (tmp_path / "s.db").exists()  # nothing was recorded
