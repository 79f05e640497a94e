"""scalerl-harness, imported as ``scalerl``: the harness :mod:`scalerl.harness`, the store :mod:`scalerl.db`.

One distribution-level name, so a lab's trainer repository with its own ``db`` or ``harness``
package imports both without a clash. ``scalerl.harness`` and ``scalerl.db`` are the repository's
``harness/`` and ``db/`` folders (symlinked here, copied into the wheel).

A trainer logs through the client::

    from scalerl.harness import client

    client.log(step, {"val/pass_rate": 0.41}, compute={"flops": 1.2e15}, n={"val/pass_rate": 640})

Importing :mod:`scalerl` imports nothing else: the names below (``scalerl.Sweep``, the result types
and the exceptions of :mod:`scalerl.harness`) are looked up on first access.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scalerl.harness import (
        AnalysisError,
        CancelResult,
        ConfigError,
        ExecutionError,
        FitResult,
        ForecastResult,
        HarnessError,
        ImportFormatError,
        LaunchResult,
        StoreError,
        Sweep,
        __version__,
        list_sweeps,
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


def lazy_getattr(package: str, where: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` (PEP 562) for ``package``: ``name`` comes from the module
    ``where[name]``, imported on first access; any other name raises AttributeError as Python's own
    lookup does. Here rather than in a module of its own, so that importing :mod:`scalerl` still
    imports nothing else; :mod:`scalerl.harness` and :mod:`scalerl.harness.execution` use it too."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    return __getattr__


# ``scalerl.Sweep`` and the rest of ``__all__``, from :mod:`scalerl.harness` on first use.
__getattr__ = lazy_getattr("scalerl", dict.fromkeys(__all__, "scalerl.harness"))


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
