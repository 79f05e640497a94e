"""What the ``analysis`` extra brings, and the message that names it when it is missing.

``pip install scalerl-harness`` is the light install a lab's trainer takes: the store (SQLite and
PostgreSQL), :mod:`scalerl.harness.client`, recipes, ``scalerl plan``/``config``/``db``. Sweeps,
imports, reads of the store as DataFrames, fits, forecasts and reports need
``pip install 'scalerl-harness[analysis]'`` (the packages below); the reference trainer needs
``[trainer]`` (:func:`scalerl.harness.rl.require_trainer`).
"""

from __future__ import annotations

# Import names of the packages the `analysis` extra installs (pyproject.toml keeps the same list).
ANALYSIS_PACKAGES = (
    "numpy", "pandas", "scipy", "plotly", "pyarrow", "adbc_driver_sqlite", "optuna", "cmaes", "submitit",
    "regex", "rich", "psutil",
)  # fmt: skip
ANALYSIS_FIX = "pip install 'scalerl-harness[analysis]'"


def missing_analysis_package(err: BaseException) -> str | None:
    """The package of the ``analysis`` extra whose absence raised ``err``, else None."""
    if not isinstance(err, ModuleNotFoundError):
        return None
    name = (err.name or "").partition(".")[0]
    return name if name in ANALYSIS_PACKAGES else None


def needs_analysis(what: str, package: str) -> str:
    """``{what} needs {package}, which this environment lacks (fix: ...)``."""
    return f"{what} needs {package}, which this environment lacks (fix: {ANALYSIS_FIX})"
