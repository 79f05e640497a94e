"""scalerl-harness: ablation sweeps, a results store and sigmoid-fit verdicts for RL post-training.

Importing :mod:`scalerl.harness` is cheap: heavy dependencies (torch, transformers, plotly, scipy) are
imported by the submodules that need them, when they are first used. The notebook API,
:class:`scalerl.harness.Sweep` (:mod:`scalerl.harness.api`), is imported on first access too.
"""

from typing import TYPE_CHECKING

from scalerl import lazy_getattr
from scalerl.harness.errors import (
    AnalysisError,
    ConfigError,
    ExecutionError,
    HarnessError,
    ImportFormatError,
    StoreError,
)

if TYPE_CHECKING:
    from scalerl.harness.api import CancelResult, FitResult, ForecastResult, LaunchResult, Sweep, list_sweeps

__version__ = "0.1.0"

# ``scalerl.harness.Sweep`` and its result types, from :mod:`scalerl.harness.api` on first use.
__getattr__ = lazy_getattr(
    "scalerl.harness",
    dict.fromkeys(
        ("CancelResult", "FitResult", "ForecastResult", "LaunchResult", "Sweep", "list_sweeps"),
        "scalerl.harness.api",
    ),
)


__all__ = [
    "AnalysisError",
    "CancelResult",
    "ConfigError",
    "ExecutionError",
    "FitResult",
    "ForecastResult",
    "HarnessError",
    "ImportFormatError",
    "LaunchResult",
    "StoreError",
    "Sweep",
    "__version__",
    "list_sweeps",
]
