"""Verdicts against known truth: simulated LOO sweeps through the store and ``scalerl fit``.

Issue 23, items 5 and 6: the instrument that scores a verdict rule. Steps:

1. The noise model is fitted on the real curves (:mod:`bench.data`: the product's importers on
   /work/shared/data/real-rl-curves), per source
   (:func:`bench.noise_fit.estimate_noise`). The bench's model: binomial noise at
   the demo's n = 640 (recorded with every point, as the trainer logs it); the AR(1) wander of the
   W&B GSM8K validation curves (the one source with a clear one: 17 curves of ~650 evaluations),
   carried to the simulated schedule (an evaluation every 10 steps, as the demo) with its
   correlation length in steps; the seed spread of the 7 verl-fork replicates; the late dips of all
   sources' curves pooled.
2. Cells: 3, 5, 8 seeds x budgets at which the baseline's true curve has made 60%, 90%, 99% of its
   gain. Each sweep has a baseline (R0 ~ U(0.2, 0.35), A ~ U(0.6, 0.8), B ~ U(1, 2.5), C_mid
   1,000 GPU-hours; 30 evaluations after step 0, fitted whole (``--window`` drops a share of each
   curve's compute, as a lab's fit window would) with margin 0.02) and 16
   knobs: 6 nulls, movers at dA -0.10, -0.05, -0.02, +0.02, +0.05, +0.10, shapers at B x 1/1.5 and
   x 1.5, C_mid x 0.5 and x 2.
3. Each sweep is written into one SQLite store through ``store.writer`` (``simulate.write_sweep``)
   and fitted by ``fit_sweep`` + ``save_fits``, the two calls ``scalerl fit`` makes (defaults:
   method fast, 200 bootstrap replicates, bootstrap seed 0). The first sweep is also fitted by the
   CLI itself (``python -m scalerl.harness fit SWEEP --json --no-save``) and its verdicts must equal
   the in-process ones.
4. Scoring: a null is right as ``no-effect``, a mover with |dA| > 0.02 as ``asymptote-mover`` of the
   right sign, a shaper as ``efficiency-shaper``; ``undecided``, ``unstable`` and ``unfit`` are not
   decided. Movers at |dA| = 0.02 sit on the margin: reported (share called mover), never scored
   right or wrong. dA coverage: the true dA inside the verdict's 95% interval (a one-sided
   ``dA >= lo`` where the rule gives only a lower bound), over the knobs that have one.

Run: ``.venv/bin/python -m bench.verdict_sim [--knobs 2000]`` (~12 minutes for the default 2,016
knobs on the shared 2-core VM); prints markdown tables (with 95% intervals from resampling whole
sweeps) and writes ``bench/.work/verdict_sim/verdict_sim.json`` (every knob's row, the tables, the
noise fits, timings). ``--noise binomial`` keeps only the binomial points and the seed spread;
``--retabulate JSON`` prints an earlier run's tables. Results: bench/README.md, "Verdicts against
known truth (simulator)".
"""

from __future__ import annotations

import argparse
import json
import math
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "bench" / ".work" / "verdict_sim"
SEEDS = (3, 5, 8)
BUDGETS = (0.6, 0.9, 0.99)
MOVERS = (-0.10, -0.05, -0.02, 0.02, 0.05, 0.10)
NULLS = 6
B_FACTORS = (1 / 1.5, 1.5)
C_MID_FACTORS = (0.5, 2.0)
KNOBS_PER_SWEEP = NULLS + len(MOVERS) + len(B_FACTORS) + len(C_MID_FACTORS)
POINTS = 30
STEPS_PER_EVAL = 10
N_SAMPLES = 640
MARGIN = 0.02
# The sweeps' fit window (share of compute dropped from each curve's start): the demo fits the
# whole curve (R0 from its step-0 evaluation); --window 0.1 checks a lab's window.
WINDOW: float | None = None
# The real curves the noise is fitted on (--data; None: bench/data.py's REAL, $SCALERL_REAL_CURVES).
DATA: Path | None = None
DECIDED = ("asymptote-mover", "efficiency-shaper", "no-effect")


# ----------------------------------------------------------------------------- noise from real curves
def source_curves() -> dict[str, tuple[list[tuple[Any, Any]], list[float], list[list[int]], str]]:
    """Source -> (curves on the step axis, n per curve, replicate groups, what was read)."""
    from bench import data

    root = DATA if DATA is not None else data.REAL
    out: dict[str, tuple[list[tuple[Any, Any]], list[float], list[list[int]], str]] = {}
    seen: dict[str, Any] = {}
    for _, c in data.read(data.WANDB, root=root):  # runs repeat across files: keep each run's longest curve
        if c.run not in seen or len(c) > len(seen[c.run]):
            seen[c.run] = c
    wb = list(seen.values())
    out["wandb-export-deep-grpo"] = (
        [(c.steps.astype(float), c.values) for c in wb],
        [1319.0] * len(wb),
        [],
        "GSM8K val mean@1 (n=1319), 17 runs, every 5 steps",
    )
    tb = [c for _, c in data.read(data.TENSORBOARD, data.TB_VAL, root=root)]
    names = [c.run for c in tb]
    pairs = [["q3b_fsdp_base", "q3b_mcore_base"], ["q3b_fsdp_off_ppl", "q3b_mcore_off_ppl"]]
    out["tensorboard-verl-async"] = (
        [(c.steps.astype(float), c.values) for c in tb],
        [1319.0] * len(tb),
        [[names.index(a) for a in p] for p in pairs if all(a in names for a in p)],
        "GSM8K val mean@1 (n=1319), 11 runs, every 5 steps; FSDP/Megatron pairs as replicates",
    )
    vf = [c for _, c in data.read(data.VERL, data.VERL_REWARD, root=root)]
    out["verl-fork-parsed"] = (
        [(c.steps.astype(float), c.values) for c in vf],
        [128.0] * len(vf),
        [list(range(len(vf)))],
        "train batch reward (multiples of 1/128), 7 replicate runs, every step",
    )
    sp: list[Any] = []
    ns: list[float] = []
    wanted = {
        "val-core/MATH500-Qwen-instruct/acc/mean@1": 500.0,
        "val-core/math_dapo-Qwen-instruct/acc/mean@1": 1000.0,
    }
    # In the order of the files' path strings (the noise model's fits were made so; data.files
    # sorts by path parts, which puts "run" before "run+20").
    for _, c in sorted(data.read(data.SPEEDRL, data.SPEED_VAL, root=root), key=lambda fc: str(fc[0])):
        if c.metric in wanted:
            sp.append(c)
            ns.append(wanted[c.metric])
    out["speedrl-dapo-json"] = (
        [(c.steps.astype(float), c.values) for c in sp],
        ns,
        [],
        "MATH500 (n=500) and DAPO-Math 1k (n=1000) val mean@1, 20 runs, every 25 steps",
    )
    return out


def fit_noise() -> tuple[dict[str, Any], Any]:
    """Per-source estimates (as dicts) and the bench's NoiseModel (module docstring)."""
    from bench.noise_fit import estimate_noise
    from scalerl.harness.analysis.sim.simulate import NoiseModel

    est = {}
    info = {}
    for name, (curves, ns, reps, what) in source_curves().items():
        est[name] = estimate_noise(curves, ns, replicates=reps)
        info[name] = what
    dips = sum(e.dip_rate * e.curves for e in est.values())
    total = sum(e.curves for e in est.values())
    depths = [e.dip_depth * e.dip_rate * e.curves for e in est.values() if e.dip_rate > 0]
    wandb, verl = est["wandb-export-deep-grpo"], est["verl-fork-parsed"]
    model = NoiseModel(
        n=N_SAMPLES,
        sigma_extra=round(wandb.sigma_extra, 4),
        ar1=round(wandb.ar1_every(STEPS_PER_EVAL), 3),
        seed_sd_a=round(verl.seed_sd_a, 4),
        dip_prob=round(dips / total, 4),
        dip_depth=round(sum(depths) / dips, 4) if dips else 0.06,
    )
    rows = {
        name: asdict(e)
        | {"dispersion": e.dispersion, f"ar1_at_{POINTS}_points": e.ar1_at(POINTS)}
        | {f"ar1_every_{STEPS_PER_EVAL}_steps": e.ar1_every(STEPS_PER_EVAL), "read": info[name]}
        for name, e in est.items()
    }
    return rows, model


# ----------------------------------------------------------------------------- sweeps
def design_for(rng: np.random.Generator, seeds: int, fraction: float, name: str) -> Any:
    from scalerl.harness.analysis.sim.simulate import CurveTruth, SweepDesign, loo_variants

    base = CurveTruth(
        r0=float(rng.uniform(0.2, 0.35)),
        a=float(rng.uniform(0.6, 0.8)),
        b=float(rng.uniform(1.0, 2.5)),
        c_mid=1000.0,
    )
    knobs = loo_variants(base, nulls=NULLS, d_a=MOVERS, b_factors=B_FACTORS, c_mid_factors=C_MID_FACTORS)
    return SweepDesign(
        base,
        knobs,
        seeds=seeds,
        budget=base.compute_at(fraction),
        points=POINTS,
        steps_per_point=STEPS_PER_EVAL,
        name=name,
        margin=MARGIN,
        window_fraction=WINDOW,
    )


def expected(kind: str, d_a: float) -> str | None:
    """The right verdict for a knob's truth; None on the margin (never scored)."""
    if kind == "null":
        return "no-effect"
    if kind == "mover":
        if abs(abs(d_a) - MARGIN) < 1e-9:
            return None
        # Under a wider --margin a shift inside it is, by definition, no practical effect.
        return "asymptote-mover" if abs(d_a) > MARGIN else "no-effect"
    return "efficiency-shaper"


def score(sim: Any, rows: Sequence[dict[str, Any]], cell: dict[str, Any]) -> list[dict[str, Any]]:
    """One scored row per knob: the truth, the verdict and its numbers, right / wrong / covered,
    and for a collapse call (``unstable``, or ``unfit`` through the baseline) whether the run it
    names had a simulated dip."""
    by_variant = {str(r["variant"]): r for r in rows}
    dipped = {str(r["run_id"]): bool(r["dip_depth"] > 0) for r in sim.runs.to_dict("records")}
    truth = sim.truth
    out = []
    for t in truth.to_dict("records"):
        if t["kind"] == "baseline":
            continue
        r = by_variant[str(t["variant"])]
        verdict = str(r["verdict"])
        want = expected(str(t["kind"]), float(t["d_a"]))
        lo, hi = _f(r["d_a_lo"]), _f(r["d_a_hi"])
        d_a = _f(r["d_a"])
        right: bool | None = None
        if want is not None and verdict in DECIDED:
            right = verdict == want and (
                want != "asymptote-mover" or (math.isfinite(d_a) and d_a * t["d_a"] > 0)
            )
        named = re.search(r"collapsed: (\S+) ", str(r["reason"]))
        dip = dipped.get(named.group(1)) if named else None
        covered = None
        if math.isfinite(lo):
            covered = bool(lo <= t["d_a"] <= (hi if math.isfinite(hi) else math.inf))
        out.append(
            cell
            | {"variant": t["variant"], "kind": t["kind"], "effect": t["effect"], "true_d_a": t["d_a"]}
            | {"verdict": verdict, "d_a": d_a, "d_a_lo": lo, "d_a_hi": hi, "margin": _f(r["margin"])}
            | {"p_ceiling": _f(r.get("p_ceiling")), "p_efficiency": _f(r.get("p_efficiency"))}
            | {
                "right": right,
                "covered": covered,
                "collapse_run_dipped": dip,
                "reason": str(r["reason"])[:240],
            }
        )
    return out


def _f(v: Any) -> float:
    return float(v) if v is not None and isinstance(v, (int, float)) and math.isfinite(v) else math.nan


def cli_check(url: str, sweep: str, rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """``scalerl fit SWEEP --json --no-save`` in a subprocess: are its verdicts the in-process ones?"""
    cmd = [sys.executable, "-m", "scalerl.harness", "fit", sweep, "--json", "--no-save", "--db", url]
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=ROOT)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        return {"ok": False, "error": proc.stderr[-2000:], "wall_s": wall}
    # `scalerl fit --json` prints one object; its verdicts are the store's rows.
    cli = {str(r["variant"]): (r["verdict"], r["d_a"]) for r in json.loads(proc.stdout)["verdicts"]}
    mine = {str(r["variant"]): (r["verdict"], _f(r["d_a"])) for r in rows}
    same = all(
        cli[v][0] == mine[v][0]
        and ((cli[v][1] is None and not math.isfinite(mine[v][1])) or cli[v][1] == mine[v][1])
        for v in mine
    )
    return {"ok": same and set(cli) == set(mine), "variants": len(mine), "wall_s": round(wall, 2)}


# ----------------------------------------------------------------------------- tables
def _pct(num: int, den: int) -> str:
    return f"{100.0 * num / den:.1f}%" if den else "-"


def cell_table(rows: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], str]:
    """Per (seeds, budget): the confusion numbers (JSON rows, markdown)."""
    head = (
        "| seeds | budget (share of gain) | knobs | nulls called mover | nulls called shaper | "
        "nulls mover or shaper | decided verdicts wrong | dA 95% CI holds truth | undecided | "
        "unstable / unfit | power: mover 0.05 | power: mover 0.10 | power: shaper |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    )
    lines = [head]
    out = []
    for s in SEEDS:
        for b in BUDGETS:
            cell = [r for r in rows if r["seeds"] == s and r["budget_fraction"] == b]
            if not cell:
                continue
            row = summarize(cell) | {"seeds": s, "budget_fraction": b}
            out.append(row)
            lines.append(_cell_line(str(s), f"{b:.0%}", row))
    total = summarize(rows)
    lines.append(_cell_line("all", "all", total))
    out.append(total | {"seeds": "all", "budget_fraction": "all"})
    return out, "\n".join(lines)


CELL_KEYS = (
    "knobs", "null_mover", "null_shaper", "null_decided_effect", "wrong", "coverage", "undecided",
    "unstable", "power_mover_0.05", "power_mover_0.1", "power_shaper",
)  # fmt: skip


def _cell_line(seeds: str, budget: str, row: dict[str, Any]) -> str:
    return f"| {seeds} | {budget} | " + " | ".join(str(row[k]) for k in CELL_KEYS) + " |"


def summarize(cell: Sequence[dict[str, Any]]) -> dict[str, Any]:
    nulls = [r for r in cell if r["kind"] == "null"]
    scored = [r for r in cell if r["right"] is not None]
    intervals = [r for r in cell if r["covered"] is not None]

    def power(pick: Sequence[dict[str, Any]]) -> str:
        return _pct(sum(r["right"] is True for r in pick), len(pick))

    def movers(size: float) -> list[dict[str, Any]]:
        return [r for r in cell if r["kind"] == "mover" and abs(abs(r["true_d_a"]) - size) < 1e-9]

    return {
        "knobs": len(cell),
        "null_mover": _pct(sum(r["verdict"] == "asymptote-mover" for r in nulls), len(nulls)),
        "null_shaper": _pct(sum(r["verdict"] == "efficiency-shaper" for r in nulls), len(nulls)),
        "null_decided_effect": _pct(
            sum(r["verdict"] in ("asymptote-mover", "efficiency-shaper") for r in nulls), len(nulls)
        ),
        "wrong": _pct(sum(r["right"] is False for r in scored), len(scored)),
        "coverage": f"{_pct(sum(bool(r['covered']) for r in intervals), len(intervals))} ({len(intervals)})",
        "undecided": _pct(sum(r["verdict"] == "undecided" for r in cell), len(cell)),
        "unstable": _pct(sum(r["verdict"] in ("unstable", "unfit") for r in cell), len(cell)),
        "power_mover_0.05": power(movers(0.05)),
        "power_mover_0.1": power(movers(0.10)),
        "power_shaper": power([r for r in cell if r["kind"].startswith("shaper")]),
    }


def power_table(rows: Sequence[dict[str, Any]]) -> str:
    """Share decided correctly, per truth and seeds (columns: budgets); the margin movers' row is
    the share called mover."""
    effects: list[tuple[str, Any]] = [
        ("null (no-effect)", lambda r: r["kind"] == "null"),
        (
            "mover |dA| 0.02 (on the margin: share called mover)",
            lambda r: r["kind"] == "mover" and abs(abs(r["true_d_a"]) - 0.02) < 1e-9,
        ),
        ("mover |dA| 0.05", lambda r: r["kind"] == "mover" and abs(abs(r["true_d_a"]) - 0.05) < 1e-9),
        ("mover |dA| 0.10", lambda r: r["kind"] == "mover" and abs(abs(r["true_d_a"]) - 0.10) < 1e-9),
        ("shaper B x1.5 or /1.5", lambda r: r["kind"] == "shaper-b"),
        ("shaper C_mid x2 or /2", lambda r: r["kind"] == "shaper-c-mid"),
    ]
    head = "| truth | seeds | " + " | ".join(f"budget {b:.0%}" for b in BUDGETS) + " |"
    lines = [head, "|---|---|" + "---|" * len(BUDGETS)]
    for label, pick in effects:
        for s in SEEDS:
            cells = []
            for b in BUDGETS:
                sel = [r for r in rows if pick(r) and r["seeds"] == s and r["budget_fraction"] == b]
                if "margin" in label:
                    cells.append(_pct(sum(r["verdict"] == "asymptote-mover" for r in sel), len(sel)))
                else:
                    cells.append(_pct(sum(r["right"] is True for r in sel), len(sel)))
            lines.append(f"| {label} | {s} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def confusion(rows: Sequence[dict[str, Any]]) -> str:
    """Truth kind x verdict, all cells pooled (counts)."""
    verdicts = ("asymptote-mover", "efficiency-shaper", "no-effect", "undecided", "unstable", "unfit")
    kinds = ("null", "mover", "shaper-b", "shaper-c-mid")
    lines = ["| truth \\ verdict | " + " | ".join(verdicts) + " |", "|---|" + "---|" * len(verdicts)]
    for k in kinds:
        sel = [r for r in rows if r["kind"] == k]
        lines.append(
            f"| {k} ({len(sel)}) | "
            + " | ".join(str(sum(r["verdict"] == v for r in sel)) for v in verdicts)
            + " |"
        )
    return "\n".join(lines)


def calibration(rows: Sequence[dict[str, Any]]) -> str:
    """The verdicts' claim probabilities against the truth: among knobs whose P is in a bin, the
    share for which the claim is true (the ceiling moves: |true dA| > margin; efficiency
    differs: a shaper)."""
    bins = [(0.0, 0.5), (0.5, 0.8), (0.8, 0.9), (0.9, 0.95), (0.95, 0.99), (0.99, 1.01), (0.9, 1.01)]
    names = [f"P in [{a:g}, {min(b, 1.0):g}{']' if b > 1 else ')'}" for a, b in bins[:-1]] + ["P >= 0.9"]
    lines = ["| claim | " + " | ".join(names) + " |", "|---|" + "---|" * len(bins)]
    claims = (
        ("the ceiling moves", "p_ceiling", lambda r: abs(r["true_d_a"]) > MARGIN + 1e-9),
        ("efficiency differs", "p_efficiency", lambda r: str(r["kind"]).startswith("shaper")),
    )
    for label, col, truth in claims:
        cells = []
        for a, b in bins:
            sel = [r for r in rows if math.isfinite(_f(r.get(col))) and a <= r[col] < b]
            cells.append(f"{_pct(sum(bool(truth(r)) for r in sel), len(sel))} ({len(sel)})")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


# Ratios whose uncertainty the sweep bootstrap states: (numerator, denominator) per knob row.
RATIOS: dict[str, Any] = {
    "nulls called mover or shaper": lambda r: (
        r["kind"] == "null" and r["verdict"] in ("asymptote-mover", "efficiency-shaper"),
        r["kind"] == "null",
    ),
    "decided verdicts wrong": lambda r: (r["right"] is False, r["right"] is not None),
    "dA 95% CI holds truth": lambda r: (bool(r["covered"]), r["covered"] is not None),
    "undecided": lambda r: (r["verdict"] == "undecided", True),
    "unstable / unfit": lambda r: (r["verdict"] in ("unstable", "unfit"), True),
}


def ci_table(rows: Sequence[dict[str, Any]], reps: int = 2000, seed: int = 0, by_cell: bool = False) -> str:
    """Each headline ratio with a 95% interval from resampling whole sweeps (a sweep's 16 knobs
    share a baseline and a margin, so they are not independent draws), per seed count (budgets
    pooled) and overall; ``by_cell``: per seeds x budget cell as well (item 6 holds per cell)."""
    rng = np.random.default_rng(seed)
    groups: list[tuple[str, str, Any]] = [(str(s), "all", lambda r, s=s: r["seeds"] == s) for s in SEEDS]
    if by_cell:
        groups = [
            (str(s), f"{b:.0%}", lambda r, s=s, b=b: r["seeds"] == s and r["budget_fraction"] == b)
            for s in SEEDS
            for b in BUDGETS
        ] + [(str(s), "all", lambda r, s=s: r["seeds"] == s) for s in SEEDS]
    groups.append(("all", "all", lambda r: True))
    head = "| seeds | budget | sweeps | " + " | ".join(RATIOS) + " |"
    lines = [head, "|---|---|---|" + "---|" * len(RATIOS)]
    for label, budget, pick in groups:
        sel = [r for r in rows if pick(r)]
        names = sorted({r["sweep"] for r in sel})
        index = {n: i for i, n in enumerate(names)}
        cells = []
        for fn in RATIOS.values():
            num = np.zeros(len(names))
            den = np.zeros(len(names))
            for r in sel:
                a, b = fn(r)
                num[index[r["sweep"]]] += bool(a) and bool(b)
                den[index[r["sweep"]]] += bool(b)
            if not den.sum():
                cells.append("-")
                continue
            picks = rng.integers(0, len(names), (reps, len(names)))
            boot = num[picks].sum(axis=1) / np.maximum(den[picks].sum(axis=1), 1)
            lo, hi = np.percentile(boot, [2.5, 97.5])
            cells.append(
                f"{100 * num.sum() / den.sum():.1f}% [{100 * lo:.1f}, {100 * hi:.1f}] ({int(den.sum())})"
            )
        lines.append(f"| {label} | {budget} | {len(names)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def pooled_rows(paths: Sequence[Path]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every knob row of several runs' verdict_sim.json (independent draws: other ``--seed``s),
    each sweep renamed ``<file #>/<sweep>`` so that sweeps of different draws stay apart when
    whole sweeps are resampled; and the first run's noise sources."""
    rows: list[dict[str, Any]] = []
    sources: dict[str, Any] = {}
    for i, path in enumerate(paths):
        old = json.loads(path.read_text())
        sources = sources or old["noise_sources"]
        rows += [r | {"sweep": f"{i}/{r['sweep']}"} for r in old["rows"]] if len(paths) > 1 else old["rows"]
    return rows, sources


def noise_table(sources: dict[str, Any]) -> str:
    lines = [
        "| source | curves | evals/run | steps/eval | resid sd | white sd | binomial SE | resid lag-1 | "
        f"AR(1) sd | AR(1) lag-1 per eval | at {POINTS} evals/run | at {STEPS_PER_EVAL} steps/eval | "
        "seed sd of late level (raw) | late dips | dip depth |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, e in sources.items():

        def g(key: str, fmt: str = ".4f", e: dict[str, Any] = e) -> str:
            v = e[key]
            return "-" if v is None or not math.isfinite(v) else format(v, fmt)

        cells = [
            name,
            str(e["curves"]),
            f"{e['points_median']:.0f}",
            f"{e['spacing_median']:.0f}",
            *(g(k) for k in ("sigma_resid", "sigma_white", "sigma_binomial")),
            "-" if e["acf"][0] is None else f"{e['acf'][0]:.2f}",
            g("sigma_extra"),
            g("ar1", ".2f"),
            g(f"ar1_at_{POINTS}_points", ".2f"),
            g(f"ar1_every_{STEPS_PER_EVAL}_steps", ".2f"),
            f"{g('seed_sd_a')} ({g('seed_sd_a_raw')})",
            g("dip_rate", ".1%"),
            g("dip_depth", ".3f"),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- main
def main(argv: Sequence[str] | None = None) -> int:
    global MARGIN, WINDOW, DATA
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--knobs", type=int, default=2000, help="simulated knobs at least (default 2000)")
    ap.add_argument("--seed", type=int, default=0, help="simulation seed (default 0)")
    ap.add_argument(
        "--margin",
        type=float,
        default=MARGIN,
        help=f"the sweeps' verdict margin (default {MARGIN}, the paper's); movers inside it count as nulls",
    )
    ap.add_argument(
        "--window",
        type=float,
        default=None,
        help="the sweeps' fit window as a share of compute (default none: the whole curve, as the demo)",
    )
    ap.add_argument(
        "--boot", type=int, default=200, help="bootstrap replicates, as scalerl fit --boot (default 200)"
    )
    ap.add_argument("--out", type=Path, default=WORK, help=f"work folder (default {WORK})")
    ap.add_argument(
        "--data",
        type=Path,
        default=None,
        help="the real curves the noise is fitted on (default $SCALERL_REAL_CURVES, else "
        "/work/shared/data/real-rl-curves: bench/data.py)",
    )
    ap.add_argument("--no-cli-check", action="store_true", help="skip the `scalerl fit --json` cross-check")
    ap.add_argument(
        "--noise",
        choices=("real", "binomial"),
        default="real",
        help="real: the model fitted on the real curves (default); binomial: its binomial points and "
        "seed spread only (no AR(1) wander, no dips)",
    )
    ap.add_argument(
        "--retabulate",
        type=Path,
        nargs="+",
        metavar="JSON",
        help="print the tables of earlier runs' verdict_sim.json (nothing simulated); several files "
        "(independent draws) are pooled, with per-cell intervals",
    )
    args = ap.parse_args(argv)
    MARGIN = args.margin
    WINDOW = args.window
    DATA = args.data
    if args.retabulate:
        rows, sources = pooled_rows(args.retabulate)
        print(noise_table(sources), "\n")
        print(cell_table(rows)[1], "\n")
        print(ci_table(rows, by_cell=True), "\n")
        print(power_table(rows), "\n")
        print(confusion(rows), "\n")
        print(calibration(rows))
        return 0
    from scalerl import db
    from scalerl.harness.analysis.sim.simulate import NoiseModel, simulate_sweep, write_sweep
    from scalerl.harness.analysis.verdicts.service import FitRequest, fit_sweep, save_fits

    t0 = time.perf_counter()
    sources, noise = fit_noise()
    if args.noise == "binomial":
        noise = NoiseModel(n=noise.n, seed_sd_a=noise.seed_sd_a)
    t_noise = time.perf_counter() - t0
    print(f"noise fitted on {len(sources)} sources in {t_noise:.1f} s; bench noise model: {noise}")
    print(noise_table(sources))
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "sim.db"
    for p in args.out.glob("sim.db*"):
        p.unlink()
    url = f"sqlite:///{path}"
    store = db.open_store(url)
    per_cell = max(1, math.ceil(args.knobs / (KNOBS_PER_SWEEP * len(SEEDS) * len(BUDGETS))))
    rng = np.random.default_rng(args.seed)
    rows: list[dict[str, Any]] = []
    timing = {"simulate": 0.0, "write": 0.0, "fit": 0.0}
    check: dict[str, Any] = {"ok": None}
    k = 0
    try:
        for i in range(per_cell):
            for s in SEEDS:
                for b in BUDGETS:
                    name = f"s{s}-b{round(100 * b)}-{i}"
                    t = time.perf_counter()
                    sim = simulate_sweep(design_for(rng, s, b, name), noise, rng)
                    timing["simulate"] += time.perf_counter() - t
                    t = time.perf_counter()
                    write_sweep(store, sim)
                    timing["write"] += time.perf_counter() - t
                    t = time.perf_counter()
                    result = fit_sweep(store, name, FitRequest(n_boot=args.boot), write=False)
                    save_fits(store, result)
                    timing["fit"] += time.perf_counter() - t
                    cell = {"seeds": s, "budget_fraction": b, "sweep": name}
                    rows += score(sim, result.verdict_rows, cell)
                    if k == 0 and not args.no_cli_check:
                        check = cli_check(url, name, result.verdict_rows)
                        print(f"cli check on {name}: {check}")
                    k += 1
            print(f"  {len(rows)} knobs, {time.perf_counter() - t0:.0f} s", flush=True)
    finally:
        store.close()
    wall = time.perf_counter() - t0
    cells, table = cell_table(rows)
    ptable = power_table(rows)
    ctable = confusion(rows)
    itable = ci_table(rows)
    print(
        f"\n{len(rows)} knobs in {k} sweeps, {wall:.0f} s (noise fit {t_noise:.0f} s, simulate "
        f"{timing['simulate']:.0f} s, store writes {timing['write']:.0f} s, fit {timing['fit']:.0f} s)\n"
    )
    print(table, "\n")
    print(itable, "\n")
    print(ptable, "\n")
    print(ctable, "\n")
    print(calibration(rows))
    calls = [r for r in rows if r["collapse_run_dipped"] is not None]
    real = sum(bool(r["collapse_run_dipped"]) for r in calls)
    print(
        f"\ncollapse calls (unstable, or unfit through the baseline): {len(calls)} knobs; the run named "
        f"had a simulated dip in {real}, none in {len(calls) - real}"
    )
    report = {
        "command": "python -m bench.verdict_sim " + " ".join(argv if argv is not None else sys.argv[1:]),
        "knobs": len(rows),
        "sweeps": k,
        "wall_s": round(wall, 1),
        "timing_s": {key: round(v, 1) for key, v in timing.items()} | {"noise_fit": round(t_noise, 1)},
        "noise_sources": sources,
        "noise_model": asdict(noise),
        "cli_check": check,
        "cells": cells,
        "tables": {
            "cells": table,
            "intervals": itable,
            "power": ptable,
            "confusion": ctable,
            "calibration": calibration(rows),
        },
        "rows": rows,
    }
    out = args.out / "verdict_sim.json"
    out.write_text(json.dumps(_finite(report), indent=1, default=_json_default))
    print(f"\nwrote {out}")
    return 0 if check.get("ok") in (True, None) else 1


def _finite(v: Any) -> Any:
    """NaN and infinities as null (JSON has neither)."""
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_finite(x) for x in v]
    return v


def _json_default(v: Any) -> Any:
    if isinstance(v, (np.floating, np.integer)):
        return v.item()
    return str(v)


if __name__ == "__main__":
    raise SystemExit(main())
