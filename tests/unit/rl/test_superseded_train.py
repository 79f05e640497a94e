"""The reference trainer told that a newer attempt took its run over: it stops after the step in
progress and saves nothing (the successor owns the checkpoint folder)."""

from __future__ import annotations

from pathlib import Path

from scalerl.harness.rl import checkpoint
from scalerl.harness.rl.sink import ListSink
from scalerl.harness.rl.trainer import train
from tests.unit.rl.micro import _policy_cache, micro_recipe

__all__ = ["_policy_cache"]


def test_a_superseded_training_stops_without_a_checkpoint(tmp_path: Path) -> None:
    recipe = micro_recipe(budget={"value": 8, "unit": "steps"}, checkpoint_every_steps=2)
    sink = ListSink()

    def superseded() -> bool:  # the fence shows at the trainer's second evaluation (step 2)
        return len({p.step for p in sink.points}) >= 2

    result = train(recipe, 0, sink=sink, workdir=tmp_path, superseded=superseded)
    assert (result.stopped, result.reason, result.steps) == (True, "superseded", 2)
    assert checkpoint.load(tmp_path) is None  # step 2's periodic checkpoint was not written
    assert sorted({p.step for p in sink.points}) == [0, 2]


def test_without_a_fence_the_same_run_checkpoints_and_finishes(tmp_path: Path) -> None:
    recipe = micro_recipe(budget={"value": 4, "unit": "steps"}, checkpoint_every_steps=2)
    result = train(recipe, 0, sink=ListSink(), workdir=tmp_path, superseded=lambda: False)
    assert (result.stopped, result.steps) == (False, 4)
    state = checkpoint.load(tmp_path)
    assert state is not None and state["step"] == 4
