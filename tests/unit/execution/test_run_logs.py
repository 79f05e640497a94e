"""``scalerl logs RUN`` and ``scalerl ls``: finding a run by a unique id prefix, the log files of
each executor's job, ``--tail``, the errors that say why a run has no log, the sweep listing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scalerl import db
from scalerl.harness.cli import main
from scalerl.harness.execution import logs


def _store(tmp_path: Path) -> tuple[str, db.Store]:
    url = f"sqlite:///{tmp_path / 's.db'}"
    store = db.open_store(url)
    store.ensure_sweep("loo", {"design": "loo", "executor": "slurm"})
    for rid in ("abc123-s0", "abc124-s0", "ffee00-s0", "dbg000-s0"):
        store.register_run(db.RunRecord(rid, "loo", "baseline", 0, {}, "h"))
    store.ensure_sweep("lab", {"source": "import"})
    store.register_run(db.RunRecord("imp000-s0", "lab", "baseline", 0, {}, "h"))
    return url, store


def _submitted(store: db.Store, run_id: str, detail: dict[str, str]) -> None:
    store.log_events("loo", "submitted", {run_id: detail})


def test_a_slurm_run_prints_its_submitit_files_and_a_prefix_finds_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, store = _store(tmp_path)
    folder = tmp_path / "st" / "slurm" / "%j"
    _submitted(store, "ffee00-s0", {"executor": "slurm", "job_id": "77_3", "folder": str(folder)})
    job = tmp_path / "st" / "slurm" / "77_3"
    job.mkdir(parents=True)
    (job / "77_3_0_log.out").write_text("".join(f"step {i}\n" for i in range(1, 101)))
    (job / "77_3_0_log.err").write_text("warning: slow\n")
    assert main(["logs", "ffe", "--db", url, "--tail", "2"]) == 0
    assert capsys.readouterr().out == (
        f"==> {job / '77_3_0_log.out'} <==\nstep 99\nstep 100\n"
        f"==> {job / '77_3_0_log.err'} <==\nwarning: slow\n"
    )
    assert main(["logs", "ffee00-s0", "--db", url, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["executor"] == "slurm" and doc["job_id"] == "77_3"
    assert (
        doc["files"][0]["text"].splitlines()[0] == "step 1"
        and len(doc["files"][0]["text"].splitlines()) == 100
    )


def test_the_latest_submission_wins(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url, store = _store(tmp_path)
    for state in ("old", "new"):
        _submitted(
            store,
            "ffee00-s0",
            {"executor": "local", "job_id": "queued-1", "state_dir": str(tmp_path / state)},
        )
        (tmp_path / state / "local" / "logs").mkdir(parents=True)
        (tmp_path / state / "local" / "logs" / "ffee00-s0.log").write_text(f"{state} attempt\n")
    assert main(["logs", "ffee00", "--db", url]) == 0
    assert capsys.readouterr().out == "new attempt\n"


def test_a_command_runs_own_output_follows_its_job_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command runner sends the trainer's stdout and stderr to the run's workdir, not to the
    job log: `scalerl logs` prints the latest attempt's pair after the job's lines."""
    url, store = _store(tmp_path)
    state = tmp_path / "st"
    _submitted(store, "ffee00-s0", {"executor": "local", "job_id": "queued-1", "state_dir": str(state)})
    (state / "local" / "logs").mkdir(parents=True)
    job_log = state / "local" / "logs" / "ffee00-s0.log"
    job_log.write_text("scalerl job: run ffee00-s0: completed\n")
    work = state / "runs" / "ffee00-s0"
    work.mkdir(parents=True)
    (work / "stderr.attempt1.log").write_text("old attempt\n")
    (work / "stdout.attempt2.log").write_text("step 1 loss 0.5\n")
    (work / "stderr.attempt2.log").write_text("CUDA_VISIBLE_DEVICES=1\n")
    assert main(["logs", "ffee00", "--db", url]) == 0
    assert capsys.readouterr().out == (
        f"==> {job_log} <==\nscalerl job: run ffee00-s0: completed\n"
        f"==> {work / 'stdout.attempt2.log'} <==\nstep 1 loss 0.5\n"
        f"==> {work / 'stderr.attempt2.log'} <==\nCUDA_VISIBLE_DEVICES=1\n"
    )


def test_follow_names_the_file_each_new_line_comes_from(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`logs -f` over several files: lines that arrive later under another file than the one
    printed last get that file's header, as `tail -f` does (not the last header printed)."""
    from scalerl.harness.cli import browse

    url, store = _store(tmp_path)
    state = tmp_path / "st"
    _submitted(store, "ffee00-s0", {"executor": "local", "job_id": "queued-1", "state_dir": str(state)})
    attempt = store.start_attempt("ffee00-s0", executor="local", job_id="queued-1")
    (state / "local" / "logs").mkdir(parents=True)
    job_log = state / "local" / "logs" / "ffee00-s0.log"
    job_log.write_text("")
    work = state / "runs" / "ffee00-s0"
    work.mkdir(parents=True)
    (work / "stdout.attempt1.log").write_text("step 1\n")
    (work / "stderr.attempt1.log").write_text("warning\n")

    def later(_s: float) -> None:  # the trainer writes, then its run ends
        with (work / "stdout.attempt1.log").open("a") as fh:
            fh.write("step 2\n")
        job_log.write_text("scalerl job: run ffee00-s0: completed\n")
        store.finish_run("ffee00-s0", attempt, "completed")

    monkeypatch.setattr(browse.time, "sleep", later)
    assert main(["logs", "ffee00", "--db", url, "-f", "--poll-s", "0.1"]) == 0
    out = capsys.readouterr().out
    assert out.endswith(
        f"==> {work / 'stderr.attempt1.log'} <==\nwarning\n"
        f"\n==> {job_log} <==\nscalerl job: run ffee00-s0: completed\n"
        f"\n==> {work / 'stdout.attempt1.log'} <==\nstep 2\n"
    ), out


@pytest.mark.parametrize(
    ("given", "says", "code"),
    [
        ("abc12", "ambiguous: 2 runs start with it (abc123-s0, abc124-s0)", 3),
        ("zz", "no run has this id or an id starting with it", 3),
        ("imp000", "run imp000-s0 (sweep lab, status pending) was never submitted as a job", 3),
        ("dbg", "ran on the debug executor, inside the process that submitted it", 3),
        ("abc123", "has no log file yet at", 3),
    ],
)
def test_a_run_without_a_log_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], given: str, says: str, code: int
) -> None:
    url, store = _store(tmp_path)
    _submitted(store, "dbg000-s0", {"executor": "debug", "job_id": "inproc"})
    _submitted(store, "abc123-s0", {"executor": "local", "job_id": "q", "state_dir": str(tmp_path / "st")})
    assert main(["logs", given, "--db", url, "--json"]) == code
    doc = json.loads(capsys.readouterr().out)
    assert says in doc["error"]["message"] and doc["error"]["exit_code"] == code


def test_a_prefix_is_taken_literally_not_as_a_pattern(tmp_path: Path) -> None:
    _, store = _store(tmp_path)
    store.register_run(db.RunRecord("a_b-s0", "loo", "v", 0, {}, "h"))
    from scalerl.db import queries

    assert queries.run_ids_starting(store, "a_") == ["a_b-s0"]
    assert queries.run_ids_starting(store, "a%") == []


@pytest.mark.parametrize("ending", ["\n", ""])
def test_tail_start_reads_only_the_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ending: str) -> None:
    monkeypatch.setattr(logs, "_CHUNK", 7)  # force several blocks
    path = tmp_path / "x.log"
    body = "\n".join(f"line {i}" for i in range(30)) + ending
    path.write_text(body)
    for n, want in [
        (0, ""),
        (1, "line 29"),
        (3, "line 27\nline 28\nline 29"),
        (30, body.rstrip("\n")),
        (99, body.rstrip("\n")),
    ]:
        got = path.read_bytes()[logs.tail_start(path, n) :].decode()
        assert got.rstrip("\n") == want, n


def test_ls_lists_sweeps_with_source_and_runs_by_status(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, store = _store(tmp_path)
    attempt = store.start_attempt("abc123-s0")
    store.finish_run("abc123-s0", attempt, "completed")
    store.start_attempt("abc124-s0")  # running
    store.ensure_sweep("adhoc", {"kind": "adhoc"})
    store.ensure_sweep("mine", {"source": "attach"})
    assert main(["ls", "--db", url, "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["sweeps"]}
    assert {n: r["source"] for n, r in rows.items()} == {"adhoc": "train", "lab": "import", "loo": "recipe",
                                                         "mine": "attach"}  # fmt: skip
    loo = rows["loo"]
    assert (loo["runs"], loo["completed"], loo["running"], loo["waiting"], loo["failed"]) == (4, 1, 1, 2, 0)
    assert loo["created_at"].startswith("20")
    assert main(["ls", "--db", url]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["sweep", "source", "created", "last", "event", "runs", "completed", "running",
                                "waiting", "failed", "stopped"]  # fmt: skip
    loo_line = next(ln for ln in lines if ln.startswith("loo "))
    assert loo_line.split()[-6:] == ["4", "1", "1", "2", "0", "0"]


def test_ls_never_creates_a_store(tmp_path: Path) -> None:
    assert main(["ls", "--db", f"sqlite:///{tmp_path / 'none.db'}"]) == 4
    assert not (tmp_path / "none.db").exists()
