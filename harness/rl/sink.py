"""Where evaluation points go: the :class:`PointSink` protocol and an in-memory sink for tests.

``scalerl.db.PointWriter`` implements the same protocol against the results store. Contract: ``add`` may
be called again for a step already seen (after a resume the trainer re-emits the points between
the checkpoint and the interruption with identical values); sinks key points by (step, metric).
``n`` maps a metric to the number of Bernoulli samples behind its value (``val/pass_rate``:
validation prompts x k), from which the analysis derives each point's binomial standard error;
metrics missing from it (or ``n=None``) carry no sample count.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable


@runtime_checkable
class PointSink(Protocol):
    def add(
        self,
        step: int,
        metrics: Mapping[str, float],
        compute: Mapping[str, float],
        n: Mapping[str, int] | None = None,
    ) -> None: ...

    def flush(self) -> None: ...


@dataclass(frozen=True)
class Point:
    step: int
    metrics: dict[str, float]
    compute: dict[str, float]
    n: dict[str, int] = field(default_factory=dict)


@dataclass
class ListSink:
    """Keeps every point in order (duplicates included, so tests can see re-emission)."""

    points: list[Point] = field(default_factory=list)
    flushes: int = 0

    def add(
        self,
        step: int,
        metrics: Mapping[str, float],
        compute: Mapping[str, float],
        n: Mapping[str, int] | None = None,
    ) -> None:
        self.points.append(Point(step, dict(metrics), dict(compute), dict(n or {})))

    def flush(self) -> None:
        self.flushes += 1

    def curve(self, metric: str = "val/pass_rate") -> list[tuple[int, float]]:
        return [(p.step, p.metrics[metric]) for p in self.points if metric in p.metrics]
