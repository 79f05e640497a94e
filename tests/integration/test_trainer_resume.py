"""Exact resume: a killed run, resumed from its checkpoint, draws the same curve.

Real torch model, real checkpoint files, PipelineRL with batches in flight at the checkpoint.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path

import pytest

from scalerl.harness.rl.sink import ListSink
from scalerl.harness.rl.trainer import train
from tests.unit.rl.micro import _policy_cache, micro_recipe

__all__ = ["_policy_cache"]

DETERMINISTIC = ("flops", "tokens", "samples")


class Killed(Exception):
    pass


class KillAt(ListSink):
    """Records points, then dies (like kill -9, no checkpoint) right after receiving ``step``."""

    def __init__(self, step: int) -> None:
        super().__init__()
        self.kill_step = step

    def add(
        self,
        step: int,
        metrics: Mapping[str, float],
        compute: Mapping[str, float],
        n: Mapping[str, int] | None = None,
    ) -> None:
        super().add(step, metrics, compute, n)
        if step == self.kill_step:
            raise Killed


class StopAt(ListSink):
    def __init__(self, step: int, stop: threading.Event) -> None:
        super().__init__()
        self.stop_step, self.stop = step, stop

    def add(
        self,
        step: int,
        metrics: Mapping[str, float],
        compute: Mapping[str, float],
        n: Mapping[str, int] | None = None,
    ) -> None:
        super().add(step, metrics, compute, n)
        if step == self.stop_step:
            self.stop.set()


def test_killed_and_stopped_runs_resume_to_the_identical_curve(tmp_path: Path) -> None:
    recipe = micro_recipe(
        budget={"value": 8, "unit": "steps"}, eval={"every_steps": 1}, checkpoint_every_steps=3
    )
    full = ListSink()
    train(recipe, 5, sink=full, workdir=tmp_path / "full")
    assert [p.step for p in full.points] == list(range(9))

    work = tmp_path / "interrupted"
    first = KillAt(5)
    with pytest.raises(Killed):
        train(recipe, 5, sink=first, workdir=work)
    stop = threading.Event()
    second = StopAt(6, stop)
    res2 = train(recipe, 5, sink=second, workdir=work, stop=stop)
    assert res2.resumed_from == 3 and res2.stopped and res2.steps == 6
    third = ListSink()
    res3 = train(recipe, 5, sink=third, workdir=work)
    assert res3.resumed_from == 6 and not res3.stopped and res3.steps == 8

    # After a resume the sink only hears steps after the checkpoint; 4 and 5 are re-emitted.
    assert [p.step for p in first.points] == [0, 1, 2, 3, 4, 5]
    assert [p.step for p in second.points] == [4, 5, 6]
    assert [p.step for p in third.points] == [7, 8]
    reference = {p.step: p for p in full.points}
    for p in first.points + second.points + third.points:
        ref = reference[p.step]
        assert p.metrics == ref.metrics, p.step  # bit-identical on CPU, diagnostics included
        assert p.n == ref.n, p.step
        assert {u: p.compute[u] for u in DETERMINISTIC} == {u: ref.compute[u] for u in DETERMINISTIC}
    # A finished run resumes at its end: no step is redone and no point is emitted again.
    again = ListSink()
    res4 = train(recipe, 5, sink=again, workdir=work)
    assert res4.resumed_from == 8 and res4.steps == 8 and again.points == []
    # wall time is measured, not replayed, but it accumulates across the resume.
    assert third.points[-1].compute["wall_s"] > second.points[-1].compute["wall_s"] > 0
