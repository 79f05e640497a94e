"""The store `bench/ui.py` measures: a lab-scale sweep, written through the real writer.

``runs`` runs (``variants`` variants x seeds; the first variant is the baseline, the others LOO
knobs whose ceilings and speeds differ a little) with ``points`` points each of ``val/pass_rate``
on FLOPs, Eq. 1 curves with binomial-sized noise. Used by bench/ui.py; on its own::

    .venv/bin/python -m bench.ui_store sqlite:///bench/.work/ui/ui.db [--runs 1000] [--points 1000]
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from scalerl.harness.analysis.fit.curve import sigmoid_curve

SWEEP = "lab"
METRIC = "val/pass_rate"


def build_store(url: str, runs: int, points: int, variants: int = 100) -> float:
    """Write the sweep into the store at ``url`` (created); returns the seconds it took."""
    from scalerl import db
    from scalerl.db.records import RunRecord

    store = db.open_store(url)
    store.ensure_sweep(
        SWEEP,
        {
            "design": "loo",
            "executor": "local",
            "fit": {"metric": METRIC, "axis": "flops", "window": {"fraction": 0.1}, "margin": 0.02},
        },
    )
    rng = np.random.default_rng(0)
    flops = np.geomspace(1e13, 3e16, points)
    seeds = max(runs // variants, 1)
    t0 = time.perf_counter()
    for r in range(runs):
        v, seed = divmod(r, seeds)
        variant = "baseline" if v == 0 else f"loo-knob{v}"
        a, b = 0.6 - 0.0004 * v, 1.4 - 0.002 * v
        run_id = f"{SWEEP}-{variant}-s{seed}"
        store.register_run(
            RunRecord(
                run_id=run_id,
                sweep=SWEEP,
                variant=variant,
                seed=seed,
                config={},
                config_hash=f"{r:016x}",
                knob=None if v == 0 else f"knob{v}",
                alternative=None if v == 0 else "alt",
            )
        )
        attempt = store.start_attempt(run_id, executor="local")
        values = sigmoid_curve(flops, 0.05, a, b, 1e15) + rng.normal(0, 0.019, points)
        writer = store.writer(run_id, attempt)
        for step in range(points):
            writer.add(step, {METRIC: float(values[step])}, {"flops": float(flops[step])}, {METRIC: 640})
        writer.close()
        store.finish_run(run_id, attempt, "completed")
    store.close()
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("url")
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--points", type=int, default=1000)
    ap.add_argument("--variants", type=int, default=100)
    args = ap.parse_args()
    seconds = build_store(args.url, args.runs, args.points, args.variants)
    print(f"{args.runs} runs x {args.points} points written in {seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
