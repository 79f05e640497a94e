"""A sweep's curves grouped by variant, as every analysis reads them.

:class:`VariantCurves` holds one variant's curves (one per seed, with their run ids and, where
known, each point's sample count); :func:`group_curves` builds them from the store's curves frame
(:func:`scalerl.db.queries.curves`), :func:`load_groups` from a store. :func:`fit_defaults` says
which metric and axis a sweep is fitted, reported and forecast on when the caller does not say.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from scalerl.harness.analysis.fit.fitters import Curve
from scalerl.harness.axes import FIT_AXES
from scalerl.harness.errors import AnalysisError

if TYPE_CHECKING:
    import pandas as pd

# What a sweep fits on when neither the caller nor its spec's ``fit`` section says: the reference
# trainer's validation metric on FLOPs. A recipe's sweep stores its ``fit`` section; an import
# stores the axis it filled and the metric it read (scalerl.harness.importers.ingest).
DEFAULT_METRIC = "val/pass_rate"

DEFAULT_AXIS = "flops"


def fit_defaults(spec: Mapping[str, Any] | None) -> tuple[str, str]:
    """(metric, axis) a sweep is fitted, reported and forecast on when not told: its spec's
    ``fit.metric`` / ``fit.axis``, else :data:`DEFAULT_METRIC` on :data:`DEFAULT_AXIS`."""
    fit_spec = dict((spec or {}).get("fit") or {})
    return str(fit_spec.get("metric") or DEFAULT_METRIC), str(fit_spec.get("axis") or DEFAULT_AXIS)


@dataclass(frozen=True)
class VariantCurves:
    """One variant's curves, one per seed (``run_ids`` in the same order)."""

    variant: str
    curves: tuple[Curve, ...]
    knob: str | None = None
    alternative: str | None = None
    run_ids: tuple[str, ...] = ()
    # Per curve: the Bernoulli sample count behind each point (aligned with its values; NaN where
    # unknown), or None / left out when the curve has none: its noise is then estimated.
    n: tuple[ArrayLike | None, ...] = ()
    # Per curve: its seed number. Variants run at the same seed numbers share each seed's effect,
    # which the verdicts take out (verdicts.inference.remove_seed_effects); empty: seeds unknown.
    seeds: tuple[int, ...] = ()

    def counts(self, i: int) -> ArrayLike | None:
        return self.n[i] if i < len(self.n) else None


def group_curves(frame: pd.DataFrame, axis: str) -> dict[str, VariantCurves]:
    """Variant name -> its seed curves on ``axis`` (compute, value), runs ordered by seed."""
    out: dict[str, VariantCurves] = {}
    for variant, vdf in frame.groupby("variant", sort=True, observed=True):
        curves: list[Curve] = []
        ids: list[str] = []
        seed_ids: list[int] = []
        counts: list[np.ndarray | None] = []
        for run_id, rdf in vdf.sort_values(["seed", "run_id"]).groupby("run_id", sort=False, observed=True):
            x = rdf[axis].to_numpy(dtype=np.float64)
            curves.append((x, rdf["value"].to_numpy(dtype=np.float64)))
            ids.append(str(run_id))
            seed = rdf["seed"].iloc[0] if "seed" in rdf else None
            if seed is not None and seed == seed:
                seed_ids.append(int(seed))
            # Sample counts behind each value (NaN where unknown; no column: a frame from before n).
            counts.append(rdf["n"].to_numpy(dtype=np.float64) if "n" in rdf else None)
        first = vdf.iloc[0]
        knob = None if first["knob"] is None or first["knob"] != first["knob"] else str(first["knob"])
        alt = first["alternative"]
        out[str(variant)] = VariantCurves(
            str(variant),
            tuple(curves),
            knob=knob,
            alternative=None if alt is None or alt != alt else str(alt),
            run_ids=tuple(ids),
            n=tuple(counts),
            # Seed numbers only when every run has one and no number repeats in the variant.
            seeds=tuple(seed_ids) if len(set(seed_ids)) == len(curves) else (),
        )
    return out


def load_groups(store: Any, sweep: str, metric: str, axis: str) -> dict[str, VariantCurves]:
    """Variant -> its seed curves of ``metric`` on ``axis`` from an open store (points without an
    ``axis`` value dropped); an empty sweep or an unfilled axis raises AnalysisError with a fix."""
    from scalerl import db

    frame = db.queries.curves(store, sweep, metric)
    if frame.empty:
        raise AnalysisError(f"sweep {sweep!r} has no points for metric {metric!r} (fix: pass --metric)")
    if frame[axis].isna().all():
        filled = [a for a in FIT_AXES if a in frame and frame[a].notna().any()]
        raise AnalysisError(
            f"no point has a {axis!r} value (fix: use --axis {' or '.join(filled) or 'step'})"
        )
    return group_curves(frame[frame[axis].notna()], axis)
