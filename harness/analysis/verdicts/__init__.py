"""Knob verdicts: does a LOO variant move the ceiling, shape the efficiency, or do nothing?

- :mod:`.pipeline`: :func:`classify` fits every run, pools the seeds and judges each variant;
- :mod:`.types`: :class:`VerdictOptions`, :class:`Verdict`, :class:`SweepAnalysis`;
- :mod:`.inference`: seed-level pooling over the sweep, contrasts and their t intervals;
- :mod:`.ceiling`, :mod:`.seeds`, :mod:`.collapse`: is a ceiling measured, which seeds are judged;
- :mod:`.power`: the smallest detectable effect and the seeds a target needs;
- :mod:`.decision`: when is a knob decided, and what would decide it;
- :mod:`.spending`: the look plan of stop-when-decided;
- :mod:`.service`: :func:`fit_sweep`, a stored sweep fitted and its verdicts written back.

Importing this package loads nothing: the names below come from their modules on first access.
"""

from typing import TYPE_CHECKING

from scalerl import lazy_getattr

if TYPE_CHECKING:
    from scalerl.harness.analysis.verdicts.pipeline import classify
    from scalerl.harness.analysis.verdicts.service import FitRequest, SweepFitResult, fit_sweep, save_fits
    from scalerl.harness.analysis.verdicts.spending import LookPlan
    from scalerl.harness.analysis.verdicts.types import SweepAnalysis, Verdict, VerdictOptions

__all__ = [
    "FitRequest",
    "LookPlan",
    "SweepAnalysis",
    "SweepFitResult",
    "Verdict",
    "VerdictOptions",
    "classify",
    "fit_sweep",
    "save_fits",
]

__getattr__ = lazy_getattr(
    "scalerl.harness.analysis.verdicts",
    {
        "FitRequest": "scalerl.harness.analysis.verdicts.service",
        "LookPlan": "scalerl.harness.analysis.verdicts.spending",
        "SweepAnalysis": "scalerl.harness.analysis.verdicts.types",
        "SweepFitResult": "scalerl.harness.analysis.verdicts.service",
        "Verdict": "scalerl.harness.analysis.verdicts.types",
        "VerdictOptions": "scalerl.harness.analysis.verdicts.types",
        "classify": "scalerl.harness.analysis.verdicts.pipeline",
        "fit_sweep": "scalerl.harness.analysis.verdicts.service",
        "save_fits": "scalerl.harness.analysis.verdicts.service",
    },
)
