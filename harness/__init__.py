"""scalerl-harness: ablation sweeps, a results store and sigmoid-fit verdicts for RL post-training.

Importing :mod:`scalerl.harness` is cheap: heavy dependencies (torch, transformers, plotly, scipy) are
imported by the submodules that need them, when they are first used. The notebook API,
:class:`scalerl.harness.Sweep` (:mod:`scalerl.harness.api`), is imported on first access too.
"""

from typing import TYPE_CHECKING, Any

from scalerl.harness.errors import (
    AnalysisError,
    ConfigError,
    ExecutionError,
    HarnessError,
    ImportFormatError,
    StoreError,
)

if TYPE_CHECKING:
    from scalerl.harness.api import FitResult, LaunchResult, Sweep

__version__ = "0.1.0"

_LAZY = {"FitResult", "LaunchResult", "Sweep"}


def __getattr__(name: str) -> Any:
    """``scalerl.harness.Sweep`` and its result types, imported from :mod:`scalerl.harness.api` on
    first use."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module("scalerl.harness.api"), name)
    raise AttributeError(f"module 'scalerl.harness' has no attribute {name!r}")


__all__ = [
    "AnalysisError",
    "ConfigError",
    "ExecutionError",
    "FitResult",
    "HarnessError",
    "ImportFormatError",
    "LaunchResult",
    "StoreError",
    "Sweep",
    "__version__",
]
