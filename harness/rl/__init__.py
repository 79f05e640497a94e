"""The reference RL trainer (see docs/architecture.md, "Trainer API").

``train(recipe, seed, sink=..., workdir=...)`` runs one ScaleRL-style run; ``ListSink`` keeps its
points in memory. Imports are lazy so ``import scalerl.harness.rl`` does not load torch. The trainer needs
the ``trainer`` extra (torch, transformers); without it, ``scalerl.harness.rl.train`` raises an
:class:`~scalerl.harness.errors.ExecutionError` that names the install command, not an ImportError.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scalerl.harness.rl.sink import ListSink, PointSink
    from scalerl.harness.rl.trainer import TrainResult, train

__all__ = ["ListSink", "PointSink", "TrainResult", "train"]

_WHERE = {
    "ListSink": "scalerl.harness.rl.sink",
    "PointSink": "scalerl.harness.rl.sink",
    "TrainResult": "scalerl.harness.rl.trainer",
    "train": "scalerl.harness.rl.trainer",
}


# What the trainer imports beyond the base install; all of it comes with the ``trainer`` extra.
TRAINER_PACKAGES = ("torch", "transformers")


def require_trainer() -> None:
    """Raise :class:`ExecutionError` naming the fix when the ``trainer`` extra is not installed."""
    import importlib.util

    missing = [name for name in TRAINER_PACKAGES if importlib.util.find_spec(name) is None]
    if missing:
        from scalerl.harness.errors import ExecutionError

        raise ExecutionError(
            f"the reference trainer needs {' and '.join(missing)}, which this environment lacks "
            "(fix: pip install 'scalerl-harness[trainer]')"
        )


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        import importlib

        if _WHERE[name] == "scalerl.harness.rl.trainer":
            require_trainer()
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'scalerl.harness.rl' has no attribute {name!r}")
