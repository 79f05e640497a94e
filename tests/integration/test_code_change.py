"""Resubmitting a sweep after its trainer changed (issue 25, item 4), for real: a lab's trainer in
its own git repository (subprocess git), the command runner, the debug executor, a SQLite file.
The sweep file, the store and the state dir live inside the repository, as a lab's often do, and
must not count as code. Each policy does what it says; status and the report say what changed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from scalerl import db
from scalerl.db import queries
from scalerl.harness.cli import main as cli_main
from scalerl.harness.errors import ExecutionError
from scalerl.harness.execution.sweep import launch, prepare
from tests.unit.execution.helpers import TRAINER, expected_steps, git, write_command_sweep


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git repository holding the trainer, with the sweep written into it; the working directory."""
    repo = tmp_path / "lab"
    repo.mkdir()
    git(repo, "init", "-q")
    shutil.copy(TRAINER, repo / "train.py")
    git(repo, "add", "train.py")
    git(repo, "commit", "-q", "-m", "trainer v1")
    sweep = write_command_sweep(repo, steps=10)
    recipe = repo / "cmd-recipe.yaml"
    recipe.write_text(recipe.read_text().replace(str(TRAINER), str(repo / "train.py")))
    monkeypatch.chdir(repo)  # a command runs where the sweep is submitted: its repository is the code
    monkeypatch.delenv("SCALERL_ON_CODE_CHANGE", raising=False)  # tests/conftest.py sets it: the default here
    return sweep


def _launch(
    sweep: Path, policy: str | None = None, overrides: tuple[str, ...] = ()
) -> dict[str, tuple[str, str]]:
    prepared = prepare(sweep, list(overrides), executor="debug", profile=None, db_url=URL, state_dir=None)
    store = db.open_store(URL)
    try:
        report = launch(store, prepared, on_code_change=policy)  # type: ignore[arg-type]
    finally:
        store.close()
    return {f"{d.spec.variant}/{d.spec.seed}": (d.action, d.reason) for d in report.decisions}


URL = "sqlite:///scalerl.db"  # relative: inside the repository, like the state dir (.scalerl)


def _commit_change(repo: Path) -> str:
    train = repo / "train.py"
    train.write_text(train.read_text() + "\n# v2: a changed trainer\n")
    git(repo, "commit", "-q", "-am", "trainer v2")
    return git(repo, "rev-parse", "HEAD")


def test_a_resubmission_after_a_code_change_is_reported_and_each_policy_does_what_it_says(
    lab: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = lab.parent
    v1 = git(repo, "rev-parse", "HEAD")
    first = _launch(lab)
    assert {a for a, _ in first.values()} == {"submit"}
    store = db.open_store(URL)
    runs = queries.runs(store, "cmd").set_index("variant")
    assert list(runs["status"]) == ["completed", "completed"]
    assert [p["commit"] for p in runs["provenance"]] == [v1, v1]
    assert [p["dirty"] for p in runs["provenance"]] == [False, False]  # db, state dir, sweep: not code
    ids = dict(zip(runs.index, runs["run_id"], strict=True))

    # Same code: nothing changed, nothing said.
    again = _launch(lab)
    assert {a for a, _ in again.values()} == {"skip-completed"}

    # The trainer changes (a commit). Default policy: refuse, naming the runs and the change.
    v2 = _commit_change(repo)
    submitted = int((queries.events(store, "cmd").kind == "submitted").sum())
    with pytest.raises(ExecutionError) as info:
        _launch(lab)
    msg = str(info.value)
    assert f"commit {v1[:7]} -> {v2[:7]}" in msg
    assert ids["baseline"] in msg and ids["loo-dapo"] in msg
    assert "the code changed since 2 of this sweep's runs were made" in msg
    assert "--on-code-change rerun" in msg and "--on-code-change reuse" in msg
    assert int((queries.events(store, "cmd").kind == "submitted").sum()) == submitted  # nothing went

    # reuse: results kept and said so; a new seed runs under the new code; the sweep now mixes.
    reused = _launch(lab, "reuse", ("seeds=[0,1]",))
    assert reused["baseline/0"][0] == "skip-completed"
    assert f"made by other code: commit {v1[:7]} -> {v2[:7]}" in reused["baseline/0"][1]
    assert reused["baseline/1"][0] == "submit"
    runs = queries.runs(store, "cmd")
    by_seed = {(r.variant, r.seed): r.provenance["commit"] for r in runs.itertuples()}
    assert by_seed == {("baseline", 0): v1, ("loo-dapo", 0): v1, ("baseline", 1): v2, ("loo-dapo", 1): v2}
    events = queries.events(store, "cmd")
    changed = events[events.kind == "code-changed"]
    assert sorted(changed["run_id"]) == sorted(ids.values())
    assert {d["policy"] for d in changed["detail"]} == {"reuse"}
    assert all(d["old"]["commit"] == v1 and d["new"]["commit"] == v2 for d in changed["detail"])

    capsys.readouterr()
    assert cli_main(["status", "cmd", "--db", URL]) == 0
    out = capsys.readouterr().out
    warning = next(line for line in out.splitlines() if line.startswith("warning:"))
    assert "this sweep mixes 2 code versions" in warning
    assert f"{v1[:7]} (2 runs)" in warning and f"{v2[:7]} (2 runs)" in warning
    assert out.count(v1[:7]) == 3 and out.count(v2[:7]) == 3  # the warning + two rows each

    from scalerl.harness.report.build import load_report_data
    from scalerl.harness.report.document import render_html

    html = render_html(load_report_data(store, "cmd", axis="step"))
    assert 'class="notice code-mixed"' in html and "mixes 2 code versions" in html
    assert f"<td>{v1[:7]}</td>" in html and f"<td>{v2[:7]}</td>" in html

    # rerun: the two old runs start over under the new code (same ids, a new attempt, old points gone).
    rerun = _launch(lab, "rerun", ("seeds=[0,1]",))
    assert {k: a for k, (a, _) in rerun.items()} == {
        "baseline/0": "rerun", "loo-dapo/0": "rerun", "baseline/1": "skip-completed",
        "loo-dapo/1": "skip-completed",
    }  # fmt: skip
    runs = queries.runs(store, "cmd").set_index("run_id")
    for run_id in ids.values():
        assert runs.loc[run_id, "status"] == "completed"
        assert runs.loc[run_id, "attempts"] == 2
        assert runs.loc[run_id, "provenance"]["commit"] == v2
    curves = queries.curves(store, "cmd", metric="val/pass_rate")
    for run_id in ids.values():  # a whole new curve, from step 5: the checkpoint was dropped too
        assert sorted(curves[curves.run_id == run_id]["step"]) == expected_steps(10)
    started = queries.events(store, "cmd")
    started = started[(started.kind == "started") & started.run_id.isin(list(ids.values()))]
    assert sorted(str(d["resume_step"]) for d in started["detail"]) == ["-1", "-1", "None", "None"]
    assert all(d["deleted_points"] > 0 for d in started["detail"] if d["resume_step"] == -1)
    capsys.readouterr()
    assert cli_main(["status", "cmd", "--db", URL]) == 0
    assert "mixes" not in capsys.readouterr().out
    # and once everything ran under v2, a plain resubmission has nothing to say
    assert {a for a, _ in _launch(lab).values()} == {"skip-completed"}
    store.close()


def test_an_uncommitted_edit_counts_and_the_sweep_file_can_set_the_policy(lab: Path) -> None:
    repo = lab.parent
    _launch(lab)
    train = repo / "train.py"
    train.write_text(train.read_text() + "\n# an uncommitted edit\n")
    with pytest.raises(ExecutionError, match=r"dirty False -> True"):
        _launch(lab)
    spec = yaml.safe_load(lab.read_text())
    lab.write_text(yaml.safe_dump({**spec, "on_code_change": "reuse"}, sort_keys=False))
    reused = _launch(lab)
    assert {a for a, _ in reused.values()} == {"skip-completed"}
    assert all("dirty False -> True" in r for _, r in reused.values())
    with pytest.raises(ExecutionError):  # the command line overrides the file
        _launch(lab, "refuse")


def test_the_policy_comes_from_the_flag_the_file_the_environment_then_refuse(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from scalerl.harness.errors import ConfigError
    from scalerl.harness.execution.codechange import resolve_policy

    monkeypatch.delenv("SCALERL_ON_CODE_CHANGE", raising=False)
    assert resolve_policy(None, None) == "refuse"
    monkeypatch.setenv("SCALERL_ON_CODE_CHANGE", "rerun")
    assert (resolve_policy(None, None), resolve_policy(None, "reuse"), resolve_policy("refuse", "reuse")) == (
        "rerun", "reuse", "refuse"
    )  # fmt: skip
    monkeypatch.setenv("SCALERL_ON_CODE_CHANGE", "ignore")
    with pytest.raises(
        ConfigError, match=r"\$SCALERL_ON_CODE_CHANGE='ignore'.*use one of refuse, reuse, rerun"
    ):
        resolve_policy(None, None)


def test_extend_over_changed_code_refuses_or_continues_but_never_reruns(lab: Path) -> None:
    from scalerl.harness.errors import ConfigError
    from scalerl.harness.execution.sweep import extend

    _launch(lab)
    v2 = _commit_change(lab.parent)
    prepared = prepare(lab, [], executor="debug", profile=None, db_url=URL, state_dir=None)
    store = db.open_store(URL)
    with pytest.raises(ExecutionError, match="the code changed since 2 of this sweep's runs"):
        extend(store, prepared, 20)
    with pytest.raises(ConfigError, match="cannot rerun them under new code"):
        extend(store, prepared, 20, on_code_change="rerun")
    report = extend(store, prepared, 20, on_code_change="reuse")
    assert report.count("extend") == 2
    runs = queries.runs(store, "cmd")
    assert set(runs["status"]) == {"completed"} and set(runs["last_step"]) == {20}
    assert {p["commit"] for p in runs["provenance"]} == {v2}  # the extending attempt's code
    events = queries.events(store, "cmd")
    assert sorted(events[events.kind == "code-changed"]["run_id"]) == sorted(runs["run_id"])
    store.close()
