"""client.init: a run started outside the harness attaches to a sweep with the harness's run-id and
fencing rules (scalerl.harness.execution.attach), against a real SQLite file."""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scalerl import db
from scalerl.harness import client
from scalerl.harness.errors import ConfigError, ExecutionError, HarnessError
from scalerl.harness.execution import attach
from scalerl.harness.recipe.hashing import canonical_json
from tests.unit.execution.helpers import client_run

CFG = {"model": "qwen-0.5b", "lr": 1e-6}


@pytest.fixture
def url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A store URL, no harness launch in the environment, and no run left attached afterwards."""
    for key in ("SCALERL_RUN_ID", "SCALERL_ATTEMPT", "SCALERL_DB_URL", "RANK", "SLURM_PROCID"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("SCALERL_SPOOL_DIR", str(tmp_path / "spool"))
    monkeypatch.setattr(client, "_active", None)
    # Provenance of a folder outside any repository: the tests' own checkout changes under them.
    monkeypatch.setattr(attach, "code_dir", lambda: tmp_path)
    yield f"sqlite:///{tmp_path / 'store.db'}"
    if client._active is not None and client._active.owned:
        client._active._store.close()


def _open(url: str) -> Any:
    return db.open_store(url, create=False)


def test_the_run_id_is_the_hash_of_config_knob_and_alternative_plus_the_seed(url: str) -> None:
    with client.init(sweep="s", knob="loss", alternative="dapo", seed=2, config=CFG, db=url) as run:
        run.log(0, {"val/pass_rate": 0.1}, compute={"flops": 1.0})
    data = {"attach": {"config": CFG, "knob": "loss", "alternative": "dapo"}}
    digest = hashlib.sha256(canonical_json(data).encode()).hexdigest()
    assert run.run_id == f"{digest[:16]}-s2" and run.variant == "loss=dapo" and run.status == "completed"
    store = _open(url)
    info = store.get_run(run.run_id)
    assert info.config_hash == digest and info.config == data and info.executor == "attach"
    assert (info.knob, info.alternative, info.seed, info.attempts) == ("loss", "dapo", 2, 1)
    spec = db.sweeps(store).set_index("name").loc["s", "spec"]
    assert spec == {"source": "attach", "loo": {"baseline_name": "baseline"}}  # created, as documented
    store.close()
    # metric / axis become the attached sweep's fit defaults; the latest attach's win.
    with client.init(
        sweep="s", knob="loss", alternative="dapo", seed=3, config=CFG, db=url, axis="tokens"
    ) as r:
        r.log(0, {"val/pass_rate": 0.1}, compute={"tokens": 1.0})
    store = _open(url)
    assert db.sweeps(store).set_index("name").loc["s", "spec"]["fit"] == {"axis": "tokens"}
    store.close()
    # Key order is not identity; the knob is (one config for baseline and variant stays two runs).
    with client.init(sweep="s", seed=2, config=dict(reversed(CFG.items())), db=url) as base:
        base.log(0, {"val/pass_rate": 0.1}, compute={"flops": 1.0})
    assert base.run_id != run.run_id and base.run_id.endswith("-s2") and base.variant == "baseline"


def test_attaching_again_fences_the_older_attempt_and_resumes_from_resume_step(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = client.init(sweep="s", seed=0, config=CFG, db=url)
    for step in range(10):
        first.log(step, {"val/pass_rate": 0.05 * step}, add_compute={"flops": 10.0})
    first.flush()
    # The requeued job: another process attaches the same (config, knob, seed) and resumes at 5.
    monkeypatch.setattr(client, "_active", None)
    second = client.init(sweep="s", seed=0, config=CFG, db=url, resume_step=5)
    assert (second.run_id, second.attempt) == (first.run_id, 2)
    # The superseded process goes on: its points and its finish are refused by the store.
    first.log(10, {"val/pass_rate": 0.9}, add_compute={"flops": 10.0})
    assert first.finish() == "superseded"
    for step in range(6, 10):
        second.log(step, {"val/pass_rate": 0.06 * step}, add_compute={"flops": 10.0})
    assert second.finish() == "completed"

    store = _open(url)
    info = store.get_run(second.run_id)
    assert (info.status, info.attempts) == ("completed", 2)
    curve = db.curves(store, "s", "val/pass_rate")
    assert curve["step"].tolist() == list(range(10))  # step 10 of the fenced attempt is not there
    assert curve["value"].tolist()[5:] == pytest.approx([0.25, 0.36, 0.42, 0.48, 0.54])
    # The running total went on from the store's 60 at step 5, not from 0 (nor from the old 100).
    assert curve["flops"].tolist() == pytest.approx([10.0 * (s + 1) for s in range(10)])
    kinds = db.events(store, run_id=second.run_id)["kind"].tolist()
    assert kinds.count("requeued") == 1 and "fenced" in kinds
    store.close()


def test_a_completed_run_is_refused_unless_rerun(url: str) -> None:
    with client.init(sweep="s", seed=0, config=CFG, db=url) as run:
        run.log(0, {"val/pass_rate": 0.1}, compute={"flops": 1.0})
        run.log(1, {"val/pass_rate": 0.2}, compute={"flops": 2.0})
    # The same config in another sweep is the same run (the store's rule), so it is refused too.
    for sweep in ("s", "other"):
        with pytest.raises(ConfigError) as info:
            client.init(sweep=sweep, seed=0, config=CFG, db=url)
        assert f"run {run.run_id} (s/baseline" in str(info.value) and "rerun=True" in str(info.value)
    assert client._active is None
    with client.init(sweep="s", seed=0, config=CFG, db=url, rerun=True) as again:
        again.log(1, {"val/pass_rate": 0.3}, compute={"flops": 2.0})
    assert (again.run_id, again.attempt, again.status) == (run.run_id, 2, "completed")
    store = _open(url)
    # resume_step left out: the old points stay and the rerun's value wins where it logged again.
    assert db.curves(store, "s", "val/pass_rate")["value"].tolist() == [0.1, 0.3]
    assert "other" not in set(db.sweeps(store)["name"])  # the refusal wrote nothing
    store.close()


def test_an_exception_in_the_block_fails_the_run_and_goes_on(url: str) -> None:
    with (
        pytest.raises(ValueError, match="diverged"),
        client.init(sweep="s", seed=0, config=CFG, db=url) as run,
    ):
        client.log(0, {"val/pass_rate": 0.1}, compute={"flops": 1.0})  # the module's log
        raise ValueError("diverged at step 1")
    assert run.status == "failed" and client._active is None
    with pytest.raises(SystemExit), client.init(sweep="s", seed=1, config=CFG, db=url) as ok:
        ok.log(0, {"val/pass_rate": 0.1}, compute={"flops": 1.0})
        raise SystemExit(0)  # a clean exit inside the block is a success
    store = _open(url)
    failed, done = store.get_run(run.run_id), store.get_run(ok.run_id)
    assert failed.status == "failed" and failed.error.startswith("ValueError: diverged at step 1")
    assert done.status == "completed"
    assert db.curves(store, "s", "val/pass_rate")["run_id"].tolist().count(run.run_id) == 1  # kept
    store.close()


def test_a_run_that_logged_nothing_fails_instead_of_completing(url: str) -> None:
    with (
        pytest.raises(ExecutionError, match="ended with no point"),
        client.init(sweep="s", seed=0, config=CFG, db=url) as run,
    ):
        pass
    store = _open(url)
    assert store.get_run(run.run_id).status == "failed"
    store.close()


@pytest.mark.parametrize(
    ("kwargs", "field", "says"),
    [
        ({"knob": "loss"}, "knob='loss'", "knob and alternative go together"),
        ({"alternative": "dapo"}, "alternative='dapo'", "knob and alternative go together"),
        ({"seed": -1}, "seed=-1", "must be in [0, 2147483647]"),
        ({"seed": True}, "seed=True", "must be a whole number, not bool"),
        ({"seed": "0"}, "seed='0'", "must be a whole number, not str"),
        ({"config": None}, "config", "config is missing"),
        ({"config": {}}, "config", "config is empty"),
        ({"config": [1, 2]}, "config='list'", "must be a mapping"),
        ({"config": {"opt": {"lr": float("nan")}}}, "config.opt.lr=nan", "non-finite number"),
        ({"sweep": ""}, "sweep=''", "sweep is empty"),
        ({"sweep": 5}, "sweep=5", "sweep is a int, not a string"),
        ({"knob": "k" * 201, "alternative": "a"}, "knob=", "more than the store's 200"),
        ({"resume_step": -2}, "resume_step=-2", "must be in [-1, 2147483647]"),
        ({"create": False}, "sweep='s'", "(create=False) (fix: check the name (`scalerl ls` lists"),
        ({"axis": "wall_s"}, "axis='wall_s'", "not a compute axis"),
        ({"metric": ""}, "metric=''", "metric is empty"),
    ],
)
def test_bad_arguments_are_config_errors_and_write_nothing(
    url: str, kwargs: dict[str, Any], field: str, says: str
) -> None:
    args: dict[str, Any] = {"sweep": "s", "seed": 0, "config": CFG, "db": url} | kwargs
    with pytest.raises(HarnessError) as info:
        client.init(**args)
    err = info.value
    assert isinstance(err, ConfigError) and err.exit_code == 3
    assert str(err).startswith(f"client.init: {field}") and says in str(err) and "(fix: " in str(err)
    assert client._active is None
    if Path(url.removeprefix("sqlite:///")).exists():
        store = _open(url)
        assert db.sweeps(store).empty  # a run always belongs to a sweep: none, no run
        store.close()


def test_a_variant_name_is_one_knob_at_one_alternative(url: str) -> None:
    with client.init(sweep="s", seed=0, config=CFG, db=url) as run:
        run.log(0, {"val/pass_rate": 0.1}, compute={"flops": 1.0})
    with pytest.raises(ConfigError, match="already has variant 'baseline' as the baseline"):
        client.init(
            sweep="s", knob="loss", alternative="dapo", variant="baseline", seed=0, config=CFG, db=url
        )
    with pytest.raises(ConfigError, match=r"a run client\.init attached"):
        client.log(0, {"val/pass_rate": 0.1}, add_compute={"flops": -1.0})  # no run attached here
    with client.init(sweep="s", seed=1, config=CFG, db=url) as run:
        with pytest.raises(ConfigError, match=r"add_compute.flops=-1.0: a per-step compute amount"):
            run.log(0, {"val/pass_rate": 0.1}, add_compute={"flops": -1.0})
        with pytest.raises(ConfigError, match="still attached"):
            client.init(sweep="s", seed=2, config=CFG, db=url)
        run.log(0, {"val/pass_rate": 0.1}, compute={"flops": 1.0})
    with pytest.raises(ConfigError, match="is finished"):
        run.log(1, {"val/pass_rate": 0.2})


def test_a_changed_config_under_a_taken_variant_and_seed_is_refused(url: str) -> None:
    with client.init(sweep="s", seed=0, config=CFG | {"opt": {"beta": 0.9}}, db=url) as run:
        run.log(0, {"val/pass_rate": 0.1}, compute={"flops": 1.0})
    changed = CFG | {"lr": 2e-6, "opt": {"beta": 0.95}, "new": 1}
    with pytest.raises(ConfigError) as info:
        client.init(sweep="s", seed=0, config=changed, db=url)
    assert (
        f"already has baseline seed 0 as run {run.run_id}, whose config differs (at: lr, new, opt.beta)"
        in str(info.value)
    )
    with client.init(sweep="s", seed=1, config=changed, db=url) as other:  # another seed is fine
        other.log(0, {"val/pass_rate": 0.1}, compute={"flops": 1.0})
    store = _open(url)
    assert sorted(db.runs(store, "s")["seed"]) == [0, 1]
    store.close()


def test_the_type_checkers_spellings_of_the_axes_are_the_constants() -> None:
    from typing import get_args

    from scalerl.harness.axes import COMPUTE_AXES, COMPUTE_UNITS, FIT_AXES
    from scalerl.harness.recipe import schema, sweep

    assert get_args(sweep.FitAxis) == FIT_AXES
    assert set(get_args(schema.DbComputeUnit)) == set(COMPUTE_UNITS)
    assert set(get_args(schema.ComputeUnit)) == {*COMPUTE_AXES, "steps"}


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", "-c", "commit.gpgsign=false", *args],
        cwd=repo, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.strip()


def test_each_attempt_records_its_code_and_a_change_is_logged(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "lab"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "train.py").write_text("print('train')\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "first")
    monkeypatch.setattr(attach, "code_dir", lambda: repo)
    with client.init(sweep="s", seed=0, config=CFG, db=url) as run:
        run.log(0, {"val/pass_rate": 0.1}, compute={"flops": 1.0})
    (repo / "train.py").write_text("print('train, changed')\n")  # the requeued job runs other code
    with client.init(sweep="s", seed=0, config=CFG, db=url, rerun=True) as again:
        again.log(1, {"val/pass_rate": 0.2}, compute={"flops": 2.0})
    store = _open(url)
    code = store.get_run(run.run_id).provenance
    assert code["repo"] == str(repo.resolve()) and code["commit"] == _git(repo, "rev-parse", "HEAD")
    assert code["dirty"] is True and code["versions"]["scalerl-harness"] is not None
    events = db.events(store, run_id=run.run_id)
    changed = events[events["kind"] == "code-changed"]["detail"].tolist()
    assert len(changed) == 1 and changed[0]["changed"] == ["dirty"] and changed[0]["policy"] == "attach"
    assert changed[0]["old"]["dirty"] is False
    store.close()


def test_other_ranks_check_the_arguments_and_write_nothing(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RANK", "1")
    with pytest.raises(ConfigError, match="config is empty"):
        client.init(sweep="s", seed=0, config={}, db=url)
    with client.init(sweep="s", seed=0, config=CFG, db=url) as run:
        run.log(0, {"val/pass_rate": 0.1})
        client.log(1, {"val/pass_rate": 0.2})
    assert run.run_id is None and run.status is None and client._active is None
    assert not (tmp_path / "store.db").exists()  # no store was even opened


def test_inside_a_harness_launch_init_writes_into_the_launchers_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(client, "_active", None)
    store = client_run(tmp_path, monkeypatch)  # run r1 of sweep s, started by "the harness"
    try:
        with client.init(sweep="ignored", seed=0, config=CFG) as run:
            run.log(0, {"val/pass_rate": 0.25}, compute={"samples": 64})
            client.log(1, {"val/pass_rate": 0.5}, compute={"samples": 128})
        assert run.run_id == "r1" and not run.owned and run.status is None
    finally:
        client.close()
    assert db.curves(store, "s", "val/pass_rate")["value"].tolist() == [0.25, 0.5]
    info = store.get_run("r1")
    assert (info.status, info.attempts) == ("running", 1)  # the harness's job finishes it
    assert "ignored" not in set(db.sweeps(store)["name"])
    store.close()


def test_cancel_says_an_attached_run_is_stopped_where_it_was_launched(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from scalerl.harness.cli import main

    run = client.init(sweep="s", seed=0, config=CFG, db=url)
    run.log(0, {"val/pass_rate": 0.1}, compute={"flops": 1.0})
    try:
        assert main(["cancel", "s", "--db", url]) == 1  # nothing the harness could stop
        out = capsys.readouterr().out
        assert f"{run.run_id}: attached from its own launcher (client.init), no job to stop" in out
    finally:
        run.finish()
    assert run.status == "completed"
