"""The reference RL trainer (see docs/architecture.md, "Trainer API").

``train(recipe, seed, sink=..., workdir=...)`` runs one ScaleRL-style run; ``ListSink`` keeps its
points in memory. Imports are lazy so ``import harness.rl`` does not load torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.rl.sink import ListSink, PointSink
    from harness.rl.trainer import TrainResult, train

__all__ = ["ListSink", "PointSink", "TrainResult", "train"]

_WHERE = {
    "ListSink": "harness.rl.sink",
    "PointSink": "harness.rl.sink",
    "TrainResult": "harness.rl.trainer",
    "train": "harness.rl.trainer",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        import importlib

        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'harness.rl' has no attribute {name!r}")
