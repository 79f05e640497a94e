"""The job body's requeue path (what submitit does on USR2), in-process against a real SQLite
store, with a fast stand-in for the reference trainer that checkpoints and resumes."""

from __future__ import annotations

import json
import pickle
import threading
import time
from pathlib import Path

import pytest
from submitit.helpers import DelayedSubmission

from scalerl import db
from scalerl.db import RunRecord, queries
from scalerl.harness.execution.job import SweepJob
from scalerl.harness.execution.runners import base
from scalerl.harness.execution.runners.base import Outcome, RunContext, Runner
from scalerl.harness.execution.spec import RunSpec
from scalerl.harness.recipe import Recipe

STEPS = 30


class CountingRunner(Runner):
    """One point per step; checkpoints every 4 steps and when stopped; resumes from it."""

    def resume_step(self, workdir: Path) -> int | None:
        ckpt = workdir / "ckpt.json"
        return json.loads(ckpt.read_text())["step"] if ckpt.exists() else None

    def run(self, ctx: RunContext) -> Outcome:
        step = self.resume_step(ctx.workdir) or 0
        while step < STEPS:
            step += 1
            time.sleep(0.02)
            ctx.sink.add(step, {"val/pass_rate": step / 100}, {"flops": step * 10.0})
            ctx.sink.flush()
            if ctx.stop.is_set() or step % 4 == 0:
                (ctx.workdir / "ckpt.json").write_text(json.dumps({"step": step}))
            if ctx.stop.is_set():
                return Outcome.STOPPED
        return Outcome.COMPLETED


@pytest.fixture
def spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RunSpec:
    monkeypatch.setitem(base.RUNNERS, "reference", CountingRunner)
    url = f"sqlite:///{tmp_path / 's.db'}"
    recipe = Recipe(name="t")
    store = db.open_store(url)
    store.register_run(RunRecord("r1-s0", "sw", "baseline", 0, recipe.resolved(), "h" * 64))
    return RunSpec("sw", "baseline", None, None, 0, "r1-s0", recipe.model_dump(mode="json"),
                   str(tmp_path / "work"), db_url=url, checkpoint_grace_s=10)  # fmt: skip


def _wait_points(store: db.Store, n: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if int(queries.runs(store, "sw")["n_points"].iloc[0]) >= n:
            return
        time.sleep(0.05)
    raise AssertionError(f"fewer than {n} points after 30 s")


def test_checkpoint_stops_requeues_and_resumes_without_gap_or_duplicate(spec: RunSpec) -> None:
    store = db.open_store(spec.db_url)
    job = SweepJob(spec, "debug")
    results: list[str] = []
    worker = threading.Thread(target=lambda: results.append(job()))
    worker.start()
    _wait_points(store, 6)
    delayed = job.checkpoint()  # what submitit's USR2 handler calls
    worker.join(10)
    assert results == ["stopped"]
    assert isinstance(delayed, DelayedSubmission)
    stopped_at = json.loads((Path(spec.workdir) / "ckpt.json").read_text())["step"]
    assert 6 <= stopped_at < STEPS
    assert store.get_run("r1-s0").status == "running"  # a stop is not an end

    # submitit pickles the returned submission and runs it in the requeued job
    again = pickle.loads(pickle.dumps(delayed.function))
    assert again() == "completed"
    run = store.get_run("r1-s0")
    assert (run.status, run.attempts) == ("completed", 2)
    events = queries.events(store, "sw")
    requeued = events[events.kind == "requeued"]
    assert len(requeued) == 1
    assert requeued.iloc[0]["detail"]["attempt"] == 1
    assert requeued.iloc[0]["detail"]["checkpointed"] is True
    started = events[events.kind == "started"]["detail"].tolist()
    assert [d["resume_step"] for d in started] == [None, stopped_at]
    curve = queries.curves(store, "sw", metric="val/pass_rate")
    assert list(curve["step"]) == list(range(1, STEPS + 1))  # contiguous, each step once
    assert list(curve["value"]) == pytest.approx([s / 100 for s in range(1, STEPS + 1)])


def test_superseded_attempt_is_fenced_and_does_not_finish_the_run(spec: RunSpec) -> None:
    store = db.open_store(spec.db_url)
    job = SweepJob(spec, "debug")
    results: list[str] = []
    worker = threading.Thread(target=lambda: results.append(job()))
    worker.start()
    _wait_points(store, 3)
    # A requeued copy starts while the old process keeps running (what the testbed showed).
    newer = store.start_attempt("r1-s0", executor="debug", job_id="new", resume_step=2)
    worker.join(30)
    assert results == ["superseded"]
    run = store.get_run("r1-s0")
    assert (run.status, run.attempts) == ("running", newer)
    curve = queries.curves(store, "sw", metric="val/pass_rate")
    assert list(curve["step"]) == [1, 2]  # nothing the old attempt wrote after step 2 survived
    assert (queries.events(store, "sw").kind == "fenced").sum() >= 1


def test_completed_run_is_skipped_without_a_new_attempt(spec: RunSpec) -> None:
    store = db.open_store(spec.db_url)
    assert SweepJob(spec, "debug")() == "completed"
    assert SweepJob(spec, "debug")() == "skipped"
    assert store.get_run("r1-s0").attempts == 1


def test_a_failure_before_the_attempt_starts_is_recorded_on_the_run(
    spec: RunSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    from scalerl.harness.errors import ExecutionError, HarnessError

    def broken(self: CountingRunner, workdir: Path) -> int | None:
        raise HarnessError(f"{workdir}/ckpt.json: unreadable checkpoint; fix: delete it")

    monkeypatch.setattr(CountingRunner, "resume_step", broken)
    with pytest.raises(ExecutionError, match="unreadable checkpoint"):
        SweepJob(spec, "debug")()
    run = db.open_store(spec.db_url).get_run("r1-s0")
    assert (run.status, run.attempts) == ("failed", 1)
    assert run.error is not None and "HarnessError: " in run.error and "unreadable checkpoint" in run.error
