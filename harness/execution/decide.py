"""Stop when decided: stop a variant's runs once more compute cannot change its verdict.

With ``fit.stop_when: decided`` in the sweep file, ``scalerl sweep --wait`` calls a
:class:`DecideMonitor` on each progress tick. When new points have arrived (and at most every
``min_interval_s``), it fits the sweep exactly as ``scalerl fit`` does
(:func:`scalerl.harness.analysis.sweep.fit_sweep`, nothing written) and stops the running runs of every
decided variant through the executor, as ``scalerl cancel`` does: the job checkpoints at its next
step boundary and the run is marked ``stopped-decided``, with an event carrying the verdict.
``scalerl sweep --extend`` can take such a run further from its checkpoint.

The rule is :func:`scalerl.harness.analysis.decision.decided`: a verdict is decided when none of the
intervals it rests on (at ``fit.confidence``) straddles its threshold (the A margin, 10% of B,
a factor 1.1 in C_mid); ``undecided``, ``unfit`` and ``unstable`` never are.

A variant is judged only once every one of its runs (and every baseline run) has points, so the
verdict pools the same seeds the full sweep would. The baseline's runs keep running while any
other variant of the sweep is undecided (a variant with no verdict yet counts as undecided) and
are stopped once all are decided. Repeated looks at a growing curve make an early stop somewhat
likelier than ``1 - confidence`` suggests; raise ``fit.confidence`` (0.99) to be stricter.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from scalerl.harness.analysis.decision import decided
from scalerl.harness.analysis.verdicts import Verdict

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Stop:
    """One run to stop: why, in the event's words."""

    run_id: str
    variant: str
    detail: dict[str, Any]


def _clean(x: float) -> float | None:
    return float(x) if isinstance(x, int | float) and math.isfinite(x) else None


def _event(v: Verdict | None, why: str, confidence: float, points: int) -> dict[str, Any]:
    base: dict[str, Any] = {"rule": why, "confidence": confidence, "points": points}
    if v is None:
        return base | {"verdict": "baseline"}
    keys: tuple[str, ...] = ("d_a", "d_a_lo", "d_a_hi", "d_b", "d_b_lo", "d_b_hi", "margin")
    keys += ("d_log_c_mid_lo", "d_log_c_mid_hi")
    return base | {"verdict": v.verdict, "variant": v.variant} | {k: _clean(getattr(v, k)) for k in keys}


def plan_stops(
    runs: Sequence[dict[Any, Any]], verdicts: Sequence[Verdict], *, confidence: float = 0.95
) -> tuple[list[Stop], dict[str, str]]:
    """Which running runs to stop, from the store's runs (``queries.runs`` records: run_id,
    variant, knob, status, n_points) and the sweep's verdicts. Returns the stops and, per
    non-baseline variant, why it is (not) decided."""
    by_variant: dict[str, list[dict[Any, Any]]] = {}
    for r in runs:
        by_variant.setdefault(str(r["variant"]), []).append(r)
    baseline = {name for name, rs in by_variant.items() if all(_no_knob(r.get("knob")) for r in rs)}
    points = sum(int(r.get("n_points") or 0) for r in runs)
    all_started = {name: all(int(r.get("n_points") or 0) > 0 for r in rs) for name, rs in by_variant.items()}
    base_started = all(all_started[b] for b in baseline)
    verdict_of = {v.variant: v for v in verdicts}
    why: dict[str, str] = {}
    stops: list[Stop] = []
    for name, rs in by_variant.items():
        if name in baseline:
            continue
        v = verdict_of.get(name)
        if v is None or not (all_started[name] and base_started):
            why[name] = "not every seed has points yet" if v is not None else "no verdict yet"
            continue
        ok, rule = decided(v)
        why[name] = ("decided: " if ok else "undecided: ") + rule
        if ok:
            detail = _event(v, rule, confidence, points)
            stops += [Stop(str(r["run_id"]), name, detail) for r in rs if r["status"] == "running"]
    if why and all(w.startswith("decided") for w in why.values()):
        detail = _event(None, "every other variant is decided", confidence, points)
        stops += [
            Stop(str(r["run_id"]), name, detail)
            for name in baseline
            for r in by_variant[name]
            if r["status"] == "running"
        ]
    return stops, why


def _no_knob(knob: Any) -> bool:
    return knob is None or knob != knob  # None or NaN


def fit_verdicts(store: Any, sweep: str) -> list[Verdict]:
    """The sweep's verdicts as ``scalerl fit`` computes them (its defaults; nothing written)."""
    from scalerl.harness.analysis.sweep import fit_sweep

    result = fit_sweep(store, sweep, write=False)
    return list(result.analysis.verdicts) if result.analysis is not None else []


@dataclass
class DecideMonitor:
    """Called on each ``scalerl sweep --wait`` tick; fits and stops when something new arrived.

    Not thread-safe; one per process. Returns the runs it stopped on this call (usually none).
    """

    store: Any
    sweep: str
    confidence: float = 0.95
    min_interval_s: float = 15.0
    say: Callable[[str], object] = print
    stop: Callable[..., dict[str, str]] | None = None  # default: scalerl.harness.execution.cancel.stop_runs
    fit: Callable[[Any, str], Sequence[Verdict]] | None = None  # default: fit_verdicts
    _seen_points: int = -1
    _last: float = -math.inf
    stopped: list[Stop] = field(default_factory=list)

    def __call__(self) -> list[Stop]:
        from scalerl.db import queries

        runs: list[dict[Any, Any]] = queries.runs(self.store, self.sweep).to_dict("records")
        points = sum(int(r.get("n_points") or 0) for r in runs)
        if points == self._seen_points or time.monotonic() - self._last < self.min_interval_s:
            return []
        if not any(r["status"] == "running" for r in runs):
            return []
        self._seen_points, self._last = points, time.monotonic()
        from scalerl.harness.errors import HarnessError

        try:
            verdicts = (self.fit or fit_verdicts)(self.store, self.sweep)
        except HarnessError as err:  # e.g. no points for the metric yet
            log.info("stop-when-decided: no fit yet (%s)", err)
            return []
        except Exception:  # an optimisation failing must not end `--wait`: the runs go on
            log.exception("stop-when-decided: fitting sweep %s failed; runs keep running", self.sweep)
            return []
        stops, _ = plan_stops(runs, verdicts, confidence=self.confidence)
        if not stops:
            return []
        from scalerl.harness.execution.cancel import stop_runs

        done = (self.stop or stop_runs)(
            self.store,
            self.sweep,
            [s.run_id for s in stops],
            status="stopped-decided",
            details={s.run_id: s.detail for s in stops},
        )
        out = [s for s in stops if done.get(s.run_id) == "stopped-decided"]
        for s in out:
            verdict, rule = s.detail["verdict"], s.detail["rule"]
            self.say(f"stopped-decided: {s.variant} run {s.run_id} ({verdict}: {rule})")
        self.stopped += out
        return out
