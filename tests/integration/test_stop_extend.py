"""Stop-when-decided and ``scalerl sweep --extend`` on the real (micro-sized) trainer.

An extended run is the same run, continued from its checkpoint: its curve equals, point for
point, a run trained to the larger budget from the start (the trainer's schedule does not depend
on the budget). A run stopped because its variant was decided keeps its checkpoint, and
``--extend`` takes it to the budget with neither a gap nor a duplicate point.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from scalerl import db
from scalerl.db import queries
from scalerl.harness.analysis.verdicts.inference import Contrast
from scalerl.harness.analysis.verdicts.rule import Evidence
from scalerl.harness.analysis.verdicts.spending import LookPlan
from scalerl.harness.analysis.verdicts.types import Verdict
from scalerl.harness.cli import main
from scalerl.harness.execution.decide import DecideMonitor
from scalerl.harness.execution.runners.reference import ReferenceRunner
from scalerl.harness.execution.status import poll_jobs
from scalerl.harness.execution.sweep import extend, launch, prepare
from tests.unit.execution.helpers import REPO

# The deterministic columns of a point (wall-clock gpu_hours differ between any two runs).
COLUMNS = ["metric", "step", "value", "flops", "tokens", "samples", "n"]


@pytest.fixture(autouse=True)
def _policy_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCALERL_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "policy-cache"))
    monkeypatch.setenv("SCALERL_TORCH_THREADS", "1")


def _write_sweep(folder: Path, name: str, budget: int, knobs: list[str], every: int = 10) -> Path:
    recipe = {
        "extends": str(REPO / "recipes" / "tiny.yaml"),
        "name": "micro-sd",
        "model": {"tiny": {"n_layer": 1, "n_head": 2, "d_model": 32, "warmstart_steps": 30}},
        "task": {"n_train": 64, "n_val": 8},
        "scale": {"prompts_per_batch": 2, "generations_per_prompt": 4},
        "eval": {"every_steps": every, "n_val": 8, "k": 1},
        "checkpoint_every_steps": 20,
    }
    (folder / "micro-sd.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
    sweep = {
        "sweep": name,
        "base": "micro-sd.yaml",
        "design": "loo",
        "loo": {"knobs": knobs},
        "seeds": [0],
        "budget": {"value": budget, "unit": "steps"},
        "fit": {"metric": "val/pass_rate", "axis": "flops", "stop_when": "decided"},
        "resources": {"cpus": 1, "gpus": 0, "mem_gb": 1, "time_min": 10},
        "executor": "debug",
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(sweep, sort_keys=False))
    return path


def _points(store: Any, sweep: str) -> Any:
    frame = queries.curves(store, sweep)
    return frame[COLUMNS].sort_values(["metric", "step"]).reset_index(drop=True)


def test_extend_continues_a_completed_run_exactly_as_a_longer_run(tmp_path: Path, capsys: Any) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    short = _write_sweep(tmp_path, "ext", 30, [])
    common = ["--db", url, "--executor", "debug"]
    assert main(["sweep", str(short), *common, "--state-dir", str(tmp_path / "a")]) == 0
    store = db.open_store(url)
    (run_id,) = list(queries.runs(store, "ext")["run_id"])
    assert main(["sweep", str(short), *common, "--state-dir", str(tmp_path / "a"), "--extend", "60"]) == 0
    assert "extending 1 run(s) to 60 steps on debug" in capsys.readouterr().out
    runs = queries.runs(store, "ext")
    assert list(runs["run_id"]) == [run_id] and list(runs["status"]) == ["completed"]
    assert int(runs["attempts"].iloc[0]) == 2
    events = queries.events(store, "ext")
    (ext,) = list(events.loc[events.kind == "extended", "detail"])
    assert (ext["from"], ext["to"], ext["unit"], ext["resume_step"], ext["status"]) == (
        30.0, 60.0, "steps", 30, "completed",
    )  # fmt: skip
    # The same recipe trained to 60 from the start: every point equal, bit for bit.
    straight = _write_sweep(tmp_path, "straight", 60, [])
    assert main(["sweep", str(straight), *common, "--state-dir", str(tmp_path / "b")]) == 0
    got, want = _points(store, "ext"), _points(store, "straight")
    assert sorted(set(got.loc[got.metric == "val/pass_rate", "step"])) == [0, 10, 20, 30, 40, 50, 60]
    assert len(got) == len(want) > 20
    assert got.equals(want)
    # Extending again to the same budget does nothing; a plain sweep skips the completed run.
    capsys.readouterr()
    assert main(["sweep", str(short), *common, "--state-dir", str(tmp_path / "a"), "--extend", "60"]) == 0
    assert "extending 0 run(s) to 60 steps on debug; 1 already there" in capsys.readouterr().out
    assert main(["sweep", str(short), *common, "--state-dir", str(tmp_path / "a")]) == 0
    assert "skipped 1 completed" in capsys.readouterr().out
    assert int(queries.runs(store, "ext")["attempts"].iloc[0]) == 2


def _mover(variant: str) -> Verdict:
    # dA 0.1 with SE 0.025 on 20 degrees of freedom: [0.048, 0.152], wholly beyond the margin.
    evidence = Evidence(Contrast(0.1, 0.025, 20.0), None, None, 0.02, math.log1p(0.1), 0.95)
    return Verdict(
        "loss", variant, "x", "asymptote-mover", 0.5, 0.6, 0.1, 0.05, 0.15, 1.0, 1.0, 0.0, -0.1, 0.1,
        0.02, "synthetic", evidence=evidence,
    )  # fmt: skip


def test_stop_when_decided_keeps_the_checkpoint_and_extend_finishes_the_run(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    budget = 400
    path = _write_sweep(tmp_path, "sd", budget, ["loss"])
    state = tmp_path / "st"
    kw: dict[str, Any] = dict(profile=None, db_url=url, state_dir=state, max_parallel=2)
    store = db.open_store(url)
    launch(store, prepare(path, [], executor="local", **kw))
    runs = queries.runs(store, "sd")
    variant = str(runs.loc[runs.knob.notna(), "variant"].iloc[0])

    def fit(store: Any, sweep: str, level: float) -> list[Verdict]:
        # Decided as soon as every run has a point past step 0 (the real fit needs long curves).
        return [_mover(variant)] if (queries.runs(store, sweep)["n_points"] >= 2).all() else []

    # The first look at 5% of the 400-step budget each run's config plans: step 20.
    plan = LookPlan(fractions=(0.05, 0.5, 0.75))
    monitor = DecideMonitor(store, "sd", min_interval_s=0.0, fit=fit, say=lambda _: None, plan=plan)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(monitor.stopped) < 2:
        monitor()
        time.sleep(0.2)
    assert sorted(s.variant for s in monitor.stopped) == ["baseline", variant]
    # The jobs stop at their next step boundary, checkpointed.
    from scalerl.harness.execution.status import latest_handles

    handles = latest_handles(store, "sd")
    while time.monotonic() < deadline and any(s.alive for s in poll_jobs(handles).values()):
        time.sleep(0.2)
    runs = queries.runs(store, "sd")
    assert list(runs["status"]) == ["stopped-decided", "stopped-decided"]
    steps = {}
    for rid in runs["run_id"]:
        step = ReferenceRunner().resume_step(state / "runs" / rid)
        assert step is not None and 20 <= step < budget  # stopped early, checkpoint kept
        steps[rid] = step
    events = queries.events(store, "sd")
    decided = events[events.kind == "stopped-decided"]
    assert {d.get("verdict") for d in decided["detail"]} >= {"asymptote-mover", "baseline"}
    # A plain resubmission leaves the stopped runs alone; --extend to the budget finishes them.
    assert launch(store, prepare(path, [], executor="debug", **kw)).count("skip-stopped") == 2
    report = extend(store, prepare(path, [], executor="debug", **kw), float(budget))
    assert report.count("extend") == 2
    runs = queries.runs(store, "sd")
    assert list(runs["status"]) == ["completed", "completed"]
    curves = queries.curves(store, "sd", metric="val/pass_rate")
    for rid in runs["run_id"]:
        got = list(curves.loc[curves.run_id == rid, "step"])
        assert got == list(range(0, budget + 1, 10)), (rid, steps[rid])  # no gap, no duplicate
    events = queries.events(store, "sd")
    extended = [dict(d) for d in events.loc[events.kind == "extended", "detail"]]
    assert sorted(d["resume_step"] for d in extended) == sorted(steps.values())
    assert {(d["from"], d["to"], d["status"]) for d in extended} == {(400.0, 400.0, "stopped-decided")}
