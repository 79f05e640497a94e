"""Fitting benchmark: this project's batched fitter vs the paper's grid (literal, and widened to
the data as DESIGN.md §4 says: the ``paper`` fitter) vs a plain curve_fit loop.

Data: ``--n`` curves in all: every real curve in /work/shared/data/real-rl-curves (47: W&B
validation curves, TensorBoard val and train rewards, verl train rewards) plus synthetic curves
with known truth (R0 in [0.05, 0.3], A in [0.5, 0.78] so that it lies inside the paper's A grid,
B in [0.7, 3], C_mid log-uniform in [1e3, 2e4], 20-200 points log-spaced over [100, 1e5],
Gaussian noise sd 0.005-0.02). R0 is given to every method (the true start for synthetic curves,
the first points for real ones), so the methods differ only in how they search.

Run: ``OMP_NUM_THREADS=2 .venv/bin/python bench/fit.py [--n 1000] [--paper-n 20]``.
The paper's grid (71 A values x 100 C_mid values, a curve_fit for B in each cell) takes seconds
per curve, so it runs on the first ``--paper-n`` synthetic curves only and its time is reported
per curve; the other methods run on the same subset too, so accuracy is compared like for like.
Prints a markdown table (paste it into bench/README.md, section "Fitting").
"""

from __future__ import annotations

import argparse
import math
import os
import time
from pathlib import Path

import numpy as np

from scalerl.harness.analysis.fit.backtest import backtest_many, backtest_power_law
from scalerl.harness.analysis.fit.curve import FitOptions, SigmoidFit, sigmoid_curve
from scalerl.harness.analysis.fit.fitters import fit_sigmoid_many
from scalerl.harness.analysis.fit.powerlaw import fit_power_law
from scalerl.harness.analysis.forecast.ensemble import forecast_curves
from scalerl.harness.importers import read_curves

REAL = Path("/work/shared/data/real-rl-curves")
Curve = tuple[np.ndarray, np.ndarray]


def synthetic(n: int, seed: int = 0) -> tuple[list[Curve], np.ndarray]:
    """Curves and their truth rows (r0, a, b, c_mid)."""
    rng = np.random.default_rng(seed)
    curves, truth = [], []
    for _ in range(n):
        r0, a = rng.uniform(0.05, 0.3), rng.uniform(0.5, 0.78)
        b, c_mid = rng.uniform(0.7, 3.0), math.exp(rng.uniform(math.log(1e3), math.log(2e4)))
        c = np.geomspace(100, 1e5, int(rng.integers(20, 201)))
        y = sigmoid_curve(c, r0, a, b, c_mid) + rng.normal(0, rng.uniform(0.005, 0.02), c.size)
        curves.append((c, y))
        truth.append((r0, a, b, c_mid))
    return curves, np.array(truth)


def real_curves() -> list[Curve]:
    out: list[Curve] = []
    seen: set[tuple[str, str]] = set()
    for f in sorted((REAL / "wandb-export-deep-grpo").glob("*.csv")):
        for c in read_curves(f):
            if (c.run, c.x_name) not in seen:
                seen.add((c.run, c.x_name))
                out.append((c.x, c.values))
    for f in sorted((REAL / "tensorboard-verl-async").glob("*.tfevents")):
        by = {c.metric: c for c in read_curves(f)}
        for m in ("val-core/openai/gsm8k/reward/mean@1", "critic/score/mean"):
            out.append((by[m].x, by[m].values))
    for f in sorted((REAL / "verl-fork-parsed").glob("*.csv")):
        c = read_curves(f, metric="critic/rewards/mean")[0]
        out.append((c.x, c.values))
    return out


def first_points_r0(curve: Curve, k: int = 3) -> float:
    c, v = curve
    order = np.argsort(c, kind="stable")
    return float(np.mean(v[order][:k]))


def timed(
    method: str, curves: list[Curve], r0: list[float], repeat: int = 1
) -> tuple[float, list[SigmoidFit]]:
    best = math.inf
    fits: list[SigmoidFit] = []
    for _ in range(repeat):
        t = time.perf_counter()
        fits = fit_sigmoid_many(curves, method=method, r0=r0, options=FitOptions())
        best = min(best, time.perf_counter() - t)
    return best, fits


def errors(fits: list[SigmoidFit], truth: np.ndarray, curves: list[Curve]) -> dict[str, float]:
    a = np.array([f.a for f in fits])
    b = np.array([f.b for f in fits])
    cm = np.array([f.c_mid for f in fits])
    ok = np.array([f.ok for f in fits])
    # Squared error to the data, relative to the true curve's: <= 1 means a better least-squares fit.
    rel_sse = []
    for f, (c, y), t in zip(fits, curves, truth, strict=True):
        if f.ok:
            fit_sse = np.sum((y - f.predict(c)) ** 2)
            rel_sse.append(fit_sse / np.sum((y - sigmoid_curve(c, *t)) ** 2))
    return {
        "ok": float(ok.mean()),
        "a_mae": float(np.nanmean(np.abs(a - truth[:, 1])[ok])),
        "b_mlre": float(np.nanmedian(np.abs(np.log(b / truth[:, 2]))[ok])),
        "cmid_mlre": float(np.nanmedian(np.abs(np.log(cm / truth[:, 3]))[ok])),
        "rel_sse": float(np.mean(rel_sse)) if rel_sse else math.nan,
    }


def forecast_synthetic(curves: list[Curve], truth: np.ndarray) -> tuple[float, float]:
    """MAE vs the noiseless truth on compute > half, for sigmoid and power law (fit on <= half)."""
    halves = [(c[c <= 0.5 * c[-1]], y[c <= 0.5 * c[-1]]) for c, y in curves]
    fits = fit_sigmoid_many(halves, r0=list(truth[:, 0]))
    sig, pl = [], []
    for (c, _), (hc, hy), f, t in zip(curves, halves, fits, truth, strict=True):
        test = c > 0.5 * c[-1]
        true = sigmoid_curve(c[test], *t)
        if f.ok:
            sig.append(np.mean(np.abs(f.predict(c[test]) - true)))
        p = fit_power_law(hc, hy)
        if p.ok:
            pl.append(np.mean(np.abs(p.predict(c[test]) - true)))
    return float(np.mean(sig)), float(np.mean(pl))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--paper-n", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    real = real_curves()
    syn, truth = synthetic(args.n - len(real), args.seed)
    everything = syn + real
    r0_all = list(truth[:, 0]) + [first_points_r0(c) for c in real]
    print(
        f"threads: OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}; "
        f"{len(everything)} curves ({len(syn)} synthetic, {len(real)} real), "
        f"{sum(c[0].size for c in everything)} points"
    )

    fit_sigmoid_many(everything[:50], r0=r0_all[:50])  # warm-up (imports, caches)
    t_fast, fast_fits = timed("fast", everything, r0_all, repeat=3)
    t_cf, cf_fits = timed("curve_fit", everything, r0_all)
    # The paper's procedure with its grid widened to the data (DESIGN.md §4), vectorised.
    t_pw, pw_fits = timed("paper", everything, r0_all)
    e_pw = errors(pw_fits[: len(syn)], truth, syn)
    e_fast = errors(fast_fits[: len(syn)], truth, syn)
    e_cf = errors(cf_fits[: len(syn)], truth, syn)
    real_ok_fast = np.mean([f.ok for f in fast_fits[len(syn) :]])
    real_ok_cf = np.mean([f.ok for f in cf_fits[len(syn) :]])
    # Real curves: compare least-squares quality where both fitted (lower rmse is better).
    both = [
        (f.rmse, g.rmse)
        for f, g in zip(fast_fits[len(syn) :], cf_fits[len(syn) :], strict=True)
        if f.ok and g.ok
    ]

    k = args.paper_n
    sub, sub_truth, sub_r0 = syn[:k], truth[:k], list(truth[:k, 0])
    t_paper, paper_fits = timed("paper_grid", sub, sub_r0)
    _, fast_sub = timed("fast", sub, sub_r0)
    _, cf_sub = timed("curve_fit", sub, sub_r0)
    _, pw_sub = timed("paper", sub, sub_r0)
    e_paper, e_fast_sub, e_cf_sub, e_pw_sub = (
        errors(f, sub_truth, sub) for f in (paper_fits, fast_sub, cf_sub, pw_sub)
    )

    sig_fc, pl_fc = forecast_synthetic(syn[:200], truth[:200])
    bt = backtest_many(real, 0.5)
    real_sig = float(np.mean([b.mae for b in bt if b.ok]))
    real_pl = float(np.nanmean([backtest_power_law(c, 0.5)[1] for c in real]))
    real_sig_final = float(np.median([abs(b.final_error) for b in bt if b.ok]))
    real_pl_final = float(np.nanmedian([abs(backtest_power_law(c, 0.5)[3]) for c in real]))

    per_fast = t_fast / len(everything)
    per_paper = t_paper / k
    per_cf = t_cf / len(everything)
    per_pw = t_pw / len(everything)
    print()
    print(
        "| method | curves | time | per curve | ok | A abs err | B med abs log err "
        "| C_mid med abs log err | SSE / true-curve SSE |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    print(
        f"| fast (batched, this project) | {len(everything)} | {t_fast:.2f} s | {per_fast * 1e3:.2f} ms | "
        f"{e_fast['ok']:.3f} | {e_fast['a_mae']:.4f} | {e_fast['b_mlre']:.3f} | "
        f"{e_fast['cmid_mlre']:.3f} | {e_fast['rel_sse']:.4f} |"
    )
    print(
        f"| scipy curve_fit loop | {len(everything)} | {t_cf:.2f} s | {per_cf * 1e3:.2f} ms | "
        f"{e_cf['ok']:.3f} | {e_cf['a_mae']:.4f} | {e_cf['b_mlre']:.3f} | {e_cf['cmid_mlre']:.3f} | "
        f"{e_cf['rel_sse']:.4f} |"
    )
    print(
        f"| paper, grid widened (vectorised) | {len(everything)} | {t_pw:.2f} s | {per_pw * 1e3:.2f} ms | "
        f"{e_pw['ok']:.3f} | {e_pw['a_mae']:.4f} | {e_pw['b_mlre']:.3f} | {e_pw['cmid_mlre']:.3f} | "
        f"{e_pw['rel_sse']:.4f} |"
    )
    for name, e in (
        ("paper grid (subset)", e_paper),
        ("paper, grid widened (same subset)", e_pw_sub),
        ("fast (same subset)", e_fast_sub),
        ("curve_fit (same subset)", e_cf_sub),
    ):
        t_row = f"{t_paper:.1f} s | {per_paper:.2f} s" if name == "paper grid (subset)" else "- | -"
        print(
            f"| {name} | {k} | {t_row} | {e['ok']:.3f} | {e['a_mae']:.4f} | {e['b_mlre']:.3f} | "
            f"{e['cmid_mlre']:.3f} | {e['rel_sse']:.4f} |"
        )
    print()
    print(
        f"speed-up vs paper grid (per curve): {per_paper / per_fast:,.0f}x; "
        f"vs curve_fit loop: {per_cf / per_fast:.1f}x; paper, grid widened, vs the literal paper grid: "
        f"{per_paper / per_pw:,.0f}x, vs the curve_fit loop: {per_cf / per_pw:.2f}x"
    )
    print(
        f"real curves fitted ok: fast {real_ok_fast:.3f}, curve_fit {real_ok_cf:.3f}; where both ok, "
        f"fast rmse <= curve_fit rmse + 1e-9 on {np.mean([a <= b + 1e-9 for a, b in both]):.3f} "
        f"of {len(both)}"
    )
    print(
        f"forecast from half the compute, synthetic (200 curves, MAE vs truth): sigmoid {sig_fc:.4f}, "
        f"power law {pl_fc:.4f}"
    )
    print(
        f"forecast from half the compute, real ({len(real)} curves, MAE vs observed): "
        f"sigmoid {real_sig:.4f}, power law {real_pl:.4f}; median |final error| "
        f"sigmoid {real_sig_final:.4f}, power law {real_pl_final:.4f}"
    )
    # The forecaster (scalerl.harness.analysis.forecast_curves: 3 batched sigmoid fits + 3 power laws per
    # curve) on the same curves, each cut at half its compute.
    halves = [(c[c <= 0.5 * c[-1]], y[c <= 0.5 * c[-1]]) for c, y in everything]
    ahead = [c[c > 0.5 * c[-1]] for c, _ in everything]
    t = time.perf_counter()
    fcs = forecast_curves(halves, ahead)
    t_fc = time.perf_counter() - t
    print(
        f"forecast_curves on all {len(everything)} curves (half held out): {t_fc:.2f} s, "
        f"{np.mean([f.ok for f in fcs]):.3f} with a forecast"
    )


if __name__ == "__main__":
    main()
