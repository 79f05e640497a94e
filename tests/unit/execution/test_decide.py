"""Stop when decided: the rule on verdicts, on synthetic sweeps, and the monitor's wiring."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from scalerl import db
from scalerl.db import RunRecord, queries
from scalerl.harness.analysis.fit.curve import sigmoid_curve
from scalerl.harness.analysis.groups import VariantCurves
from scalerl.harness.analysis.verdicts.explain import rule_text
from scalerl.harness.analysis.verdicts.inference import Contrast
from scalerl.harness.analysis.verdicts.pipeline import classify
from scalerl.harness.analysis.verdicts.rule import Claim, Evidence, decide, decided
from scalerl.harness.analysis.verdicts.spending import LookPlan
from scalerl.harness.analysis.verdicts.types import Verdict, VerdictOptions
from scalerl.harness.execution.decide import DecideMonitor, futility, looks_due, plan_stops
from tests.unit.analysis.sweeps import COMPUTE, synthetic_sweep

FAST = VerdictOptions(n_boot=100)
NAN = math.nan


EFF = math.log1p(0.1)  # the efficiency threshold: 10% of B, a factor 1.1 in C_mid
T20 = 2.085963  # t_{0.975} on 20 degrees of freedom


def _evidence(
    a: tuple[float, float],
    b: tuple[float, float] | None = (0.0, 0.02),
    c: tuple[float, float] | None = (0.0, 0.02),
    *,
    lower_bound: bool = False,
) -> Evidence:
    """(estimate, se) of dA, d log B and d log C_mid, each on 20 degrees of freedom."""

    def con(x: tuple[float, float] | None) -> Contrast | None:
        return None if x is None else Contrast(x[0], x[1], 20.0)

    a_con = con(a)
    assert a_con is not None
    return Evidence(a_con, con(b), con(c), 0.02, EFF, 0.95, lower_bound)


def _verdict(kind: str, evidence: Evidence | None = None, **kw: Any) -> Verdict:
    base: dict[str, Any] = dict(
        knob="loss", variant="loo-x", alternative="x", verdict=kind, a_base=0.7, a_variant=0.7,
        d_a=0.0, d_a_lo=-0.01, d_a_hi=0.01, b_base=1.5, b_variant=1.5, d_b=0.0, d_b_lo=-0.05,
        d_b_hi=0.05, margin=0.02, reason="", d_log_c_mid=0.0, d_log_c_mid_lo=-0.05, d_log_c_mid_hi=0.05,
        evidence=evidence,
    )  # fmt: skip
    return Verdict(**(base | kw))


def test_the_rule_asks_every_interval_of_the_claim_to_clear_its_threshold() -> None:
    # A mover is shown when dA's interval lies wholly beyond the margin (0.02), not merely beyond
    # zero: 0.1 +- 2.086 x 0.02 = [+0.058, +0.142] is; 0.05 +- 0.042 = [+0.008, +0.092] could still
    # end inside the margin with more compute.
    assert decide(_evidence((0.1, 0.02))).shown(Claim.MOVER)
    assert not decide(_evidence((0.05, 0.02))).shown(Claim.MOVER)
    assert decide(_evidence((-0.1, 0.02))).shown(Claim.MOVER)
    # A late-level mover has only a lower bound on dA: it can only rise.
    late = decide(_evidence((0.16, 0.005), None, None, lower_bound=True))
    assert late.shown(Claim.MOVER) and late.p[Claim.SHAPER] == late.p[Claim.NO_EFFECT] == 1.0
    assert not decide(_evidence((-0.16, 0.005), None, None, lower_bound=True)).shown(Claim.MOVER)
    # No effect = equivalence: every interval inside its threshold (dlogB and dlogC_mid at 97.5%:
    # 0 +- 2.42 x 0.02 inside +-0.0953).
    assert decide(_evidence((0.0, 0.004))).shown(Claim.NO_EFFECT)
    assert not decide(_evidence((0.0, 0.012))).shown(Claim.NO_EFFECT)  # dA could still be a mover
    assert not decide(_evidence((0.0, 0.004), b=(0.05, 0.03))).shown(Claim.NO_EFFECT)  # could be a shaper
    assert not decide(_evidence((0.0, 0.004), c=(-0.06, 0.03))).shown(Claim.NO_EFFECT)
    # A shaper: dlogB (or dlogC_mid) wholly beyond its threshold. The ceilings need not be shown
    # equal (issue 36): a dA interval that straddles the margin leaves the efficiency claim alone,
    # and with no dA at all (the baseline's ceiling not pinned) efficiency is still compared.
    assert decide(_evidence((0.0, 0.004), b=(0.5, 0.1))).shown(Claim.SHAPER)
    assert decide(_evidence((0.0, 0.004), c=(-0.8, 0.1))).shown(Claim.SHAPER)
    assert not decide(_evidence((0.0, 0.004), b=(0.2, 0.1))).shown(Claim.SHAPER)  # [-0.04, +0.44]
    assert decide(_evidence((0.0, 0.012), b=(0.5, 0.1))).shown(Claim.SHAPER)  # dA straddles
    no_a = replace(_evidence((0.0, 0.004), b=(0.5, 0.1)), a=None)
    assert decide(no_a).shown(Claim.SHAPER) and decide(no_a).p[Claim.NO_EFFECT] == 1.0
    # Without an efficiency comparison only the mover claim can be tested.
    no_eff = decide(_evidence((0.0, 0.004), None, None))
    assert no_eff.p[Claim.SHAPER] == no_eff.p[Claim.NO_EFFECT] == 1.0


def test_a_verdict_is_decided_when_its_claim_is_shown_by_its_own_evidence() -> None:
    mover = _evidence((0.1, 0.02))
    assert decided(_verdict("asymptote-mover", mover))
    # A claim its evidence does not show (a verdict made elsewhere) never stops a run.
    assert not decided(_verdict("asymptote-mover", _evidence((0.05, 0.02))))
    assert not decided(_verdict("no-effect", mover)) and not decided(_verdict("asymptote-mover"))
    for kind in ("undecided", "unfit", "unstable"):
        assert not decided(_verdict(kind, mover))
        assert rule_text(_verdict(kind)) == f"verdict {kind}"
    # The words are rendered from the same numbers: dA alone for a mover, every interval otherwise.
    assert rule_text(_verdict("asymptote-mover", mover)) == "dA [+0.058, +0.142] vs margin 0.020"
    text = rule_text(_verdict("undecided", _evidence((0.05, 0.02)), pending="seeds"))
    assert text == (
        "dA [+0.008, +0.092] vs margin 0.020; dlogB [-0.048, +0.048] vs 0.095; "
        "dlogC_mid [-0.048, +0.048] vs 0.095"
    )
    assert decide(_evidence((0.05, 0.02))).straddling() == ["dA"]


CUT = np.geomspace(200, 4_000, 50)  # a compute range that ends before C_mid=5,000: no inflection


def _late(name: str) -> VariantCurves:
    """Three seeds of the baseline's truth (A 0.70, C_mid 5,000) stopped before their inflection:
    nothing shown either way, ``undecided`` pending compute."""
    rng = np.random.default_rng(7)
    y = [sigmoid_curve(CUT, 0.2, 0.70, 1.5, 5_000.0) + rng.normal(0, 0.005, CUT.size) for _ in range(3)]
    return VariantCurves(
        name, tuple((CUT, v) for v in y), knob="pipeline", alternative=name,
        run_ids=tuple(f"{name}-s{s}" for s in range(3)),
    )  # fmt: skip


def _runs(*groups: VariantCurves, status: str = "running", points: int = 50) -> list[dict[str, Any]]:
    return [
        {"run_id": rid, "variant": g.variant, "knob": g.knob, "status": status, "n_points": points}
        for g in groups
        for rid in g.run_ids
    ]


def test_a_decided_variant_is_stopped_an_undecided_one_and_the_baseline_keep_running() -> None:
    sweep = synthetic_sweep(noise=0.005)
    base, mover, late = sweep["baseline"], sweep["loo-dapo"], _late("loo-late")
    verdicts = classify(base, [mover, late], verdict_options=FAST).verdicts
    assert [v.verdict for v in verdicts] == ["asymptote-mover", "undecided"]
    stops, why = plan_stops(_runs(base, mover, late), verdicts)
    # loo-dapo's ceiling drops by 0.08, its dA interval wholly below -margin: its 3 runs stop.
    assert sorted(s.run_id for s in stops) == ["loo-dapo-s0", "loo-dapo-s1", "loo-dapo-s2"]
    assert (
        why["loo-dapo"].startswith("decided: dA [-0.") and why["loo-late"] == "undecided: verdict undecided"
    )
    event = stops[0].detail
    assert event["verdict"] == "asymptote-mover" and event["d_a_hi"] < -event["margin"] < 0
    assert event["confidence"] == 0.95 and event["points"] == 9 * 50
    # Once the undecided variant is gone, every variant is decided: the baseline stops too.
    stops, _ = plan_stops(_runs(base, mover), verdicts[:1])
    assert sorted(s.run_id for s in stops) == [
        "baseline-s0", "baseline-s1", "baseline-s2", "loo-dapo-s0", "loo-dapo-s1", "loo-dapo-s2",
    ]  # fmt: skip
    assert {s.detail["verdict"] for s in stops if s.variant == "baseline"} == {"baseline"}


def test_a_variant_is_judged_only_when_every_seed_has_points() -> None:
    sweep = synthetic_sweep(noise=0.005)
    base, mover = sweep["baseline"], sweep["loo-dapo"]
    verdicts = classify(base, [mover], verdict_options=FAST).verdicts
    runs = _runs(base, mover)
    runs[-1] = runs[-1] | {"n_points": 0, "status": "submitted"}  # loo-dapo seed 2 not started
    stops, why = plan_stops(runs, verdicts)
    assert stops == [] and why == {"loo-dapo": "not every seed has points yet"}
    # Finished runs are never "stopped"; a variant with no verdict yet keeps the baseline running.
    done = _runs(base, mover, status="completed")
    assert plan_stops(done, verdicts)[0] == []
    stops, why = plan_stops(_runs(base, mover, _late("loo-new")), verdicts)
    assert {s.variant for s in stops} == {"loo-dapo"} and why["loo-new"] == "no verdict yet"


NOTE = "more compute cannot decide it; ~17 seeds per variant would decide it at this noise (now 3)"


def _futile(variant: str = "loo-x") -> Verdict:
    """Both ceilings measured, the intervals straddle: only seeds would decide it (17, as
    :func:`.power.seeds_to_decide` would have said; the verdict carries the number)."""
    ev = _evidence((0.01, 0.04 / T20))  # dA [-0.030, +0.050]
    return _verdict("undecided", ev, variant=variant, pending="seeds", seeds_needed=17, seeds_now=3)


def _plain_runs(*variants: tuple[str, str | None], status: str = "running") -> list[dict[str, Any]]:
    return [
        {"run_id": f"{v}-s{s}", "variant": v, "knob": k, "status": status, "n_points": 20}
        for v, k in variants
        for s in range(2)
    ]


def test_settled_also_stops_what_only_seeds_would_decide_and_then_the_baseline() -> None:
    futile, rising = _futile("loo-flat"), _verdict("undecided", variant="loo-rise", pending="compute")
    mover = _verdict("asymptote-mover", _evidence((-0.1, 0.05 / T20)), variant="loo-down")
    assert futility(futile) == NOTE
    # A ceiling not measured yet (pending compute), a decided or a blank verdict: never futile.
    assert futility(rising) is None and futility(mover) is None and futility(_verdict("unfit")) is None
    # No seed count would decide it: the words say so.
    assert futility(replace(futile, seeds_needed=None)) == (
        "more compute cannot decide it; an estimate sits on its threshold: no seed count decides it"
    )
    runs = _plain_runs(("baseline", None), ("loo-flat", "loss"), ("loo-down", "loss"))
    # stop_when=decided: the futile variant, and so the baseline, keep running.
    stops, why = plan_stops(runs, [futile, mover])
    assert {s.variant for s in stops} == {"loo-down"} and why["loo-flat"].startswith("undecided: dA [")
    # stop_when=settled: it stops, marked futile, with the seeds its reason asks for; every other
    # variant is now decided or futile, so the baseline stops too.
    stops, why = plan_stops(runs, [futile, mover], settle=True)
    assert why["loo-flat"] == f"futile: {futility(futile)}"
    by_run = {s.run_id: s.detail for s in stops}
    assert sorted(by_run) == [f"{v}-s{s}" for v in ("baseline", "loo-down", "loo-flat") for s in range(2)]
    event = by_run["loo-flat-s0"]
    assert (event["rule"], event["verdict"]) == ("futile", "undecided")
    assert event["note"].startswith("more compute cannot decide it; ~17 seeds per variant")
    assert event["intervals"].startswith("dA [-0.030, +0.050] vs margin 0.020")
    assert by_run["loo-down-s0"]["rule"].startswith("dA [-0.150, -0.050]")
    assert by_run["baseline-s0"]["rule"] == "every other variant is decided or futile"
    # A variant whose ceiling is still rising keeps itself and the baseline running.
    runs += _plain_runs(("loo-rise", "pipeline"))
    stops, why = plan_stops(runs, [futile, mover, rising], settle=True)
    assert {s.variant for s in stops} == {"loo-flat", "loo-down"}
    assert why["loo-rise"] == "undecided: verdict undecided"


def test_the_settled_monitor_stops_a_futile_variant_once_and_says_why(tmp_path: Path) -> None:
    store = _store_with_points(tmp_path, 3)  # 25% of the budget: the first look
    fits: list[float] = []
    flat = replace(_futile(), variant="loo-dapo")

    def fit(store: Any, sweep: str, level: float) -> list[Verdict]:
        fits.append(level)
        return [flat]

    stopped: list[tuple[list[str], str, dict[str, Any]]] = []

    said: list[str] = []
    mon = DecideMonitor(
        store, "sd", min_interval_s=0.0, fit=fit, stop=_recording_stop(stopped), say=said.append, settle=True
    )
    assert sorted(s.run_id for s in mon()) == ["b0", "m0"] and fits == [0.999]
    assert stopped[0][1] == "stopped-decided" and stopped[0][2]["m0"]["rule"] == "futile"
    assert stopped[0][2]["m0"]["look"] == 1
    note = NOTE
    assert said == [
        "stop-when-decided: a look at 99.9% for 1 variant(s): 0 decided, 1 futile",
        f"stopped-decided: loo-dapo run m0 (undecided: futile: {note})",
        "stopped-decided: baseline run b0 (baseline: every other variant is decided or futile)",
    ]
    assert mon.futile == {"loo-dapo": flat} and mon.frozen == {}
    status = set(queries.runs(store, "sd")["status"])
    assert status == {"stopped-decided"}
    # The same sweep under stop_when=decided: a look, nothing stopped.
    (tmp_path / "decided").mkdir()
    other = _store_with_points(tmp_path / "decided", 3)
    plain = DecideMonitor(
        other, "sd", min_interval_s=0.0, fit=fit, stop=_recording_stop(stopped), say=lambda _: None
    )
    assert plain() == [] and plain.futile == {} and len(fits) == 2


def _recording_stop(stopped: list[tuple[list[str], str, dict[str, Any]]]) -> Any:
    """A stand-in for ``cancel.stop_runs``: records each call and marks the runs finished."""

    def stop(store: Any, sweep: str, run_ids: list[str], *, status: str, details: Any) -> dict[str, str]:
        stopped.append((run_ids, status, details))
        for rid in run_ids:
            store.finish_run(rid, 1, status)
        return {rid: status for rid in run_ids}

    return stop


def _store_with_points(tmp_path: Path, n_points: int, budget: float | None = 8.0) -> Any:
    """A baseline run and a loo-dapo run, each with points at steps 0 .. n_points - 1 and (unless
    ``budget`` is None) a planned budget of ``budget`` steps in its config."""
    store = db.open_store(f"sqlite:///{tmp_path / 's.db'}")
    store.ensure_sweep("sd", {})
    config = {} if budget is None else {"budget": {"value": budget, "unit": "steps"}}
    records = [
        RunRecord(
            run_id=rid,
            sweep="sd",
            variant=v,
            knob=k,
            alternative=None,
            seed=0,
            config=config,
            config_hash=rid,
        )
        for rid, v, k in (("b0", "baseline", None), ("m0", "loo-dapo", "loss"))
    ]
    store.register_runs(records)
    for r in records:
        attempt = store.start_attempt(r.run_id, executor="debug", job_id="1")
        _add(store, r.run_id, range(n_points), attempt)
    return store


def _add(store: Any, run_id: str, steps: Any, attempt: int = 1) -> None:
    w = store.writer(run_id, attempt)
    for step in steps:
        w.add(step, {"val/pass_rate": 0.5}, {"flops": float(step + 1)})
    w.close()


def test_the_monitor_looks_at_the_first_planned_fraction_and_stops_what_is_decided(tmp_path: Path) -> None:
    store = _store_with_points(tmp_path, 3)  # step 2 of a budget of 8 steps: 25%, the first look
    levels: list[float] = []
    stopped: list[tuple[list[str], str, dict[str, Any]]] = []
    mover = _verdict("asymptote-mover", _evidence((-0.1, 0.05 / T20)))
    mover = replace(mover, variant="loo-dapo")

    def fit(store: Any, sweep: str, level: float) -> list[Verdict]:
        levels.append(level)
        return [mover]

    said: list[str] = []
    mon = DecideMonitor(
        store, "sd", min_interval_s=0.0, fit=fit, stop=_recording_stop(stopped), say=said.append
    )
    out = mon()
    # Both runs stop: loo-dapo is decided, so the baseline (the only other variant) is not needed.
    assert sorted(s.run_id for s in out) == ["b0", "m0"] and levels == [0.999]
    event = stopped[0][2]["m0"]
    assert stopped[0][1] == "stopped-decided" and event["verdict"] == "asymptote-mover"
    assert (event["confidence"], event["look"], event["fraction"], event["min_points"]) == (0.999, 1, 0.25, 3)
    assert said == [
        "stop-when-decided: a look at 99.9% for 1 variant(s): 1 decided",
        "stopped-decided: loo-dapo run m0 (asymptote-mover: dA [-0.150, -0.050] vs margin 0.020)",
        "stopped-decided: baseline run b0 (baseline: every other variant is decided)",
    ]
    status = dict(zip(queries.runs(store, "sd")["run_id"], queries.runs(store, "sd")["status"], strict=True))
    assert status == {"b0": "stopped-decided", "m0": "stopped-decided"}
    assert mon.frozen == {"loo-dapo": mover} and mon.looks == {"loo-dapo": 1}
    # Nothing running and no new points: no more fits.
    assert mon() == [] and levels == [0.999]


def test_the_monitor_fits_only_at_planned_looks_and_spends_each_once(tmp_path: Path) -> None:
    store = _store_with_points(tmp_path, 1, budget=20.0)  # step 0 of 20
    levels: list[float] = []
    undecided = replace(_verdict("undecided"), variant="loo-dapo")

    def fit(store: Any, sweep: str, level: float) -> list[Verdict]:
        levels.append(level)
        return [undecided]

    mon = DecideMonitor(store, "sd", min_interval_s=0.0, fit=fit, say=lambda _: None)
    looked = []
    for step in range(1, 21):  # both runs advance one step per tick
        _add(store, "b0", [step])
        _add(store, "m0", [step])
        n = len(levels)
        assert mon() == []
        if len(levels) > n:
            looked.append(step)
    # Looks at 25%, 50%, 75% of 20 steps, each once at 99.9%; none after the last planned one.
    assert looked == [5, 10, 15] and levels == [0.999] * 3 and mon.looks == {"loo-dapo": 3}
    assert mon.frozen == {}


def test_the_monitor_is_throttled(tmp_path: Path) -> None:
    store = _store_with_points(tmp_path, 3)
    fits: list[float] = []

    def fit(store: Any, sweep: str, level: float) -> list[Verdict]:
        fits.append(level)
        return []  # nothing decided

    mon = DecideMonitor(store, "sd", min_interval_s=3600.0, fit=fit, say=lambda _: None)
    assert mon() == [] and mon() == [] and len(fits) == 1  # same points: no second fit
    _add(store, "b0", [3, 4])
    _add(store, "m0", [3, 4])
    assert mon() == [] and len(fits) == 1  # the 50% look is due, but within min_interval_s


def test_the_slowest_run_sets_the_fraction_and_an_unknown_budget_falls_back_to_points() -> None:
    plan = LookPlan()
    runs: list[dict[str, Any]] = [
        {"run_id": "b0", "variant": "baseline", "knob": None, "status": "running", "n_points": 30},
        {"run_id": "b1", "variant": "baseline", "knob": None, "status": "running", "n_points": 30},
        {"run_id": "m0", "variant": "loo-m", "knob": "loss", "status": "running", "n_points": 30},
        {"run_id": "s0", "variant": "loo-s", "knob": "pipeline", "status": "submitted", "n_points": 0},
    ]
    reached = {"b0": 60.0, "b1": 55.0, "m0": 80.0, "s0": math.nan}
    progress: list[dict[str, Any]] = [
        {"run_id": k, "budget": 100.0, "unit": "steps", "reached": v} for k, v in reached.items()
    ]
    (due,) = looks_due(runs, progress, plan, {})
    # loo-m: its verdict rests on b0, b1 (55%) and m0 (80%): the slowest, 55%, has passed 2 looks.
    assert (due.variant, due.fraction, due.looks, due.points) == ("loo-m", 0.55, 2, 30)
    assert looks_due(runs, progress, plan, {"loo-m": 2}) == []  # taken: no look until 75%
    # A run that has ended no longer holds its variant back; an --extend to 200 halves a fraction.
    runs[1] = runs[1] | {"status": "failed"}
    assert looks_due(runs, progress, plan, {"loo-m": 1})[0].fraction == 0.6
    assert looks_due(runs, progress, plan, {}, extended={"m0": 200.0})[0].fraction == 0.4
    # Planned size unknown (no budget in the config): looks at 8, 16, 32 points, at most 3.
    blind = [p | {"budget": math.nan} for p in progress]
    assert [d.looks for d in looks_due(runs, blind, plan, {})] == [2]  # 30 points: 8 and 16
    assert looks_due([r | {"n_points": 7} for r in runs], blind, plan, {}) == []


def test_fit_says_what_would_decide_each_undecided_knob() -> None:
    from scalerl.harness.analysis.verdicts.next_steps import what_decides
    from scalerl.harness.analysis.verdicts.power import seeds_to_decide
    from scalerl.harness.analysis.verdicts.types import SweepAnalysis

    # dA 0.05 +- 2.086 x 0.025 straddles the margin 0.02: distance 0.03, and 80% power needs
    # 0.03 >= (2.086 + 0.842) x 0.025 x sqrt(3 / n), i.e. n >= 3 x 2.44^2 = 17.9 -> 18 seeds. The
    # verdict's reason, this advice and a futility stop all print that one number.
    ev = _evidence((0.05, 0.025), None, None)
    assert seeds_to_decide(ev, 3) == 18
    weak = _verdict("undecided", ev, pending="seeds", seeds_needed=18, seeds_now=3)
    analysis = SweepAnalysis({}, {}, NAN, 0.02, [weak], seeds=3)
    (step,) = what_decides(analysis, "baseline", {})
    assert step.seeds == 18 and math.isnan(step.compute)
    assert step.note == "~18 seeds per variant would decide it at this noise (now 3) (dA straddle)"
    assert futility(weak) == f"more compute cannot decide it; {step.note.split(' (dA')[0]}"
    # Undecided (a curve before its inflection): compute, read off the pooled fit.
    sweep = synthetic_sweep(noise=0.005)
    late = _late("loo-late")
    analysis = classify(sweep["baseline"], [late, sweep["loo-dapo"]], verdict_options=FAST)
    reached = {"baseline": float(COMPUTE[-1]), "loo-late": float(CUT[-1])}
    (step,) = what_decides(analysis, "baseline", reached)  # loo-dapo is decided: not listed
    assert step.variant == "loo-late" and step.seeds is None
    # Its fit (C_mid ~5,000, B ~1.5) reaches 75% of its gain at ~5,000 x 3^(1/1.5) = 10,400.
    assert 1.5 < step.factor < 6.0 and step.compute == pytest.approx(step.factor * CUT[-1])


def test_the_sweep_file_validates_stop_when_and_confidence() -> None:
    from scalerl.harness.errors import ConfigError
    from scalerl.harness.recipe import load_sweep
    from tests.unit.execution.helpers import REPO

    loo = REPO / "recipes" / "tiny-loo.yaml"
    fit = load_sweep(loo, ["fit.stop_when=decided", "fit.confidence=0.99"]).fit
    assert (fit.stop_when, fit.confidence) == ("decided", 0.99)
    assert load_sweep(loo).fit.stop_when == "never"
    assert load_sweep(loo, ["fit.stop_when=settled"]).fit.stop_when == "settled"
    with pytest.raises(
        ConfigError, match=r"fit.stop_when='always'.*fix: use one of: never, decided, settled"
    ):
        load_sweep(loo, ["fit.stop_when=always"])
    with pytest.raises(ConfigError, match=r"fit.confidence=1.5.*must be < 1.0"):
        load_sweep(loo, ["fit.confidence=1.5"])
