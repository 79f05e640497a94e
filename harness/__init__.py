"""scalerl-harness: ablation sweeps, a results store and sigmoid-fit verdicts for RL post-training.

Importing :mod:`harness` is cheap: heavy dependencies (torch, transformers, plotly, scipy) are
imported by the submodules that need them, when they are first used.
"""

from harness.errors import (
    AnalysisError,
    ConfigError,
    ExecutionError,
    HarnessError,
    ImportFormatError,
    StoreError,
)

__version__ = "0.1.0"

__all__ = [
    "AnalysisError",
    "ConfigError",
    "ExecutionError",
    "HarnessError",
    "ImportFormatError",
    "StoreError",
    "__version__",
]
