"""A real TRL ``GRPOTrainer`` on the tiny CPU policy, through the job body into a real SQLite
store: a 3-variant LOO sweep (recipes/examples/trl-sweep.yaml, shortened) runs to a verdict table,
and a run stopped mid-way resumes from TRL's checkpoint with no gap and no duplicate point."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from scalerl import db
from scalerl.db import queries
from scalerl.harness.analysis.verdicts.service import fit_sweep
from scalerl.harness.execution.job import execute
from scalerl.harness.execution.submit import register
from scalerl.harness.execution.sweep import launch, prepare

pytest.importorskip("trl")

EXAMPLES = Path(__file__).resolve().parents[2] / "recipes" / "examples"
STEPS, EVERY = 24, 4


class StopAfter(threading.Event):
    """Reads as set from its ``n``-th check on: a preemption at an exact point."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.left = n

    def is_set(self) -> bool:
        self.left -= 1
        return self.left <= 0 or super().is_set()


def _sweep(folder: Path, knobs: list[str], **recipe: Any) -> Path:
    base = {
        "extends": str(EXAMPLES / "trl-recipe.yaml"),
        "name": "trl-test",
        "budget": {"value": STEPS, "unit": "steps"},
        "eval": {"every_steps": EVERY, "n_val": 16, "k": 2},
        "checkpoint_every_steps": 8,
        **recipe,
    }
    (folder / "r.yaml").write_text(yaml.safe_dump(base, sort_keys=False))
    sweep = yaml.safe_load((EXAMPLES / "trl-sweep.yaml").read_text())
    sweep |= {"base": "r.yaml", "loo": {"knobs": knobs}, "executor": "debug"}
    (folder / "s.yaml").write_text(yaml.safe_dump(sweep, sort_keys=False))
    return folder / "s.yaml"


def test_three_variant_trl_sweep_runs_to_a_verdict_table(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    prepared = prepare(
        _sweep(tmp_path, ["loss", "advantage_norm"]), [], executor="debug", profile=None,
        db_url=url, state_dir=tmp_path / "st",
    )  # fmt: skip
    store = db.open_store(url)
    launch(store, prepared)
    runs = queries.runs(store, "trl-loo")
    assert sorted(runs["variant"]) == ["baseline", "loo-dapo", "loo-plan"]
    assert list(runs["status"]) == ["completed"] * 3, runs["error"].tolist()
    curves = queries.curves(store, "trl-loo", metric="val/pass_rate")
    expected = list(range(0, STEPS + 1, EVERY))
    for _, run in curves.groupby("run_id", observed=True):
        assert sorted(run["step"]) == expected
        assert set(run["n"]) == {32}  # 16 prompts x k=2
        assert run["value"].between(0.0, 1.0).all()
        # 8 prompts x 8 generations per batch, 2 minibatches (PPO-off-policy-2): 32 per step.
        assert run.sort_values("step")["samples"].tolist() == [32.0 * s for s in expected]
        assert run["flops"].is_monotonic_increasing
    assert curves["value"].mean() > 0.1  # the warm-started policy solves some problems

    result = fit_sweep(store, "trl-loo")
    assert result.analysis is not None
    verdicts = queries.verdicts(store, "trl-loo")
    assert sorted(verdicts["knob"]) == ["advantage_norm", "loss"]


def test_a_stopped_trl_run_resumes_from_its_checkpoint(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    prepared = prepare(
        _sweep(tmp_path, []), [], executor="debug", profile=None, db_url=url, state_dir=tmp_path / "st"
    )
    store = db.open_store(url)
    register(store, "trl-loo", prepared.sweep.model_dump(mode="json", by_alias=True), prepared.planned)
    (spec,) = prepared.specs

    assert execute(spec, executor="debug", stop=StopAfter(10)) == "stopped"
    first = queries.curves(store, "trl-loo", metric="val/pass_rate")
    assert 0 < first["step"].max() < STEPS
    assert execute(spec, executor="debug", stop=threading.Event()) == "completed"
    info = store.get_run(spec.run_id)
    assert info is not None and info.attempts == 2
    steps = queries.curves(store, "trl-loo", metric="val/pass_rate")["step"].tolist()
    assert sorted(steps) == list(range(0, STEPS + 1, EVERY))  # no gap, no duplicate
