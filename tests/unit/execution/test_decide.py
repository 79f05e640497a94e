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
from scalerl.harness.analysis.curve import sigmoid_curve
from scalerl.harness.analysis.decision import decided
from scalerl.harness.analysis.spending import LookPlan
from scalerl.harness.analysis.verdicts import VariantCurves, Verdict, VerdictOptions, classify
from scalerl.harness.execution.decide import DecideMonitor, futility, looks_due, plan_stops
from tests.unit.analysis.sweeps import COMPUTE, synthetic_sweep

FAST = VerdictOptions(n_boot=100)
NAN = math.nan


def _verdict(kind: str, **kw: Any) -> Verdict:
    base: dict[str, Any] = dict(
        knob="loss", variant="loo-x", alternative="x", verdict=kind, a_base=0.7, a_variant=0.7,
        d_a=0.0, d_a_lo=-0.01, d_a_hi=0.01, b_base=1.5, b_variant=1.5, d_b=0.0, d_b_lo=-0.05,
        d_b_hi=0.05, margin=0.02, reason="", d_log_c_mid=0.0, d_log_c_mid_lo=-0.05, d_log_c_mid_hi=0.05,
    )  # fmt: skip
    return Verdict(**(base | kw))


def test_the_rule_asks_every_interval_of_the_verdict_to_clear_its_threshold() -> None:
    # A mover is decided when dA's interval lies wholly beyond the margin (0.02), not merely
    # beyond zero: [+0.001, +0.2] could still end inside the margin with more compute.
    assert decided(_verdict("asymptote-mover", d_a=0.1, d_a_lo=0.03, d_a_hi=0.17))[0]
    assert not decided(_verdict("asymptote-mover", d_a=0.1, d_a_lo=0.001, d_a_hi=0.2))[0]
    assert decided(_verdict("asymptote-mover", d_a=-0.1, d_a_lo=-0.15, d_a_hi=-0.05))[0]
    # A late-level mover has only a lower bound on dA.
    assert decided(_verdict("asymptote-mover", d_a=0.16, d_a_lo=0.14, d_a_hi=NAN))[0]
    # No effect = equivalence: every interval inside its threshold (dB: 10% of B_base = 0.15).
    assert decided(_verdict("no-effect"))[0]
    assert not decided(_verdict("no-effect", d_a_lo=-0.03))[0]  # could still be a mover
    assert not decided(_verdict("no-effect", d_b_hi=0.2))[0]  # could still be a shaper
    assert not decided(_verdict("no-effect", d_log_c_mid_lo=-0.1))[0]  # log(1.1) = 0.0953
    # A shaper: dB (or dlogC_mid) wholly beyond its floor. The ceiling need not be shown equal
    # (issue 36): a dA interval that leaves the margin does not undo the efficiency claim.
    assert decided(_verdict("efficiency-shaper", d_b=1.0, d_b_lo=0.6, d_b_hi=1.4))[0]
    assert decided(_verdict("efficiency-shaper", d_log_c_mid_lo=-1.2, d_log_c_mid_hi=-0.5))[0]
    assert not decided(_verdict("efficiency-shaper", d_b=1.0, d_b_lo=0.1, d_b_hi=1.9))[0]
    assert decided(_verdict("efficiency-shaper", d_a_hi=0.04, d_b_lo=0.6, d_b_hi=1.4))[0]
    for kind in ("undecided", "unfit", "unstable"):
        ok, why = decided(_verdict(kind))
        assert not ok and why == f"verdict {kind}"


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


SEEDS_REASON = (
    "not decided: dA +0.010 [-0.030, +0.050] vs margin 0.020; the smallest |dA| this sweep detects "
    "with 80% power is 0.051; ~17 seeds per variant would decide dA at this noise (now 3)"
)


def _futile(variant: str = "loo-x") -> Verdict:
    """Both ceilings measured, the intervals straddle: only seeds would decide it."""
    interval = dict(d_a=0.01, d_a_lo=-0.03, d_a_hi=0.05)
    return _verdict("undecided", variant=variant, pending="seeds", reason=SEEDS_REASON, **interval)


def _plain_runs(*variants: tuple[str, str | None], status: str = "running") -> list[dict[str, Any]]:
    return [
        {"run_id": f"{v}-s{s}", "variant": v, "knob": k, "status": status, "n_points": 20}
        for v, k in variants
        for s in range(2)
    ]


def test_settled_also_stops_what_only_seeds_would_decide_and_then_the_baseline() -> None:
    futile, rising = _futile("loo-flat"), _verdict("undecided", variant="loo-rise", pending="compute")
    mover = _verdict("asymptote-mover", variant="loo-down", d_a=-0.1, d_a_lo=-0.15, d_a_hi=-0.05)
    assert futility(futile) == (
        "more compute cannot decide it; ~17 seeds per variant would decide dA at this noise (now 3)"
    )
    # A ceiling not measured yet (pending compute), a decided or a blank verdict: never futile.
    assert futility(rising) is None and futility(mover) is None and futility(_verdict("unfit")) is None
    # A reason that names no seed count still gets the words.
    assert futility(replace(futile, reason="")) == (
        "more compute cannot decide it; only more seeds would narrow its intervals"
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
    note = "more compute cannot decide it; ~17 seeds per variant would decide dA at this noise (now 3)"
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
    mover = _verdict("asymptote-mover", d_a=-0.1, d_a_lo=-0.15, d_a_hi=-0.05)
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
    from scalerl.harness.analysis.decision import what_decides
    from scalerl.harness.analysis.verdicts import SweepAnalysis

    # A mover whose dA interval [+0.001, +0.099] straddles the margin 0.02: se = 0.098 / 3.92 =
    # 0.025, distance 0.05 - 0.02 = 0.03, so 2.80 x se' <= 0.03 needs se' <= 0.0107, i.e.
    # 3 x (0.025 / 0.0107)^2 = 16.4 -> 17 seeds (80% power, 95% intervals).
    weak = _verdict("asymptote-mover", d_a=0.05, d_a_lo=0.001, d_a_hi=0.099)
    analysis = SweepAnalysis({}, {}, NAN, 0.02, [weak], seeds=3)
    (step,) = what_decides(analysis, "baseline", {})
    assert step.seeds == 17 and math.isnan(step.compute) and "(dA straddle)" in step.note
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
