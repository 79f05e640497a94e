"""Issue 40, silent loss and tracebacks at the store: one hostile point must fail alone, a spool
must go back to the store it came from, a run whose points wait in the spool must end as its
attempt meant to once they are replayed, and hashing and registration must not depend on the
process or on who registers first."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from scalerl import db
from scalerl.db import RunRecord, queries
from scalerl.db.spool import spool_dir
from scalerl.harness import client
from scalerl.harness.cli import main
from scalerl.harness.errors import ConfigError
from scalerl.harness.recipe.hashing import canonical_json

CFG = {"lr": 1e-6, "model": "m"}


@pytest.fixture(autouse=True)
def _own_spool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCALERL_SPOOL_DIR", str(tmp_path / "spool"))
    monkeypatch.delenv("SCALERL_DB_URL", raising=False)


@pytest.mark.parametrize(
    ("metrics", "n", "match"),
    [
        ({"bad\udc80": 0.5}, None, "lone surrogate"),
        ({"m": 0.5}, {"m": 10**30}, r"n\['m'\]=.* must be an int >= 1 and <= 2147483647"),
        ({"m": "1e999"}, None, "'1e999' is not a number"),
        ({"m": "0.5"}, None, "'0.5' is not a number"),
        ({"m": b"0.5"}, None, "is not a number"),
    ],
)
def test_one_hostile_point_fails_alone_and_the_run_completes(
    tmp_path: Path, metrics: dict[str, object], n: dict[str, int] | None, match: str
) -> None:
    """Was: the point was accepted, its batch failed in the background, every later point went to
    the spool and finish() raised (or '1e999' was stored as +inf)."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    run = client.init(sweep="s", seed=0, config=CFG, db=url)
    run.log(1, {"m": 0.1}, compute={"flops": 1.0})
    with pytest.raises(db.StoreError, match=match):
        run.log(2, metrics, compute={"flops": 2.0}, n=n)  # type: ignore[arg-type]
    run.log(3, {"m": 0.3}, compute={"flops": 3.0})
    assert run.finish() == "completed"
    store = db.open_store(url)
    curve = queries.curves(store, "s")
    assert curve["step"].tolist() == [1, 3] and curve["value"].tolist() == [0.1, 0.3]
    assert not list(spool_dir().glob("*.jsonl")) if spool_dir().is_dir() else True


def test_a_spool_replayed_into_another_store_is_kept_and_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: `db replay` into another store wrote the points into its run of the same id (a run id
    is a config hash, the same in both) and deleted the spool."""
    a, b = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"
    for url in (a, b):  # the same run (same config and seed) in two stores
        store = db.open_store(url)
        store.register_run(RunRecord("r-s0", "s", "v", 0, {}, "h"))
        store.start_attempt("r-s0")
        store.close()
    store_a = db.open_store(a)
    writer = store_a.writer("r-s0", 1)
    writer._spool.append([(5, "m", 0.5, None, 1.0, None, None, None, None, None)])  # the DB was down
    writer._spool.release()
    writer.close()
    assert main(["db", "replay", b]) == 1
    out = capsys.readouterr().out
    assert "belong to another store" in out and store_a.store_id in out and "a.db" in out
    assert queries.curves(db.open_store(b), "s").empty
    assert len(list(spool_dir().glob("*.jsonl"))) == 1  # kept for its own store
    assert main(["db", "replay", a]) == 0
    assert queries.curves(db.open_store(a), "s")["value"].tolist() == [0.5]


def test_a_run_whose_points_waited_in_the_spool_ends_completed_after_the_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was: the attempt marked the run failed ("points in the spool"); the replay stored every
    point and left it failed, so a finished seed counted as a crash."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    run = client.init(sweep="s", seed=0, config=CFG, db=url)
    run.log(1, {"m": 0.1}, compute={"flops": 1.0})
    run.flush()
    run.log(2, {"m": 0.2}, compute={"flops": 2.0})

    def full(*_: object) -> None:
        raise db.StoreUnavailableError("disk full")

    monkeypatch.setattr(run._store, "write_points", full)  # the store's disk is full from here on
    with pytest.raises(db.StoreError, match="did not reach the store"):
        run.finish()
    store = db.open_store(url)
    info = store.get_run(str(run.run_id))
    assert info is not None and info.status == "failed" and "db replay" in str(info.error)
    assert main(["db", "replay", url]) == 0
    info = store.get_run(str(run.run_id))
    assert info is not None and info.status == "completed" and info.error is None
    assert queries.curves(store, "s")["step"].tolist() == [1, 2]


def test_replaying_a_record_with_a_surrogate_sets_it_aside_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    store = db.open_store(url)
    store.register_run(RunRecord("r-s0", "s", "v", 0, {}, "h"))
    store.start_attempt("r-s0")
    folder = spool_dir()
    folder.mkdir(parents=True)
    rest = [None, 1.0, None, None, None, None, None]
    rows = [[1, "ok", 0.1, *rest], [2, "bad\udc80", 0.2, *rest]]
    lines = [
        {"v": 2, "run_id": "r-s0", "attempt": 1, "rows": rows},
        {"v": 2, "run_id": "r\udc80", "attempt": 1, "rows": rows},
    ]
    (folder / "r-s0.a1.1.x.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert main(["db", "replay", url]) == 1  # something was set aside: said in the exit status
    out = capsys.readouterr().out
    assert "set aside 2 record(s)" in out
    assert queries.curves(store, "s")["metric"].tolist() == ["ok"]


def test_a_set_in_a_config_has_one_id_in_every_process() -> None:
    """Was: 5 run ids from 6 processes (a set iterates in the order of its string hash seed)."""
    code = (
        "from scalerl.harness.recipe.hashing import canonical_json\n"
        "print(canonical_json({'tags': {'alpha', 'beta', 'gamma', 'delta'}, 'k': frozenset({'x', 'y'})}))"
    )
    seen = {
        subprocess.run(
            [sys.executable, "-c", code], env={**os.environ, "PYTHONHASHSEED": str(seed)},
            capture_output=True, text=True, check=True,
        ).stdout.strip()
        for seed in (1, 2)
    }  # fmt: skip
    assert seen == {'{"k":["x","y"],"tags":["alpha","beta","delta","gamma"]}'}
    assert canonical_json({"s": {3, 1, 2}}) == '{"s":[1,2,3]}'
    with pytest.raises(ConfigError, match="holds a memory address"):
        canonical_json({"o": object()})


def test_a_surrogate_in_a_knob_or_sweep_name_is_a_clear_error(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    with pytest.raises(ConfigError, match="lone surrogate"):
        client.init(sweep="s", knob="loss\udc80", alternative="dapo", seed=0, config=CFG, db=url)
    with pytest.raises(ConfigError, match="lone surrogate"):
        client.init(sweep="s\udc80", seed=0, config=CFG, db=url)
    store = db.open_store(url)
    with pytest.raises(db.StoreError, match="lone surrogate"):
        store.register_run(RunRecord("r-s0", "s", "v", 0, {}, "h", knob="k\udc80", alternative="a"))


def test_import_into_an_empty_sweep_name_is_a_config_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv = tmp_path / "run.csv"
    csv.write_text("step,val/pass_rate\n1,0.1\n2,0.2\n")
    assert main(["import", str(csv), "--sweep", "", "--db", f"sqlite:///{tmp_path / 's.db'}"]) == 3
    assert "--sweep='': sweep name is empty" in capsys.readouterr().err
    assert not (tmp_path / "s.db").exists()


def test_an_excluded_runs_bad_axis_does_not_refuse_the_import(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: a run whose --axis-column is no compute axis refused the whole import, even one that
    left that run out."""
    good, bad = tmp_path / "good.csv", tmp_path / "bad.csv"
    good.write_text("step,val/pass_rate,tokens\n1,0.1,100\n2,0.2,100\n3,0.3,100\n")
    bad.write_text("step,val/pass_rate,tokens\n1,0.1,100\n2,0.2,-50\n3,0.3,100\n")  # a count < 0
    url = f"sqlite:///{tmp_path / 's.db'}"
    common = [
        str(good),
        str(bad),
        "--sweep",
        "ax",
        "--axis-column",
        "tokens",
        "--axis-cumulative",
        "--db",
        url,
    ]
    assert main(["import", *common]) == 7  # kept, the bad run refuses the import, with the reason
    assert "'tokens' is -50 at step 2; a per-step count is never negative" in capsys.readouterr().err
    assert main(["import", *common, "--exclude", "name:bad"]) == 0
    curves = queries.curves(db.open_store(url), "ax")
    assert curves["tokens"].tolist() == [100.0, 200.0, 300.0]
    assert curves["run_id"].nunique() == 1


def test_a_wandb_run_file_that_is_a_fifo_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: skipped in silence, exit 0."""
    pytest.importorskip("wandb")
    run_dir = tmp_path / "wandb" / "offline-run-20250101_000000-abc123"
    run_dir.mkdir(parents=True)
    os.mkfifo(run_dir / "run-abc123.wandb")
    code = main(["import", str(tmp_path / "wandb"), "--sweep", "w", "--db", f"sqlite:///{tmp_path / 's.db'}"])
    assert code == 7
    err = capsys.readouterr().err
    assert "not-regular-file 1" in err and "run-abc123.wandb: a FIFO, not a regular file" in err


def test_configs_that_differ_never_share_an_id() -> None:
    """Second pass: ``{1: a, "1": b}`` lost a key to JSON; two arrays differing in the middle had
    one text (numpy elides it), so one id."""
    import numpy as np

    with pytest.raises(ConfigError, match="are one key in a config's JSON"):
        canonical_json({1: "a", "1": "b"})
    a, b = np.arange(5000), np.arange(5000)
    b[2500] = -1
    assert canonical_json({"w": a}) != canonical_json({"w": b})
    assert canonical_json({"w": np.arange(3)}) == '{"w":"[0 1 2]"}'  # a short array keeps its text


def test_a_symlink_planted_in_the_spool_folder_is_never_written_through(tmp_path: Path) -> None:
    """Second pass: a spool folder in /tmp, a symlink planted at the quarantine file's name."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    store = db.open_store(url)
    store.register_run(RunRecord("r-s0", "s", "v", 0, {}, "h"))
    store.start_attempt("r-s0")
    folder = spool_dir()
    (folder / "quarantine").mkdir(parents=True)
    victim = tmp_path / "victim"
    victim.write_text("keep")
    for name in ("x.jsonl", "x.tmp", "x.jsonl.tmp"):
        (folder / "quarantine" / name).symlink_to(victim)
    (folder / "x.jsonl").write_text("not json\n")
    db.replay(store)
    assert victim.read_text() == "keep"
    assert (folder / "quarantine" / "x.jsonl").read_text().startswith('{"line": 1')
