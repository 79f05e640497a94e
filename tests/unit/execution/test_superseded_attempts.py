"""A superseded attempt stops at once and leaves its successor's checkpoint alone: the store fences
its writes already; without this it trained on to its budget (hours on a cluster) and kept
checkpointing into the folder its successor resumes from."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from scalerl import db
from scalerl.db import queries
from scalerl.harness.execution.job import execute
from scalerl.harness.execution.runners.base import Outcome, RunContext
from scalerl.harness.execution.runners.command import CommandRunner
from scalerl.harness.execution.runners.replay import CHECKPOINT, ReplayRunner
from scalerl.harness.execution.spec import RunSpec
from scalerl.harness.recipe.schema import Recipe
from tests.unit.execution.helpers import TRAINER


class FlippingSink:
    """Takes points; ``superseded()`` turns True once ``after`` points came in."""

    def __init__(self, after: int) -> None:
        self.after, self.points = after, 0

    def add(
        self,
        step: int,
        metrics: Mapping[str, float],
        compute: Mapping[str, float],
        n: Mapping[str, int] | None = None,
    ) -> None:
        self.points += 1

    def flush(self) -> None:
        pass

    def superseded(self) -> bool:
        return self.points >= self.after


def _trainer_argv(steps: int, checkpoint_every: int) -> list[str]:
    return [
        sys.executable, str(TRAINER), "--steps", str(steps), "--step-seconds", "0.02",
        "--eval-every", "5", "--checkpoint-every", str(checkpoint_every),
    ]  # fmt: skip


def _spec(tmp_path: Path, runner: dict[str, Any], db_url: str | None = None) -> RunSpec:
    recipe = Recipe.model_validate(
        {"name": "sup", "runner": runner, "budget": {"value": 100_000, "unit": "steps"}}
    )
    return RunSpec(
        sweep="sup", variant="baseline", knob=None, alternative=None, seed=0, run_id="r-s0",
        recipe=recipe.model_dump(mode="json"), workdir=str(tmp_path / "work"), db_url=db_url,
        checkpoint_grace_s=30.0,
    )  # fmt: skip


def test_a_superseded_command_is_killed_at_once_without_a_checkpoint(tmp_path: Path) -> None:
    # Checkpoints only on SIGTERM and at its end: a stop would leave state.json, a kill none.
    runner = {"type": "command", "argv": _trainer_argv(4000, 10**6), "metrics_file": "metrics.jsonl"}
    spec = _spec(tmp_path, runner)
    Path(spec.workdir).mkdir(parents=True)
    sink = FlippingSink(after=2)
    ctx = RunContext(spec, 1, sink, Path(spec.workdir), threading.Event(), None, superseded=sink.superseded)
    assert CommandRunner().run(ctx) is Outcome.STOPPED
    assert not (Path(spec.workdir) / "checkpoint" / "state.json").exists()  # killed: it saved nothing
    lines = (Path(spec.workdir) / "metrics.jsonl").read_text().splitlines()
    assert 2 <= len(lines) < 400  # killed soon after the fence, far from its 800 evaluations


def test_a_superseded_replay_stops_without_saving(tmp_path: Path) -> None:
    source = tmp_path / "curve.jsonl"
    source.write_text(
        "".join(json.dumps({"step": s, "val/pass_rate": s / 1000}) + "\n" for s in range(1, 101))
    )
    spec = _spec(tmp_path, {"type": "replay", "file": str(source), "metrics": ["val/pass_rate"]})
    work = Path(spec.workdir)
    work.mkdir(parents=True)
    seen: list[str | None] = []

    class Recording(FlippingSink):
        def add(self, *args: Any, **kwargs: Any) -> None:
            super().add(*args, **kwargs)
            if self.superseded():  # the checkpoint as the newer attempt finds it
                seen.append((work / CHECKPOINT).read_text() if (work / CHECKPOINT).exists() else None)

    sink = Recording(after=23)
    ctx = RunContext(spec, 1, sink, work, threading.Event(), None, superseded=sink.superseded)
    assert ReplayRunner().run(ctx) is Outcome.STOPPED
    assert sink.points == 23  # not one point after
    assert (work / CHECKPOINT).read_text() == seen[0]  # untouched since


def _superseded_midway(tmp_path: Path, extra: tuple[str, ...] = ()) -> tuple[Any, RunSpec, list[str]]:
    """A command run (my_trainer.py, 4000 steps of 0.02 s, a checkpoint every 5) on a real SQLite
    store, superseded by a second attempt once it stored 2 points; returns (store, spec, what
    execute() returned for the first attempt)."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    argv = [*_trainer_argv(4000, 5), *extra]
    spec = _spec(tmp_path, {"type": "command", "argv": argv, "metrics_file": "metrics.jsonl"}, db_url=url)
    store = db.open_store(url)
    store.ensure_sweep("sup", {})
    store.register_run(db.RunRecord(spec.run_id, "sup", "baseline", 0, spec.recipe, "h"))
    outcome: list[str] = []
    first = threading.Thread(
        target=lambda: outcome.append(execute(spec, executor="debug", stop=threading.Event()))
    )
    first.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and queries.point_count(store, spec.run_id) < 2:
        time.sleep(0.1)
    assert queries.point_count(store, spec.run_id) >= 2
    assert store.start_attempt(spec.run_id) == 2  # the successor takes the run over
    first.join(120)
    return store, spec, outcome


def _saved_step(spec: RunSpec) -> int:
    return int(json.loads((Path(spec.workdir) / "checkpoint" / "state.json").read_text())["step"])


def test_the_job_ends_a_superseded_attempt_early_on_a_real_store(tmp_path: Path) -> None:
    """The real path: a newer attempt starts while the first one trains; the first one's next
    batch is fenced, its trainer is killed, and execute() says superseded long before its end."""
    store, spec, outcome = _superseded_midway(tmp_path)
    assert outcome == ["superseded"]
    lines = (Path(spec.workdir) / "metrics.jsonl").read_text().splitlines()
    assert len(lines) < 400  # stopped soon after the fence, far from its 800 evaluations
    before = _saved_step(spec)
    assert before < 2000  # run out, it would have saved step 4000 at its end
    time.sleep(1.0)
    assert _saved_step(spec) == before  # nobody of attempt 1 writes there any more
    events = queries.events(store, "sup")
    assert "fenced" in set(events["kind"]) and "failed" not in set(events["kind"])


def test_a_client_reporting_command_is_superseded_through_the_store(tmp_path: Path, monkeypatch: Any) -> None:
    """The trainer writes its points itself (``--report client``): the job's writer sees nothing, so
    the job reads the attempt counter; the attempt ends ``superseded`` (a search then reads the
    run's result instead of failing and retrying the trial), its trainer killed early."""
    from scalerl.harness.execution import job

    monkeypatch.setattr(job, "FENCE_CHECK_S", 0.5)
    store, spec, outcome = _superseded_midway(tmp_path, ("--report", "client"))
    assert outcome == ["superseded"]
    assert _saved_step(spec) < 2000  # killed early: run out, it would have saved step 4000 at its end
    assert store.get_run(spec.run_id).status == "running"  # attempt 2's, untouched


def test_the_jobs_fence_reads_the_store_for_trainers_that_write_nothing_through_it(tmp_path: Path) -> None:
    """A trainer reporting through the client writes nothing through the job's writer: the fence
    still shows once the store's attempt counter moved on, read at most every ``every_s``."""
    from scalerl.harness.execution.job import Fence

    store = db.open_store(f"sqlite:///{tmp_path / 's.db'}")
    store.ensure_sweep("s", {})
    store.register_run(db.RunRecord("r1", "s", "baseline", 0, {}, "h"))
    attempt = store.start_attempt("r1")

    class Quiet:
        fenced = False

    eager, lazy = (
        Fence(store, "r1", attempt, Quiet(), every_s=0.0),
        Fence(store, "r1", attempt, Quiet(), every_s=3600),
    )
    assert (eager(), lazy()) == (False, False)
    store.start_attempt("r1")  # a requeue took the run over
    assert eager() is True and eager() is True  # and stays so
    assert lazy() is False  # not asked again within its hour
    loud = Quiet()
    loud.fenced = True
    assert Fence(store, "r1", attempt, loud, every_s=3600)() is True  # the writer's fence needs no read


def test_a_harness_launched_client_sees_its_attempt_superseded(tmp_path: Path, monkeypatch: Any) -> None:
    from scalerl.harness import client
    from tests.unit.execution.helpers import client_run

    store = client_run(tmp_path, monkeypatch)  # run r1, attempt 1, as the command runner launches it
    monkeypatch.setattr(client, "_writer", None)
    monkeypatch.setattr(client, "_active", None)
    try:
        assert client.superseded() is False  # nothing logged yet
        client.log(1, {"val/pass_rate": 0.1}, compute={"flops": 1.0})
        client.flush()
        assert client.superseded() is False
        store.start_attempt("r1")  # the requeued job
        client.log(2, {"val/pass_rate": 0.2}, compute={"flops": 2.0})
        client.flush()
        assert client.superseded() is True
    finally:
        client.close()


def test_an_attached_run_sees_itself_superseded(tmp_path: Path, monkeypatch: Any) -> None:
    from scalerl.harness import client
    from scalerl.harness.execution import attach

    for key in ("SCALERL_RUN_ID", "SCALERL_ATTEMPT", "SCALERL_DB_URL", "RANK", "SLURM_PROCID"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("SCALERL_SPOOL_DIR", str(tmp_path / "spool"))
    monkeypatch.setattr(client, "_active", None)
    monkeypatch.setattr(attach, "code_dir", lambda: tmp_path)
    url = f"sqlite:///{tmp_path / 'store.db'}"
    first = client.init(sweep="s", seed=0, config={"lr": 1.0}, db=url)
    first.log(0, {"val/pass_rate": 0.1}, compute={"flops": 1.0})
    first.flush()
    assert first.superseded is False and client.superseded() is False
    monkeypatch.setattr(client, "_active", None)
    second = client.init(sweep="s", seed=0, config={"lr": 1.0}, db=url, resume_step=0)
    first.log(1, {"val/pass_rate": 0.2}, compute={"flops": 2.0})
    first.flush()
    assert first.superseded is True and second.superseded is False
    assert client.superseded() is False  # the module speaks for the active run: the second
    assert first.finish() == "superseded"
    second.log(1, {"val/pass_rate": 0.3}, compute={"flops": 2.0})
    assert second.finish() == "completed"
