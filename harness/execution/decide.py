"""Stop when decided: stop a variant's runs once more compute cannot change its verdict.

With ``fit.stop_when: decided`` in the sweep file, ``scalerl sweep --wait`` calls a
:class:`DecideMonitor` on each progress tick. It looks at the sweep only at the interim looks of a
:class:`~scalerl.harness.analysis.verdicts.spending.LookPlan` (default: at 25%, 50% and 75% of the runs'
planned compute, each at 99.9%): when a variant's runs (and the baseline's) cross a planned
fraction, it fits the sweep exactly as ``scalerl fit`` does at that interim level
(:func:`scalerl.harness.analysis.verdicts.service.fit_sweep`, nothing written) and stops the running runs of
every variant that the look decides, through the executor, as ``scalerl cancel`` does: the job
checkpoints at its next step boundary and the run is marked ``stopped-decided``, with an event
carrying the verdict, the look and its level. ``scalerl sweep --extend`` can take such a run
further from its checkpoint.

The rule is the verdicts' own, :func:`scalerl.harness.analysis.verdicts.rule.decided`: a verdict
is decided when it claims and the rule, run again on the evidence it carries, shows the claim
(none of the intervals it rests on straddles its threshold: the A margin, 10% of B, a factor 1.1
in C_mid); ``undecided``, ``unfit`` and ``unstable`` never are. A variant decided at a look keeps
that verdict (it is not looked at again).

When to look, per variant: its fraction is the smallest ``reached / budget`` over the runs its
verdict rests on (its own and the baseline's) that have not ended, from each run's stored
config (``budget``, raised by the latest ``--extend``) and the compute its points have reached
(:func:`scalerl.db.queries.progress`); it is looked at when that fraction passes a planned look
it has not had (a look jumped over is skipped, never made up). Where a run's planned size is
unknown (no budget in its config, no point on the budget's unit), the looks go by point count
instead (:func:`~scalerl.harness.analysis.verdicts.spending.looks_by_points`), at most as many.

The guarantee: every variant gets at most ``k`` interim looks at ``1 - alpha_i`` each, and its
final verdict (``scalerl fit`` on the full curves) belongs at
:func:`~scalerl.harness.analysis.verdicts.spending.final_level` = ``1 - (alpha - k alpha_i)``, so by the
union bound its chance of a wrong verdict, stopped early or not, is at most ``alpha = 1 -
fit.confidence`` (given intervals with their nominal coverage). Looking at every new point at
``fit.confidence``, as this monitor did before, gave no such bound.

A variant is judged only once every one of its runs (and every baseline run) has points, so the
verdict pools the same seeds the full sweep would. The baseline's runs keep running while any
other variant of the sweep is undecided (a variant with no verdict yet counts as undecided) and
are stopped once all are decided.

``fit.stop_when: settled`` also stops a variant that more compute cannot decide: at a look, its
verdict is ``undecided`` with ``pending == "seeds"`` (both ceilings are measured, its curves and
the baseline's have plateaued, and only more seeds would narrow the intervals). Its runs are
marked ``stopped-decided`` too (no new status, so ``--extend`` and the skip rules treat them alike),
with an event whose ``rule`` is ``futile`` and whose ``note`` says "more compute cannot decide it;
~N seeds per variant would ..." (N the verdict's ``seeds_needed``, the number its reason prints).
The baseline stops once every other variant is decided or futile. A futility stop spends no
alpha: it claims nothing (the look's verdict is ``undecided``, and the variant is not looked at
again), so it can turn a verdict the full sweep would have decided into ``undecided`` but never
adds a chance of a wrong one; the look plan's bound above is unchanged. What it costs is power: a
variant whose intervals more compute would still have narrowed (each seed's A tightens as its
plateau is sampled longer) ends undecided, and seeds, not compute, are what would decide it.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from scalerl.harness.analysis.verdicts.explain import rule_text, seeds_phrase
from scalerl.harness.analysis.verdicts.power import DEFAULT_POWER
from scalerl.harness.analysis.verdicts.rule import decided
from scalerl.harness.analysis.verdicts.spending import LookPlan, looks_by_points, looks_reached
from scalerl.harness.analysis.verdicts.types import Verdict

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


FUTILE = "futile"


def futility(v: Verdict) -> str | None:
    """Why more compute cannot decide ``v`` (None: it can, or ``v`` is decided): its verdict is
    ``undecided`` with both ceilings measured (``pending == "seeds"``), so only seeds would narrow
    its intervals. The words name the seeds the verdict asks for (its ``seeds_needed``)."""
    if v.verdict != "undecided" or v.pending != "seeds":
        return None
    return f"more compute cannot decide it; {seeds_phrase(v.seeds_needed, v.seeds_now, DEFAULT_POWER)}"


def plan_stops(
    runs: Sequence[dict[Any, Any]],
    verdicts: Sequence[Verdict],
    *,
    confidence: float = 0.95,
    settle: bool = False,
) -> tuple[list[Stop], dict[str, str]]:
    """Which running runs to stop, from the store's runs (``queries.runs`` records: run_id,
    variant, knob, status, n_points) and the sweep's verdicts. Returns the stops and, per
    non-baseline variant, why it is (not) decided: ``"decided: ..."``, ``"undecided: ..."`` or,
    with ``settle`` (``stop_when: settled``), ``"futile: ..."`` for a variant only seeds would
    decide (:func:`futility`), whose running runs stop too. The baseline stops once every other
    variant is decided (or futile)."""
    by_variant: dict[str, list[dict[Any, Any]]] = {}
    for r in runs:
        by_variant.setdefault(str(r["variant"]), []).append(r)
    baseline = {name for name, rs in by_variant.items() if all(_no_knob(r.get("knob")) for r in rs)}
    points = sum(int(r.get("n_points") or 0) for r in runs)
    all_started = {name: all(int(r.get("n_points") or 0) > 0 for r in rs) for name, rs in by_variant.items()}
    base_started = all(all_started[b] for b in baseline)
    verdict_of = {v.variant: v for v in verdicts}
    why: dict[str, str] = {}
    settled: dict[str, bool] = {}  # decided (or, with settle, futile): the baseline need not wait for it
    stops: list[Stop] = []
    for name, rs in by_variant.items():
        if name in baseline:
            continue
        v = verdict_of.get(name)
        settled[name] = False
        if v is None or not (all_started[name] and base_started):
            why[name] = "not every seed has points yet" if v is not None else "no verdict yet"
            continue
        ok, rule = decided(v), rule_text(v)
        why[name] = ("decided: " if ok else "undecided: ") + rule
        note = futility(v) if settle and not ok else None
        if note is not None:
            why[name] = f"{FUTILE}: {note}"
        settled[name] = ok or note is not None
        if ok or note is not None:
            detail = _event(v, rule, confidence, points)
            if note is not None:
                detail |= {"rule": FUTILE, "note": note, "intervals": rule}
            stops += [Stop(str(r["run_id"]), name, detail) for r in rs if r["status"] == "running"]
    if settled and all(settled.values()):
        rule = "every other variant is decided" + (" or futile" if settle else "")
        detail = _event(None, rule, confidence, points)
        stops += [
            Stop(str(r["run_id"]), name, detail)
            for name in baseline
            for r in by_variant[name]
            if r["status"] == "running"
        ]
    return stops, why


def _no_knob(knob: Any) -> bool:
    return knob is None or knob != knob  # None or NaN


def fit_verdicts(store: Any, sweep: str, level: float | None = None) -> list[Verdict]:
    """The sweep's verdicts as ``scalerl fit`` computes them (its defaults; nothing written), with
    intervals at ``level`` (None: the sweep's ``fit.confidence``)."""
    from scalerl.harness.analysis.verdicts.service import FitRequest, fit_sweep

    result = fit_sweep(store, sweep, FitRequest(confidence=level), write=False)
    return list(result.analysis.verdicts) if result.analysis is not None else []


@dataclass(frozen=True)
class Due:
    """A variant whose next planned look has come: how far it is (``fraction``, NaN when its
    planned size is unknown), the fewest points of its runs and how many looks it has reached."""

    variant: str
    fraction: float
    points: int
    looks: int


def looks_due(
    runs: Sequence[dict[Any, Any]],
    progress: Sequence[dict[Any, Any]],
    plan: LookPlan,
    taken: dict[str, int],
    *,
    extended: dict[str, float] | None = None,
) -> list[Due]:
    """The non-baseline variants whose next look has come, from the store's runs (``queries.runs``
    records), their progress (``queries.progress`` records; ``extended``: run_id -> a budget raised
    by ``--extend``) and the looks each variant has had (``taken``). A variant's fraction is the
    smallest ``reached / budget`` over the runs its verdict rests on (its own and the baseline's)
    that have not ended; with any of those unknown, the looks go by points
    (:func:`~scalerl.harness.analysis.verdicts.spending.looks_by_points`). A variant whose runs and the
    baseline's have all ended is not looked at (its verdict is the final fit's)."""
    from scalerl.db.records import ENDED_STATUSES

    ext = extended or {}
    frac: dict[str, float] = {}
    for p in progress:
        rid = str(p["run_id"])
        budget = ext.get(rid, _num(p.get("budget")))
        reached = _num(p.get("reached"))
        frac[rid] = reached / budget if budget > 0 and math.isfinite(reached) else math.nan
    by_variant: dict[str, list[dict[Any, Any]]] = {}
    for r in runs:
        by_variant.setdefault(str(r["variant"]), []).append(r)
    baseline = [r for rs in by_variant.values() if all(_no_knob(x.get("knob")) for x in rs) for r in rs]
    out: list[Due] = []
    for name, rs in by_variant.items():
        if all(_no_knob(r.get("knob")) for r in rs):
            continue
        members = rs + baseline
        live = [r for r in members if str(r["status"]) not in ENDED_STATUSES]
        if not live:
            continue
        points = min(int(r.get("n_points") or 0) for r in members)
        fractions = [frac.get(str(r["run_id"]), math.nan) for r in live]
        if all(math.isfinite(f) for f in fractions):
            fraction = min(fractions)
            looks = looks_reached(plan, fraction) if points > 0 else 0
        else:
            fraction, looks = math.nan, looks_by_points(plan, points)
        if looks > taken.get(name, 0):
            out.append(Due(name, fraction, points, looks))
    return out


def _num(x: Any) -> float:
    return float(x) if isinstance(x, int | float) else math.nan


@dataclass
class DecideMonitor:
    """Called on each ``scalerl sweep --wait`` tick; at a planned look, fits and stops what the
    look decides (see the module docstring).

    ``plan`` defaults to ``LookPlan(level=confidence)``. ``fit(store, sweep, level)`` returns the
    sweep's verdicts with intervals at ``level`` (default :func:`fit_verdicts`). Not thread-safe;
    one per process. Returns the runs it stopped on this call (usually none). ``looks``: per
    variant, the planned looks it has had; ``frozen``: the verdicts that decided a variant.
    With ``settle`` (``stop_when: settled``) it also stops the variants more compute cannot decide
    (:func:`futility`), keeping their look's verdict in ``futile``; neither is looked at again.
    """

    store: Any
    sweep: str
    confidence: float = 0.95
    min_interval_s: float = 15.0
    say: Callable[[str], object] = print
    stop: Callable[..., dict[str, str]] | None = None  # default: scalerl.harness.execution.cancel.stop_runs
    fit: Callable[[Any, str, float], Sequence[Verdict]] | None = None  # default: fit_verdicts
    plan: LookPlan | None = None
    settle: bool = False
    _seen_points: int = -1
    _last: float = -math.inf
    looks: dict[str, int] = field(default_factory=dict)
    frozen: dict[str, Verdict] = field(default_factory=dict)
    futile: dict[str, Verdict] = field(default_factory=dict)
    stopped: list[Stop] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.plan is None:
            self.plan = LookPlan(level=self.confidence)

    def __call__(self) -> list[Stop]:
        from scalerl.db import queries
        from scalerl.harness.execution.extend import extensions

        assert self.plan is not None
        runs: list[dict[Any, Any]] = queries.runs(self.store, self.sweep).to_dict("records")
        points = sum(int(r.get("n_points") or 0) for r in runs)
        if points == self._seen_points or time.monotonic() - self._last < self.min_interval_s:
            return []
        if not any(r["status"] == "running" for r in runs):
            return []
        self._seen_points, self._last = points, time.monotonic()
        progress = queries.progress(self.store, self.sweep).to_dict("records")
        due = looks_due(runs, progress, self.plan, self.looks, extended=extensions(self.store, self.sweep))
        due = [d for d in due if d.variant not in self.frozen and d.variant not in self.futile]
        if not due:
            return []
        level = self.plan.interim_level
        from scalerl.harness.errors import HarnessError

        try:
            verdicts = (self.fit or fit_verdicts)(self.store, self.sweep, level)
        except HarnessError as err:  # e.g. no points for the metric yet: no look taken
            log.info("stop-when-decided: no fit yet (%s)", err)
            return []
        except Exception:  # an optimisation failing must not end `--wait`: the runs go on
            log.exception("stop-when-decided: fitting sweep %s failed; runs keep running", self.sweep)
            return []
        now = {d.variant: d for d in due}
        for d in due:
            self.looks[d.variant] = d.looks
        looked = [v for v in verdicts if v.variant in now and v.variant not in self.frozen]
        settled = [*self.frozen.values(), *self.futile.values()]
        stops, _ = plan_stops(runs, [*settled, *looked], confidence=level, settle=self.settle)
        # A looked-at variant has points in all its runs and the baseline's (looks_due), so what
        # plan_stops said of it is the rule's word on its verdict: decided, or (settle) futile.
        for v in looked:
            if decided(v):
                self.frozen[v.variant] = v
            elif self.settle and futility(v) is not None:
                self.futile[v.variant] = v
        decided_now = sum(v.variant in self.frozen for v in looked)
        futile_now = f", {sum(v.variant in self.futile for v in looked)} futile" if self.settle else ""
        self.say(
            f"stop-when-decided: a look at {level:.1%} for {len(due)} variant(s): {decided_now} decided"
            + futile_now
        )
        if not stops:
            return []
        from scalerl.harness.execution.cancel import stop_runs

        stops = [replace(s, detail=s.detail | _look(now.get(s.variant))) for s in stops]
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
            if rule == FUTILE:
                rule = f"{FUTILE}: {s.detail['note']}"
            self.say(f"stopped-decided: {s.variant} run {s.run_id} ({verdict}: {rule})")
        self.stopped += out
        return out


def _look(d: Due | None) -> dict[str, Any]:
    if d is None:  # the baseline: stopped because every other variant is decided
        return {}
    return {"look": d.looks, "fraction": _clean(d.fraction), "min_points": d.points}
