"""The range a metric can take, and clipping forecasts into it.

A pass rate cannot exceed 1, but a forecast's interval is ``value +- q * u`` (:mod:`.intervals`)
and knows nothing of that: near the ceiling it reaches past 1. Every interval-producing call
(:func:`.ensemble.with_interval` and the functions built on it) takes ``bounds=(lo, hi)`` and
clips the point forecast and both interval edges into it with :func:`clip_to_bounds`;
``bounds=None`` leaves every number exactly as it was.

Which metrics are bounded (:func:`resolve_bounds`, the rule the CLI, ``Sweep.forecast`` and the
report share), explicit rather than clever:

- ``(0, 1)`` when some ``/``-separated part of the name, lower-cased, is one of
  :data:`RATE_WORDS` (``pass_rate``, ``success_rate``, ``solve_rate``, ``accuracy``, ``acc``) or
  ``pass@N``, alone or after ``_``, ``-`` or ``.`` (``val/pass_rate``, ``eval/val_acc``,
  ``val-core/MATH500-Qwen-instruct/acc/mean@1``, ``test/pass@1``) *and* every observed value lies
  in [0, 1] (an accuracy logged in percent, 0-100, is left unbounded, with a note that says so);
- anything else (``train/reward``: the reference trainer adds a length adjustment that can make
  it negative; losses, lengths, verl's ``critic/score/mean``) is unbounded unless the user passes
  bounds (``scalerl forecast --bounds LO HI``); ``--no-bounds`` turns the rule off.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from scalerl.harness.analysis.fit.curve import FloatArray
from scalerl.harness.errors import ConfigError

Bounds = tuple[float, float]
UNIT: Bounds = (0.0, 1.0)
# Names of fractions of prompts / samples / tasks solved: in [0, 1] by construction.
RATE_WORDS = ("pass_rate", "success_rate", "solve_rate", "accuracy", "acc")
_RATE_PART = re.compile(r"(?:^|[_\-.])(?:" + "|".join(RATE_WORDS) + r"|pass@\d+)$")
BoundsSource = Literal["metric name", "given", "off", "none"]


def check_bounds(bounds: object, *, field: str = "bounds") -> Bounds | None:
    """``bounds`` as a float pair ``(lo, hi)`` with both finite and ``lo < hi``, or None; anything
    else raises ConfigError naming ``field`` (the CLI passes its flag's name)."""
    return None if bounds is None else _pair(bounds, field)


def _pair(bounds: object, field: str) -> Bounds:
    fix = "pass two finite numbers LO < HI, e.g. (0, 1) for a pass rate, or None for no bounds"
    try:
        if isinstance(bounds, str | bytes):  # "01" would unpack into two digits
            raise TypeError
        lo, hi = (float(b) for b in bounds)  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        raise ConfigError("must be a pair (lo, hi) of numbers", field=field, value=bounds, fix=fix) from None
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ConfigError("both bounds must be finite", field=field, value=(lo, hi), fix=fix)
    if not lo < hi:
        raise ConfigError("the lower bound must be below the upper", field=field, value=(lo, hi), fix=fix)
    return lo, hi


def clip_to_bounds(values: ArrayLike, bounds: Bounds | None) -> FloatArray:
    """``values`` clipped into ``bounds`` (NaN stays NaN); unchanged (as float64) for None.

    Clipping an interval to bounds the truth cannot leave never uncovers a truth inside them (the
    clipped interval is the old one intersected with the bounds), and can only cover more: an
    interval wholly past the bound shrinks onto it. A clipped point forecast is never further from
    a truth inside the bounds than the unclipped one. So clipping with correct bounds costs no
    coverage and no accuracy; it only removes values the metric cannot take. Callers validate
    ``bounds`` once (:func:`check_bounds`): this runs per forecast."""
    out = np.asarray(values, dtype=np.float64)
    if bounds is None:
        return out
    return np.asarray(np.clip(out, bounds[0], bounds[1]), dtype=np.float64)


def is_rate_name(metric: str) -> bool:
    """Whether ``metric``'s name says it is a rate in [0, 1] (the name part of the module's rule)."""
    return any(_RATE_PART.search(part) for part in metric.lower().split("/"))


@dataclass(frozen=True)
class MetricBounds:
    """The bounds a forecast of ``metric`` is clipped to (None: unbounded), where they came from
    (``source``: the metric's name, given by the user, turned ``off``, or ``none`` known) and a
    one-line ``note`` for the output."""

    metric: str
    bounds: Bounds | None
    source: BoundsSource
    note: str


def resolve_bounds(
    metric: str,
    values: ArrayLike | None = None,
    given: Bounds | Literal["auto"] | None = "auto",
    *,
    field: str = "bounds",
) -> MetricBounds:
    """The bounds for forecasts of ``metric``: ``given`` bounds (checked, :func:`check_bounds`
    with ``field``), None to turn clipping off, or ``"auto"``: the module's rule, with ``values``
    the metric's observed values (a rate whose values leave [0, 1] is not clipped)."""
    if given is None:
        return MetricBounds(metric, None, "off", "not clipped (bounds turned off)")
    v = np.asarray([] if values is None else values, dtype=np.float64).ravel()
    v = v[np.isfinite(v)]
    if not isinstance(given, str):
        b = _pair(given, field)
        note = f"clipped to [{b[0]:g}, {b[1]:g}] (given)"
        outside = int(((v < b[0]) | (v > b[1])).sum())
        if outside:
            # Not an error (the user may mean it), but a forecast pinned to a bound the data
            # already broke is worth a look.
            note += f"; {outside} observed value(s) lie outside them"
        return MetricBounds(metric, b, "given", note)
    if given != "auto":
        raise ConfigError(
            "unknown bounds", field=field, value=given, fix="pass (lo, hi), None (no bounds) or 'auto'"
        )
    if not is_rate_name(metric):
        return MetricBounds(metric, None, "none", "not clipped (no known bounds for this metric)")
    if v.size and (float(v.min()) < UNIT[0] or float(v.max()) > UNIT[1]):
        return MetricBounds(
            metric,
            None,
            "none",
            f"not clipped: the name says a rate in [0, 1] but values span [{v.min():.4g}, {v.max():.4g}]"
            " (pass the bounds, e.g. 0 100 for percent)",
        )
    return MetricBounds(metric, UNIT, "metric name", "clipped to [0, 1] (the metric is a rate)")
