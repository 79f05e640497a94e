"""Knob verdicts: does a LOO variant move the ceiling, change the efficiency, both, or nothing?

How one knob is decided: :mod:`.rule` (:func:`decide`, the one rule, and its contract), given the
evidence :mod:`.pipeline` prepares. The modules:

- :mod:`.rule`: the claims and their p-values from one knob's :class:`Evidence`
  (:func:`decide`), the sweep's false-discovery step and each claim's probability
  (:func:`claims`); :func:`decided` for stop-when-decided;
- :mod:`.pipeline`: :func:`classify`, the stages that fit a sweep's runs, pool its seeds and
  build each knob's evidence;
- :mod:`.inference`: seed-level pooling over the sweep, contrasts with t intervals, BH;
- :mod:`.ceiling`, :mod:`.seeds`, :mod:`.collapse`: the shared R0, each seed's parameters, is a
  ceiling pinned, which seeds are judged;
- :mod:`.power`: the smallest detectable effect and the seeds that would decide a knob
  (:func:`seeds_to_decide`, the one number every message prints);
- :mod:`.explain`: every sentence a verdict carries, rendered from those values;
- :mod:`.next_steps`: what would decide the knobs that are not decided (seeds or compute);
- :mod:`.spending`: the look plan of stop-when-decided;
- :mod:`.types`: :class:`VerdictOptions`, :class:`Verdict`, :class:`SweepAnalysis`;
- :mod:`.service`: :func:`fit_sweep`, a stored sweep fitted and its verdicts written back.

Importing this package loads nothing: the names below come from their modules on first access.
"""

from typing import TYPE_CHECKING

from scalerl import lazy_getattr

if TYPE_CHECKING:
    from scalerl.harness.analysis.verdicts.next_steps import NextStep, what_decides
    from scalerl.harness.analysis.verdicts.pipeline import classify
    from scalerl.harness.analysis.verdicts.power import mde, seeds_needed, seeds_to_decide
    from scalerl.harness.analysis.verdicts.rule import (
        Claim,
        Evidence,
        Findings,
        Ruling,
        claims,
        decide,
        decided,
    )
    from scalerl.harness.analysis.verdicts.service import FitRequest, SweepFitResult, fit_sweep, save_fits
    from scalerl.harness.analysis.verdicts.spending import LookPlan
    from scalerl.harness.analysis.verdicts.types import SweepAnalysis, Verdict, VerdictOptions

__all__ = [
    "Claim",
    "Evidence",
    "Findings",
    "FitRequest",
    "LookPlan",
    "NextStep",
    "Ruling",
    "SweepAnalysis",
    "SweepFitResult",
    "Verdict",
    "VerdictOptions",
    "claims",
    "classify",
    "decide",
    "decided",
    "fit_sweep",
    "mde",
    "save_fits",
    "seeds_needed",
    "seeds_to_decide",
    "what_decides",
]

__getattr__ = lazy_getattr(
    "scalerl.harness.analysis.verdicts",
    {
        "Claim": "scalerl.harness.analysis.verdicts.rule",
        "Evidence": "scalerl.harness.analysis.verdicts.rule",
        "Findings": "scalerl.harness.analysis.verdicts.rule",
        "FitRequest": "scalerl.harness.analysis.verdicts.service",
        "LookPlan": "scalerl.harness.analysis.verdicts.spending",
        "NextStep": "scalerl.harness.analysis.verdicts.next_steps",
        "Ruling": "scalerl.harness.analysis.verdicts.rule",
        "SweepAnalysis": "scalerl.harness.analysis.verdicts.types",
        "SweepFitResult": "scalerl.harness.analysis.verdicts.service",
        "Verdict": "scalerl.harness.analysis.verdicts.types",
        "VerdictOptions": "scalerl.harness.analysis.verdicts.types",
        "classify": "scalerl.harness.analysis.verdicts.pipeline",
        "claims": "scalerl.harness.analysis.verdicts.rule",
        "decide": "scalerl.harness.analysis.verdicts.rule",
        "decided": "scalerl.harness.analysis.verdicts.rule",
        "fit_sweep": "scalerl.harness.analysis.verdicts.service",
        "mde": "scalerl.harness.analysis.verdicts.power",
        "save_fits": "scalerl.harness.analysis.verdicts.service",
        "seeds_needed": "scalerl.harness.analysis.verdicts.power",
        "seeds_to_decide": "scalerl.harness.analysis.verdicts.power",
        "what_decides": "scalerl.harness.analysis.verdicts.next_steps",
    },
)
