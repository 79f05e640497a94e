"""Stopping that stays valid: what stop-when-decided saves, and what it costs, on known truth.

Issue 23, item 7. Simulated LOO sweeps (the designs of ``bench/verdict_sim.py``: a baseline and 16
knobs, 6 nulls, 6 movers, 4 shapers; the real-noise model of its ``fit_noise()``, fitted on the
real curves in ``../shared/data/real-rl-curves/``), at budgets where the baseline's true curve
plateaus inside the budget (99% and 99.9% of its gain made), with 3, 5 and 8 seeds. Each sweep is
judged three ways, from the same simulated points:

(a) full: every run to its budget, verdicts by ``classify`` at level 0.95;
(b) decided (``fit.stop_when: decided``), the look plan of
    :mod:`scalerl.harness.analysis.verdicts.spending` (``LookPlan()``): at each planned fraction f (25%,
    50%, 75% of the budget) every still-running run's points are truncated to compute <= f x
    budget and the still-open variants are classified at the interim level (99.9%); a variant
    whose verdict is decided (``rule.decided``) keeps it and stops there (its runs' compute:
    f x budget); the rest go on; at the end the remaining variants are classified on the full
    curves at ``final_level`` (95.3%). The baseline runs until the last variant stops. (The
    interim fits see only the open variants and the baseline; the monitor fits the whole sweep,
    whose pooled seed scatter and false-discovery step then count every variant.)
(c) settled (``fit.stop_when: settled``): as (b), and a variant that a look leaves ``undecided``
    with both ceilings measured (``decide.futility``: only seeds would decide it) also stops
    there, keeping that ``undecided`` verdict (a futility stop claims nothing).

Curves are built as ``scalerl fit`` builds them (``analysis.sweep.group_curves`` on the store's
curves frame, so each point carries its sample count n and binomial SEs are used), with the
simulated sweep's fit window (none since issue 36: the whole curve, as the demo) and margin (0.02).
Scoring is ``verdict_sim.score``: a null is right as ``no-effect``, a mover with |dA| > 0.02 as a
mover of the right sign, a shaper as a shaper; margin movers (|dA| = 0.02) are never scored. Per
cell and arm: compute used (and full / sequential), nulls called mover or shaper, decided verdicts
wrong, share with a decided verdict, the dA interval's coverage of the true dA (at the level the
verdict was taken); 95% intervals from resampling whole sweeps.

Run: ``.venv/bin/python -m bench.stop_sim [--sweeps 20] [--seed 0] [--boot 50] [--fractions
0.25,0.5,0.75]`` (``--sweeps`` per cell, 6 cells; ~3-4 s a sweep on the shared 2-core VM, so
~7 minutes by default); writes ``bench/.work/stop_sim/stop_sim.json`` (every knob's row in every
arm, the tables, timings).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import numpy as np

# A sibling bench script: its designs, noise model and scoring.
from bench import verdict_sim

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "bench" / ".work" / "stop_sim"
SEEDS = (3, 5, 8)
BUDGETS = (0.99, 0.999)
FULL_LEVEL = 0.95
ARMS = ("full", "decided", "settled")
SEQUENTIAL = ARMS[1:]
EFFECTS = ("asymptote-mover", "efficiency-shaper")


def _vopts(level: float, boot: int) -> Any:
    """VerdictOptions at ``level`` (only the fields this version has: the rule is being rewritten)."""
    from scalerl.harness.analysis.verdicts.types import VerdictOptions

    want: dict[str, Any] = {"level": level, "margin": verdict_sim.MARGIN, "n_boot": boot, "seed": 0}
    have = {f.name for f in fields(VerdictOptions)}
    return VerdictOptions(**{k: v for k, v in want.items() if k in have})


def _classify(groups: dict[str, Any], names: Sequence[str], level: float, boot: int, opts: Any) -> list[Any]:
    from scalerl.harness.analysis.sim.simulate import BASELINE
    from scalerl.harness.analysis.verdicts.pipeline import classify

    base = groups[BASELINE]
    analysis = classify(base, [groups[n] for n in names], options=opts, verdict_options=_vopts(level, boot))
    return list(analysis.verdicts)


def judge(sim: Any, boot: int, timing: dict[str, float], plan: Any) -> dict[str, Any]:
    """Every arm on one simulated sweep: verdict rows per arm, each variant's stop fraction per
    sequential arm, the futile variants, and the compute each arm used (in run-budgets)."""
    from scalerl.harness.analysis.fit.curve import FitOptions
    from scalerl.harness.analysis.groups import group_curves

    design, points = sim.design, sim.points
    axis, metric = design.axis, design.metric
    opts = FitOptions(window_fraction=design.window_fraction)
    names = [v.name for v in design.variants]
    full_groups = group_curves(points, axis)
    t = time.perf_counter()
    full = {v.variant: v.row(metric, axis) for v in _classify(full_groups, names, FULL_LEVEL, boot, opts)}
    timing["full"] += time.perf_counter() - t
    runs = design.seeds
    out: dict[str, Any] = {
        "full": full,
        # Compute in units of one run's budget: seeds x (variants + baseline) runs.
        "compute_full": float(runs * (len(names) + 1)),
    }
    # The two sequential arms see the same looks until a futility stop makes their open sets
    # differ: a fit is shared while (fraction, open variants) is the same.
    cache: dict[tuple[float, tuple[str, ...]], list[Any]] = {}
    for arm in SEQUENTIAL:
        t = time.perf_counter()
        rows, stop_at, futile = _sequential(sim, names, plan, boot, opts, cache, settle=arm == "settled")
        timing[arm] += time.perf_counter() - t
        base_stop = max(stop_at.values())  # the baseline runs until the last variant stops
        out[arm] = rows
        out[f"stop_at_{arm}"] = stop_at
        out[f"futile_{arm}"] = futile
        out[f"baseline_stop_{arm}"] = base_stop
        out[f"compute_{arm}"] = float(runs * (sum(stop_at.values()) + base_stop))
    return out


def _sequential(
    sim: Any,
    names: Sequence[str],
    plan: Any,
    boot: int,
    opts: Any,
    cache: dict[tuple[float, tuple[str, ...]], list[Any]],
    *,
    settle: bool,
) -> tuple[dict[str, dict[str, Any]], dict[str, float], set[str]]:
    """One sequential arm: the verdict rows, each variant's stop fraction (1.0: ran to the end)
    and the variants stopped as futile (``settle`` only)."""
    from scalerl.harness.analysis.groups import group_curves
    from scalerl.harness.analysis.verdicts.rule import decided
    from scalerl.harness.analysis.verdicts.spending import final_level
    from scalerl.harness.execution.decide import futility

    design, points = sim.design, sim.points
    axis, metric = design.axis, design.metric
    rows: dict[str, dict[str, Any]] = {}
    stop_at: dict[str, float] = {}
    futile: set[str] = set()
    open_ = list(names)
    for f in plan.fractions:
        if not open_:
            break
        key = (f, tuple(open_))
        if key not in cache:
            cut = points[points[axis] <= f * design.budget * (1 + 1e-9)]
            cache[key] = _classify(group_curves(cut, axis), open_, plan.interim_level, boot, opts)
        for v in cache[key]:
            if decided(v):
                rows[v.variant], stop_at[v.variant] = v.row(metric, axis), f
            elif settle and futility(v) is not None:
                rows[v.variant], stop_at[v.variant] = v.row(metric, axis), f
                futile.add(v.variant)
        open_ = [n for n in open_ if n not in stop_at]
    if open_:
        key = (1.0, tuple(open_))
        if key not in cache:
            cache[key] = _classify(group_curves(points, axis), open_, final_level(plan), boot, opts)
        for v in cache[key]:
            rows[v.variant], stop_at[v.variant] = v.row(metric, axis), 1.0
    return rows, stop_at, futile


# Per-knob ratios (numerator, denominator) per arm, summed per sweep, resampled over sweeps.
RATIOS: dict[str, Callable[[dict[str, Any]], tuple[bool, bool]]] = {
    "nulls called mover or shaper": lambda r: (
        r["kind"] == "null" and r["verdict"] in EFFECTS,
        r["kind"] == "null",
    ),
    "decided verdicts wrong": lambda r: (r["right"] is False, r["right"] is not None),
    "share decided": lambda r: (r["verdict"] in verdict_sim.DECIDED, True),
    "dA coverage": lambda r: (bool(r["covered"]), r["covered"] is not None),
}


def _boot(num: np.ndarray, den: np.ndarray, rng: np.random.Generator, reps: int) -> dict[str, float]:
    """sum(num) / sum(den) and its 95% interval from resampling sweeps (the rows of num, den)."""
    if not den.sum():
        return {"value": float("nan"), "lo": float("nan"), "hi": float("nan")}
    picks = rng.integers(0, len(num), (reps, len(num)))
    boot = num[picks].sum(axis=1) / np.maximum(den[picks].sum(axis=1), 1e-300)
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return {"value": float(num.sum() / den.sum()), "lo": float(lo), "hi": float(hi)}


def summarize(
    rows: Sequence[dict[str, Any]], sweeps: Sequence[dict[str, Any]], reps: int = 2000
) -> dict[str, Any]:
    """One cell (or all): per arm, each ratio with its interval; per sequential arm, compute
    arm / full and full / arm, the share of knobs stopped at each look and the share futile."""
    rng = np.random.default_rng(0)
    names = [s["sweep"] for s in sweeps]
    index = {n: i for i, n in enumerate(names)}
    out: dict[str, Any] = {"sweeps": len(names), "knobs": sum(r["arm"] == "full" for r in rows)}
    for arm in ARMS:
        for label, fn in RATIOS.items():
            num, den = np.zeros(len(names)), np.zeros(len(names))
            for r in rows:
                if r["arm"] == arm:
                    a, b = fn(r)
                    num[index[r["sweep"]]] += bool(a) and bool(b)
                    den[index[r["sweep"]]] += bool(b)
            out[f"{arm}: {label}"] = _boot(num, den, rng, reps)
    full = np.array([s["compute_full"] for s in sweeps])
    for arm in SEQUENTIAL:
        seq = np.array([s[f"compute_{arm}"] for s in sweeps])
        out[f"{arm}: compute / full"] = _boot(seq, full, rng, reps)
        out[f"{arm}: full / compute"] = _boot(full, seq, rng, reps)
        mine = [r for r in rows if r["arm"] == arm]
        stops = [r["stop_at"] for r in mine]
        scored = [r for r in mine if r["right"] is not None]
        out[f"{arm}: wrong / scored, by look"] = {
            f"{f:g}": f"{sum(r['right'] is False for r in at)}/{len(at)}"
            for f in sorted({r["stop_at"] for r in scored})
            for at in [[r for r in scored if r["stop_at"] == f]]
        }
        out[f"{arm}: stopped at"] = {
            f"{f:g}": sum(s == f for s in stops) / max(len(stops), 1) for f in sorted(set(stops))
        }
        out[f"{arm}: futile"] = sum(bool(r.get("futile")) for r in mine) / max(len(mine), 1)
        out[f"{arm}: baseline stopped at"] = {
            f"{f:g}": sum(s[f"baseline_stop_{arm}"] == f for s in sweeps) / max(len(sweeps), 1)
            for f in sorted({s[f"baseline_stop_{arm}"] for s in sweeps})
        }
    return out


def _fmt(c: dict[str, float], pct: bool = True) -> str:
    if c["value"] != c["value"]:
        return "-"
    k, unit = (100.0, "%") if pct else (1.0, "")
    return f"{k * c['value']:.1f}{unit} [{k * c['lo']:.1f}, {k * c['hi']:.1f}]"


def _cell(c: dict[str, Any]) -> list[str]:
    b = c["budget_fraction"]
    return [str(c["seeds"]), b if isinstance(b, str) else f"{b:.1%}", str(c["sweeps"])]


def table(cells: Sequence[dict[str, Any]], fractions: Sequence[float]) -> str:
    """Two markdown tables: compute per sequential arm, then the error rates per arm."""
    looks = [*fractions, 1.0]
    at = "/".join(f"{100 * f:g}" for f in looks)
    head = (
        "| seeds | budget (share of gain) | sweeps | decided: compute / full | full / decided | "
        f"settled: compute / full | full / settled | knobs stopped at {at}%: decided | settled | "
        f"settled: futile | baseline stopped at {at}%: decided | settled |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|"
    )
    lines = [head]
    for c in cells:
        cols = _cell(c)
        for arm in SEQUENTIAL:
            cols += [_fmt(c[f"{arm}: compute / full"]), _fmt(c[f"{arm}: full / compute"], pct=False)]
        for key in ("stopped at", "baseline stopped at"):
            for arm in SEQUENTIAL:
                cols.append("/".join(f"{100 * c[f'{arm}: {key}'].get(f'{f:g}', 0.0):.0f}" for f in looks))
            if key == "stopped at":
                cols.append(f"{100 * c['settled: futile']:.0f}%")
        lines.append("| " + " | ".join(cols) + " |")
    lines.append("")
    arms = " | ".join(ARMS)
    head = "| seeds | budget (share of gain) | " + " | ".join(f"{label}: {arms}" for label in RATIOS) + " |"
    lines += [head, "|---|---|" + "---|" * (len(RATIOS) * len(ARMS))]
    for c in cells:
        cols = _cell(c)[:2] + [_fmt(c[f"{arm}: {label}"]) for label in RATIOS for arm in ARMS]
        lines.append("| " + " | ".join(cols) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--sweeps", type=int, default=20, help="simulated sweeps per cell (default 20; 6 cells)")
    ap.add_argument("--seed", type=int, default=0, help="simulation seed (default 0)")
    ap.add_argument("--boot", type=int, default=50, help="bootstrap replicates per classify (default 50)")
    ap.add_argument(
        "--fractions",
        default="0.25,0.5,0.75",
        help="planned interim looks, fractions of the budget (default 0.25,0.5,0.75: LookPlan's)",
    )
    ap.add_argument("--out", type=Path, default=WORK, help=f"work folder (default {WORK})")
    args = ap.parse_args(argv)
    from scalerl.harness.analysis.sim.simulate import simulate_sweep
    from scalerl.harness.analysis.verdicts.spending import LookPlan, final_level

    plan = LookPlan(level=FULL_LEVEL, fractions=tuple(float(f) for f in args.fractions.split(",")))
    t0 = time.perf_counter()
    _, noise = verdict_sim.fit_noise()
    t_noise = time.perf_counter() - t0
    print(f"noise fitted in {t_noise:.1f} s: {noise}", flush=True)
    rng = np.random.default_rng(args.seed)
    rows: list[dict[str, Any]] = []
    sweeps: list[dict[str, Any]] = []
    timing = {"simulate": 0.0, **{arm: 0.0 for arm in ARMS}}
    for i in range(args.sweeps):
        for s in SEEDS:
            for b in BUDGETS:
                name = f"s{s}-b{round(1000 * b)}-{i}"
                t = time.perf_counter()
                sim = simulate_sweep(verdict_sim.design_for(rng, s, b, name), noise, rng)
                timing["simulate"] += time.perf_counter() - t
                got = judge(sim, args.boot, timing, plan)
                cell = {"seeds": s, "budget_fraction": b, "sweep": name}
                for arm in ARMS:
                    scored = verdict_sim.score(sim, list(got[arm].values()), cell)
                    stop_at, futile = got.get(f"stop_at_{arm}", {}), got.get(f"futile_{arm}", set())
                    rows += [
                        r
                        | {
                            "arm": arm,
                            "stop_at": stop_at.get(r["variant"], 1.0),
                            "futile": r["variant"] in futile,
                        }
                        for r in scored
                    ]
                keep = ["compute_full"] + [
                    f"{k}_{arm}" for arm in SEQUENTIAL for k in ("compute", "baseline_stop")
                ]
                sweeps.append(cell | {k: got[k] for k in keep})
        print(
            f"  round {i + 1}/{args.sweeps}: {len(sweeps)} sweeps, {time.perf_counter() - t0:.0f} s",
            flush=True,
        )
    wall = time.perf_counter() - t0
    cells = []
    for s in SEEDS:
        for b in BUDGETS:
            pick = [w for w in sweeps if w["seeds"] == s and w["budget_fraction"] == b]
            names = {w["sweep"] for w in pick}
            cells.append(
                summarize([r for r in rows if r["sweep"] in names], pick) | {"seeds": s, "budget_fraction": b}
            )
    cells.append(summarize(rows, sweeps) | {"seeds": "all", "budget_fraction": "all"})
    text = table(cells, plan.fractions)
    took = ", ".join(f"{k} {v:.0f} s" for k, v in timing.items())
    print(
        f"\n{len(sweeps)} sweeps ({len(rows) // len(ARMS)} knobs), {wall:.0f} s "
        f"(noise fit {t_noise:.0f} s, {took})"
    )
    print(
        f"look plan: interim looks at {', '.join(f'{f:.0%}' for f in plan.fractions)} of the budget at "
        f"{plan.interim_level:.1%}, final at {final_level(plan):.1%}; full arm at {FULL_LEVEL:.0%}\n"
    )
    print(text)
    report = {
        "command": "python -m bench.stop_sim " + " ".join(argv if argv is not None else sys.argv[1:]),
        "sweeps": len(sweeps),
        "knobs": len(rows) // len(ARMS),
        "wall_s": round(wall, 1),
        "timing_s": {k: round(v, 1) for k, v in timing.items()} | {"noise_fit": round(t_noise, 1)},
        "noise_model": asdict(noise),
        "plan": asdict(plan) | {"final_level": final_level(plan)},
        "cells": cells,
        "table": text,
        "sweep_rows": sweeps,
        "rows": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out / "stop_sim.json"
    out.write_text(json.dumps(verdict_sim._finite(report), indent=1, default=verdict_sim._json_default))
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
