"""Verdicts against a second truth model: exact sigmoids, binomial points, a pooled-t reference.

Issue 36, item 7. An instrument independent of ``bench/verdict_sim.py`` (its own draws, its own
noise model, no store): every run is an exact sigmoid (ScaleRL's Eq. 1) whose ceiling A varies
from seed to seed, evaluated at 41 evenly spaced computes (the first at budget / 41: no step-0
evaluation, so R0 is fitted), each value Binomial(500, R) / 500 with n = 500 recorded, as a
trainer logs it. Seeds are independent across variants (seed numbers 0.. in every variant, so the
tool's seed blocks cost degrees of freedom and buy nothing here). Each sweep is a baseline (R0
0.25, A 0.65, B 1.5, C_mid 1,000) and 8 knobs: 2 nulls, 3 movers (A +0.06, +0.08, +0.10) and 3 of
the 4 shapers (B x2, B x0.5, C_mid x2, C_mid x0.5; the one left out rotates with the sweep).
Cells: 3, 5, 8 seeds x seed sd of A 0.01, 0.02 x two regimes: ``plateau`` (the budget where the
baseline has made 98% of its gain) and ``rising`` (74%).

Three rules judge the same draws:

- **tool**: :func:`scalerl.harness.analysis.verdicts.classify`, the product's path (defaults:
  method fast, margin 0.02, level 0.95; 20 bootstrap replicates of the pooled fits, which only
  draw the report's bands);
- **reference**: a pooled-seed t. Each seed's own fit (the tool's per-seed fits: same R0, same
  fitter) gives A, log B and log C_mid; one within-group variance pooled over the sweep's
  groups (N - G degrees of freedom); the same claims as the tool (mover: the dA interval beyond
  +-0.02; efficiency: the d log B or d log C_mid interval beyond +-log 1.1, Bonferroni over the
  two; no-effect: all three inside), Benjamini-Hochberg at 5% over the sweep's knobs per claim;
- **oracle**: the same, with each variant's per-seed variances known (measured once per cell on
  4,000 simulated runs of that variant, R0 known) and normal intervals.

Scored per cell: nulls called mover or shaper; decided verdicts wrong (a mover called shaper or
no-effect, a shaper called mover, a null called anything but no-effect, a mover of the wrong
sign); the tool's dA 95% interval holding the truth; power per truth; the calibration of the
tool's claim probabilities (among claims at P >= 0.9, the share true).

Run: ``.venv/bin/python bench/verdict_sim2.py --seed 7 --sweeps 60`` (prints markdown tables,
writes ``bench/.work/verdict_sim2/seed<S>.json``); ``--retabulate JSON...`` pools earlier runs.
Results: bench/README.md, "Verdicts against a second truth model (verdict_sim2)".
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "bench" / ".work" / "verdict_sim2"
SEEDS = (3, 5, 8)
SEED_SDS = (0.01, 0.02)
REGIMES = {"plateau": 0.98, "rising": 0.74}
R0, A, B, C_MID = 0.25, 0.65, 1.5, 1000.0
POINTS = 41
N = 500
MARGIN = 0.02
THR = math.log(1.1)
LEVEL = 0.95
MOVERS = (0.06, 0.08, 0.10)
SHAPERS = (("shaper-b", 2.0), ("shaper-b", 0.5), ("shaper-c-mid", 2.0), ("shaper-c-mid", 0.5))
DECIDED = ("asymptote-mover", "efficiency-shaper", "no-effect")
ORACLE_RUNS = 4000


@dataclass(frozen=True)
class Knob:
    name: str
    kind: str  # null, mover, shaper-b, shaper-c-mid
    effect: float
    a: float
    b: float
    c_mid: float

    @property
    def d_a(self) -> float:
        return self.a - A


def knobs_for(i: int) -> list[Knob]:
    """The sweep's 8 knobs: 2 nulls, 3 movers, 3 of the 4 shapers (the one left out rotates)."""
    out = [Knob(f"null-{j}", "null", 0.0, A, B, C_MID) for j in range(2)]
    out += [Knob(f"mover+{d:g}", "mover", d, A + d, B, C_MID) for d in MOVERS]
    for k, (kind, f) in enumerate(SHAPERS):
        if k == i % len(SHAPERS):
            continue
        b, c = (B * f, C_MID) if kind == "shaper-b" else (B, C_MID * f)
        out.append(Knob(f"{kind}-x{f:g}", kind, f, A, b, c))
    return out


def budget(regime: str) -> float:
    frac = REGIMES[regime]
    return C_MID * (frac / (1.0 - frac)) ** (1.0 / B)


def compute_grid(regime: str) -> np.ndarray:
    top = budget(regime)
    return np.linspace(top / POINTS, top, POINTS)


def draw_runs(
    rng: np.random.Generator, a: float, b: float, c_mid: float, sd: float, x: np.ndarray, seeds: int
) -> np.ndarray:
    """(seeds, points) values: each seed's A ~ N(a, sd), Binomial(N, R) / N at every compute."""
    from scalerl.harness.analysis.fit.curve import sigmoid_curve

    a_seed = np.clip(a + sd * rng.standard_normal(seeds), 0.0, 1.0)
    p = np.stack([sigmoid_curve(x, R0, ai, b, c_mid) for ai in a_seed])
    return np.asarray(rng.binomial(N, np.clip(p, 0.0, 1.0)) / N, dtype=np.float64)


# ----------------------------------------------------------------------------- oracle variances
def oracle_variances(regime: str, sd: float, knobs: Sequence[Knob]) -> dict[str, tuple[float, float, float]]:
    """Per truth (baseline and each knob kind/effect): the variance of one seed's fitted A, log B
    and log C_mid, from ORACLE_RUNS simulated runs fitted with R0 known (cached on disk)."""
    from scalerl.harness.analysis.fit.fitters import fit_sigmoid_many
    from scalerl.harness.analysis.noise.point import binomial_se

    path = WORK / f"oracle-{regime}-{sd:g}.json"
    cache: dict[str, list[float]] = json.loads(path.read_text()) if path.exists() else {}
    x = compute_grid(regime)
    rng = np.random.default_rng(12345)
    wanted = [(A, B, C_MID)] + [(k.a, k.b, k.c_mid) for k in knobs]
    changed = False
    for a, b, c in wanted:
        key = _key(a, b, c)
        if key in cache:
            continue
        ys = draw_runs(rng, a, b, c, sd, x, ORACLE_RUNS)
        sig = [binomial_se(y, np.full(y.size, float(N))) for y in ys]
        fits = fit_sigmoid_many([(x, y) for y in ys], r0=[R0] * len(ys), sigma=sig)
        vals = np.array([[f.a, math.log(f.b), math.log(f.c_mid)] for f in fits if f.ok])
        cache[key] = [float(v) for v in np.var(vals, axis=0, ddof=1)] + [float(len(vals))]
        changed = True
    if changed:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(cache, indent=1))
    return {k: (v[0], v[1], v[2]) for k, v in cache.items()}


def _key(a: float, b: float, c: float) -> str:
    return f"{a:.4f}/{b:.4f}/{c:.1f}"


# ----------------------------------------------------------------------------- the simple rules
def bh(p: Sequence[float], q: float = 1.0 - LEVEL) -> list[bool]:
    from scalerl.harness.analysis.verdicts.inference import bh as _bh

    return _bh(list(p), q)


def _p_beyond(d: float, se: float, df: float, thr: float) -> float:
    if not (math.isfinite(d) and math.isfinite(se)) or se <= 0:
        return 1.0
    ref = stats.t(df) if df < 1e5 else stats.norm()
    return float(min(1.0, 2.0 * ref.sf((abs(d) - thr) / se)))


def _p_inside(d: float, se: float, df: float, thr: float) -> float:
    if not (math.isfinite(d) and math.isfinite(se)) or se <= 0:
        return 1.0
    ref = stats.t(df) if df < 1e5 else stats.norm()
    return float(min(1.0, 2.0 * ref.sf((thr - abs(d)) / se)))


def simple_rule(
    per_seed: dict[str, np.ndarray], names: Sequence[str], known: dict[str, np.ndarray] | None = None
) -> dict[str, dict[str, Any]]:
    """The pooled-seed t (``known`` None) or the oracle (``known``: per group, the per-seed
    variances of A, log B, log C_mid). ``per_seed``: group -> (seeds, 3) array of A, log B,
    log C_mid (rows with NaN dropped per column)."""
    groups = ["baseline", *names]
    out: dict[str, dict[str, Any]] = {}
    means, ns, var = {}, {}, np.zeros(3)
    df = 0
    for g in groups:
        y = per_seed[g]
        means[g] = np.nanmean(y, axis=0) if y.size else np.full(3, np.nan)
        ns[g] = np.sum(np.isfinite(y), axis=0)
        if y.shape[0] >= 2:
            var += np.nansum((y - means[g]) ** 2, axis=0)
    dfs = sum(ns[g] - 1 for g in groups if np.all(ns[g] >= 1))
    df_arr = np.maximum(np.asarray(dfs, dtype=np.float64), 1.0)
    pooled = var / df_arr
    df = 1e6 if known is not None else df_arr
    p_m, p_e, p_n, d_a = [], [], [], []
    for n in names:
        if known is not None:
            se = np.sqrt(known[n] / np.maximum(ns[n], 1) + known["baseline"] / np.maximum(ns["baseline"], 1))
            dfx = [1e6] * 3
        else:
            se = np.sqrt(pooled / np.maximum(ns[n], 1) + pooled / np.maximum(ns["baseline"], 1))
            dfx = list(np.broadcast_to(df, 3))
        d = means[n] - means["baseline"]
        pm = _p_beyond(d[0], se[0], dfx[0], MARGIN)
        pe = min(1.0, 2.0 * min(_p_beyond(d[1], se[1], dfx[1], THR), _p_beyond(d[2], se[2], dfx[2], THR)))
        pn = max(
            _p_inside(d[0], se[0], dfx[0], MARGIN),
            min(1.0, 2.0 * _p_inside(d[1], se[1], dfx[1], THR)),
            min(1.0, 2.0 * _p_inside(d[2], se[2], dfx[2], THR)),
        )
        p_m.append(pm)
        p_e.append(pe)
        p_n.append(pn)
        d_a.append(float(d[0]))
    acc_m, acc_e, acc_n = bh(p_m), bh(p_e), bh(p_n)
    for i, n in enumerate(names):
        if acc_m[i]:
            v = "asymptote-mover"
        elif acc_e[i]:
            v = "efficiency-shaper"
        elif acc_n[i]:
            v = "no-effect"
        else:
            v = "undecided"
        out[n] = {"verdict": v, "d_a": d_a[i], "both": bool(acc_m[i] and acc_e[i])}
    return out


# ----------------------------------------------------------------------------- one sweep
def run_sweep(
    rng: np.random.Generator, i: int, seeds: int, sd: float, regime: str, n_boot: int
) -> list[dict[str, Any]]:
    from scalerl.harness.analysis.groups import VariantCurves
    from scalerl.harness.analysis.verdicts import VerdictOptions, classify

    x = compute_grid(regime)
    knobs = knobs_for(i)
    groups: list[tuple[str, Knob | None, np.ndarray]] = [
        ("baseline", None, draw_runs(rng, A, B, C_MID, sd, x, seeds))
    ]
    for k in knobs:
        groups.append((k.name, k, draw_runs(rng, k.a, k.b, k.c_mid, sd, x, seeds)))
    vcs = [
        VariantCurves(
            name,
            tuple((x, y) for y in ys),
            knob=None if k is None else name,
            alternative=None if k is None else name,
            run_ids=tuple(f"{name}/s{s}" for s in range(seeds)),
            n=tuple(np.full(x.size, float(N)) for _ in range(seeds)),
            seeds=tuple(range(seeds)),
        )
        for name, k, ys in groups
    ]
    analysis = classify(vcs[0], vcs[1:], verdict_options=VerdictOptions(margin=MARGIN, n_boot=n_boot))
    per_seed: dict[str, np.ndarray] = {}
    for name, _, _ in groups:
        rows = []
        for s in range(seeds):
            f = analysis.run_fits[f"{name}/s{s}"]
            rows.append([f.a, math.log(f.b), math.log(f.c_mid)] if f.ok else [math.nan] * 3)
        per_seed[name] = np.array(rows, dtype=np.float64)
    names = [k.name for k in knobs]
    ref = simple_rule(per_seed, names)
    ov = oracle_variances(regime, sd, knobs)
    known = {"baseline": np.array(ov[_key(A, B, C_MID)])}
    known |= {k.name: np.array(ov[_key(k.a, k.b, k.c_mid)]) for k in knobs}
    orc = simple_rule(per_seed, names, known)
    by_name = {v.variant: v for v in analysis.verdicts}
    out = []
    for k in knobs:
        v = by_name[k.name]
        lo, hi = v.d_a_lo, v.d_a_hi
        covered = None
        if math.isfinite(lo):
            covered = bool(lo <= k.d_a <= (hi if math.isfinite(hi) else math.inf))
        out.append(
            {"sweep": i, "seeds": seeds, "sd": sd, "regime": regime, "knob": k.name, "kind": k.kind}
            | {"effect": k.effect, "true_d_a": k.d_a, "verdict": v.verdict, "d_a": _f(v.d_a)}
            | {"d_a_lo": _f(lo), "d_a_hi": _f(hi), "covered": covered}
            | {"p_ceiling": _f(getattr(v, "p_ceiling", math.nan))}
            | {"p_efficiency": _f(getattr(v, "p_efficiency", math.nan))}
            | {"efficiency": str(getattr(v, "efficiency", ""))}
            | {"ref": ref[k.name]["verdict"], "ref_d_a": ref[k.name]["d_a"], "oracle": orc[k.name]["verdict"]}
            | {"reason": v.reason[:300]}
        )
    return out


def _f(v: Any) -> float:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return math.nan
    return f if math.isfinite(f) else math.nan


# ----------------------------------------------------------------------------- scoring
def right(kind: str, effect: float, verdict: str, d_a: float) -> bool | None:
    """Whether a decided verdict is right (None: not decided)."""
    if verdict not in DECIDED:
        return None
    if kind == "null":
        return verdict == "no-effect"
    if kind == "mover":
        return verdict == "asymptote-mover" and math.isfinite(d_a) and d_a > 0
    return verdict == "efficiency-shaper"


def _pct(num: int, den: int) -> str:
    return f"{100.0 * num / den:.1f}%" if den else "-"


def cell_rows(rows: Sequence[dict[str, Any]]) -> list[tuple[tuple[str, float, int], list[dict[str, Any]]]]:
    out = []
    for regime in REGIMES:
        for sd in SEED_SDS:
            for s in SEEDS:
                sel = [r for r in rows if r["regime"] == regime and r["sd"] == sd and r["seeds"] == s]
                if sel:
                    out.append(((regime, sd, s), sel))
    return out


def validity_table(rows: Sequence[dict[str, Any]]) -> str:
    head = (
        "| regime | seed sd of A | seeds | knobs | nulls called mover or shaper (tool / ref / oracle) | "
        "decided verdicts wrong (tool / ref / oracle) | dA 95% CI holds truth (tool) | undecided (tool) |\n"
        "|---|---|---|---|---|---|---|---|"
    )
    lines = [head]
    for (regime, sd, s), sel in cell_rows(rows):
        nulls = [r for r in sel if r["kind"] == "null"]
        parts = []
        for col in ("verdict", "ref", "oracle"):
            called = sum(r[col] in ("asymptote-mover", "efficiency-shaper") for r in nulls)
            parts.append(_pct(called, len(nulls)))
        wrong = []
        for col, dcol in (("verdict", "d_a"), ("ref", "ref_d_a"), ("oracle", "ref_d_a")):
            judged = [right(r["kind"], r["effect"], r[col], r[dcol]) for r in sel]
            dec = [j for j in judged if j is not None]
            wrong.append(f"{_pct(sum(not j for j in dec), len(dec))} ({len(dec)})")
        ints = [r for r in sel if r["covered"] is not None]
        cov = f"{_pct(sum(bool(r['covered']) for r in ints), len(ints))} ({len(ints)})"
        und = _pct(sum(r["verdict"] == "undecided" for r in sel), len(sel))
        cells = [regime, f"{sd:g}", str(s), str(len(sel)), " / ".join(parts), " / ".join(wrong), cov, und]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


TRUTHS: list[tuple[str, Any]] = [
    ("null: no-effect", lambda r: r["kind"] == "null"),
    ("mover +0.06", lambda r: r["kind"] == "mover" and abs(r["effect"] - 0.06) < 1e-9),
    ("mover +0.08", lambda r: r["kind"] == "mover" and abs(r["effect"] - 0.08) < 1e-9),
    ("mover +0.10", lambda r: r["kind"] == "mover" and abs(r["effect"] - 0.10) < 1e-9),
    ("shaper B x2 or x0.5", lambda r: r["kind"] == "shaper-b"),
    ("shaper C_mid x2 or x0.5", lambda r: r["kind"] == "shaper-c-mid"),
]


def power_table(rows: Sequence[dict[str, Any]]) -> str:
    """Share decided right, per truth and cell: tool / reference / oracle."""
    cells = cell_rows(rows)
    head = "| truth | " + " | ".join(f"{reg} sd {sd:g} {s} seeds" for (reg, sd, s), _ in cells) + " |"
    lines = [head, "|---|" + "---|" * len(cells)]
    for label, pick in TRUTHS:
        parts = []
        for _, sel in cells:
            sub = [r for r in sel if pick(r)]
            vals = []
            for col, dcol in (("verdict", "d_a"), ("ref", "ref_d_a"), ("oracle", "ref_d_a")):
                ok = sum(right(r["kind"], r["effect"], r[col], r[dcol]) is True for r in sub)
                vals.append(f"{100.0 * ok / len(sub):.0f}" if sub else "-")
            parts.append(" / ".join(vals))
        lines.append(f"| {label} | " + " | ".join(parts) + " |")
    return "\n".join(lines)


def calibration_table(rows: Sequence[dict[str, Any]]) -> str:
    """The tool's claim probabilities against the truth: among claims with P in a bin, the share
    true (ceiling: |true dA| > margin; efficiency: a shaper)."""
    bins = [(0.0, 0.5), (0.5, 0.8), (0.8, 0.9), (0.9, 0.95), (0.95, 0.99), (0.99, 1.01)]
    lines = [
        "| claim | "
        + " | ".join(f"P in [{a:g}, {min(b, 1):g}{')' if b <= 1 else ']'}" for a, b in bins)
        + " | P >= 0.9 |",
        "|---|" + "---|" * (len(bins) + 1),
    ]
    claims = (
        ("the ceiling moves", "p_ceiling", lambda r: abs(r["true_d_a"]) > MARGIN),
        ("efficiency differs", "p_efficiency", lambda r: r["kind"].startswith("shaper")),
    )
    for label, col, truth in claims:
        parts = []
        for a, b in [*bins, (0.9, 1.01)]:
            sel = [r for r in rows if math.isfinite(r[col]) and a <= r[col] < b]
            parts.append(f"{_pct(sum(truth(r) for r in sel), len(sel))} ({len(sel)})")
        lines.append(f"| {label} | " + " | ".join(parts) + " |")
    return "\n".join(lines)


def gap_table(rows: Sequence[dict[str, Any]]) -> str:
    """Power, tool minus reference, in points, per truth and cell (the issue asks within 10)."""
    cells = cell_rows(rows)
    head = "| tool - reference | " + " | ".join(f"{reg} sd {sd:g} {s}" for (reg, sd, s), _ in cells) + " |"
    lines = [head, "|---|" + "---|" * len(cells)]
    for label, pick in TRUTHS[1:]:
        parts = []
        for _, sel in cells:
            sub = [r for r in sel if pick(r)]
            if not sub:
                parts.append("-")
                continue
            t = sum(right(r["kind"], r["effect"], r["verdict"], r["d_a"]) is True for r in sub)
            f = sum(right(r["kind"], r["effect"], r["ref"], r["ref_d_a"]) is True for r in sub)
            parts.append(f"{100.0 * (t - f) / len(sub):+.0f}")
        lines.append(f"| {label} | " + " | ".join(parts) + " |")
    return "\n".join(lines)


def tables(rows: Sequence[dict[str, Any]]) -> str:
    return "\n\n".join([validity_table(rows), power_table(rows), calibration_table(rows), gap_table(rows)])


# ----------------------------------------------------------------------------- main
def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--seed", type=int, default=7, help="simulation seed (default 7)")
    ap.add_argument("--sweeps", type=int, default=60, help="sweeps per cell (default 60)")
    ap.add_argument(
        "--boot",
        type=int,
        default=20,
        help="bootstrap replicates of the pooled fits (default 20: they draw the report's bands; the "
        "verdicts do not use them, tests/unit/analysis/test_verdicts.py checks)",
    )
    ap.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS), help="seed counts (default 3 5 8)")
    ap.add_argument("--sd", type=float, nargs="+", default=list(SEED_SDS), help="seed sds of A")
    ap.add_argument("--regime", nargs="+", default=list(REGIMES), choices=list(REGIMES))
    ap.add_argument(
        "--out", type=Path, default=None, help="JSON path (default bench/.work/verdict_sim2/seed<S>.json)"
    )
    ap.add_argument("--retabulate", type=Path, nargs="+", metavar="JSON", help="print earlier runs' tables")
    args = ap.parse_args(argv)
    if args.retabulate:
        rows = [r for p in args.retabulate for r in json.loads(p.read_text())["rows"]]
        print(tables(rows))
        return 0
    rng = np.random.default_rng(args.seed)
    rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    for regime in args.regime:
        for sd in args.sd:
            for s in args.seeds:
                for i in range(args.sweeps):
                    rows += run_sweep(rng, i, s, sd, regime, args.boot)
                print(
                    f"  {regime} sd {sd:g} {s} seeds: {len(rows)} knobs, {time.perf_counter() - t0:.0f} s",
                    flush=True,
                )
    wall = time.perf_counter() - t0
    text = tables(rows)
    print(f"\n{len(rows)} knobs, {wall:.0f} s\n")
    print(text)
    out = args.out or WORK / f"seed{args.seed}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    command = "python bench/verdict_sim2.py " + " ".join(argv if argv is not None else sys.argv[1:])
    out.write_text(
        json.dumps(
            {"command": command, "wall_s": round(wall, 1), "rows": rows, "tables": text}, default=_json
        )
    )
    print(f"\nwrote {out}")
    return 0


def _json(v: Any) -> Any:
    if isinstance(v, (np.floating, np.integer)):
        return v.item()
    if isinstance(v, np.bool_):
        return bool(v)
    return str(v)


if __name__ == "__main__":
    raise SystemExit(main())
