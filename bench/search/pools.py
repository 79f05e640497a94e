"""Pools of real curves a search compares at one budget, as :mod:`bench.search` replays them.

A *pool* is a set of curves a search would compare at one common budget ``T`` (the target
compute, in training steps): every curve of the pool reaches ``T`` and is cut there, nothing is
rescaled. 14 pools, 144 curves in all:

- W&B: the 15 GSM8K validation curves of 17 that reach 2,500 steps (one point every 5 steps);
- TensorBoard: 11 GSM8K validation curves and, separately, 11 train-reward curves (T = 105);
- verl CSV: the 7 train-reward replicates of one config (T = 116): only seed noise separates them;
- SPEED-RL: one pool per (model size, benchmark): 5 benchmarks x {1.5B: 8 runs, T = 425;
  7B: 12 runs, T = 700} (one point every 25 steps).

A completed trial's value is its curve's final value: the mean of its last ``FINAL_POINTS``
points at or before ``T``.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bench.data import SOURCES, RealCurve

FINAL_POINTS = 3


@dataclass(frozen=True)
class Curve:
    name: str
    steps: np.ndarray  # int64, sorted
    values: np.ndarray

    @property
    def final(self) -> float:
        return float(np.mean(self.values[-FINAL_POINTS:]))


@dataclass(frozen=True)
class Pool:
    name: str
    source: str
    target: int
    curves: tuple[Curve, ...]

    @property
    def finals(self) -> np.ndarray:
        return np.array([c.final for c in self.curves])

    @property
    def points(self) -> int:
        return int(np.median([c.steps.size for c in self.curves]))


def _cut(c: RealCurve, target: int) -> Curve:
    keep = c.x <= target
    return Curve(c.name, c.x[keep].astype(np.int64), c.y[keep].astype(np.float64))


def _pool(name: str, source: str, curves: Sequence[RealCurve], target: int | None = None) -> Pool:
    t = int(min(c.x[-1] for c in curves)) if target is None else target
    kept = [c for c in curves if c.x[-1] >= t]
    return Pool(name, source, t, tuple(_cut(c, t) for c in kept))


def build_pools(real: Sequence[RealCurve]) -> list[Pool]:
    by: dict[str, list[RealCurve]] = defaultdict(list)
    for c in real:
        by[c.source].append(c)
    pools = [_pool("W&B GSM8K val", SOURCES[0], by[SOURCES[0]], target=2500)]
    tb = by[SOURCES[1]]
    pools.append(_pool("TB GSM8K val", SOURCES[1], [c for c in tb if ":val-core" in c.name]))
    pools.append(_pool("TB train reward", SOURCES[1], [c for c in tb if ":critic" in c.name]))
    pools.append(_pool("verl train reward", SOURCES[2], by[SOURCES[2]]))
    groups: dict[tuple[str, str], list[RealCurve]] = defaultdict(list)
    for c in by[SOURCES[3]]:
        m = re.search(r"val-core/([^/]+?)-Qwen-instruct/", c.name)
        bench = m.group(1) if m else c.name.split(":", 1)[1]
        groups[(c.name.split("-", 1)[0], bench)].append(c)
    for (size, bench), cs in sorted(groups.items()):
        pools.append(_pool(f"SPEED {size} {bench}", SOURCES[3], cs))
    return pools
