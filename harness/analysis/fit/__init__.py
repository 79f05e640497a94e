"""The sigmoid fit: ScaleRL's curve, its fitters, bootstrap intervals, the power law it is
compared with, and backtests.

- :mod:`.curve`: ``R(C) = R0 + (A - R0) / (1 + (C_mid/C)^B)``, :class:`FitOptions` and the frozen
  :class:`SigmoidFit` every fitter returns (with the shared cleaning and status checks);
- :mod:`.fitters`: the fitter registry (``fast``, ``paper``, ``paper_grid``, ``curve_fit``) and
  :func:`fit_sigmoid` / :func:`fit_sigmoid_many`; :mod:`.batched` (the fast fitter) and
  :mod:`.paper` (ScaleRL's App. A.5 grid, vectorised) do the searching;
- :mod:`.bootstrap`: bootstrap CIs over seeds and points (:func:`bootstrap_fits`);
- :mod:`.powerlaw`: the power law ``A - D / C^B``;
- :mod:`.backtest`: forecasts from a fit's bootstrap replicates and backtests of fits (used by
  bench/; a forecast of future observations is :mod:`scalerl.harness.analysis.forecast`).

Importing this package loads nothing: the names below come from their modules on first access.
"""

from typing import TYPE_CHECKING

from scalerl import lazy_getattr

if TYPE_CHECKING:
    from scalerl.harness.analysis.fit.bootstrap import BootstrapResult, bootstrap_fits, pool
    from scalerl.harness.analysis.fit.curve import FitOptions, SigmoidFit, sigmoid_curve
    from scalerl.harness.analysis.fit.fitters import (
        FITTERS,
        Fitter,
        fit_sigmoid,
        fit_sigmoid_many,
        get_fitter,
    )
    from scalerl.harness.analysis.fit.powerlaw import PowerLawFit, fit_power_law

__all__ = [
    "FITTERS",
    "BootstrapResult",
    "FitOptions",
    "Fitter",
    "PowerLawFit",
    "SigmoidFit",
    "bootstrap_fits",
    "fit_power_law",
    "fit_sigmoid",
    "fit_sigmoid_many",
    "get_fitter",
    "pool",
    "sigmoid_curve",
]

__getattr__ = lazy_getattr(
    "scalerl.harness.analysis.fit",
    {
        "FITTERS": "scalerl.harness.analysis.fit.fitters",
        "BootstrapResult": "scalerl.harness.analysis.fit.bootstrap",
        "FitOptions": "scalerl.harness.analysis.fit.curve",
        "Fitter": "scalerl.harness.analysis.fit.fitters",
        "PowerLawFit": "scalerl.harness.analysis.fit.powerlaw",
        "SigmoidFit": "scalerl.harness.analysis.fit.curve",
        "bootstrap_fits": "scalerl.harness.analysis.fit.bootstrap",
        "fit_power_law": "scalerl.harness.analysis.fit.powerlaw",
        "fit_sigmoid": "scalerl.harness.analysis.fit.fitters",
        "fit_sigmoid_many": "scalerl.harness.analysis.fit.fitters",
        "get_fitter": "scalerl.harness.analysis.fit.fitters",
        "pool": "scalerl.harness.analysis.fit.bootstrap",
        "sigmoid_curve": "scalerl.harness.analysis.fit.curve",
    },
)
