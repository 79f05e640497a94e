"""Is P(beat the incumbent) calibrated where the beat rule uses it?

For every curve of every pool and every prefix the beat rule would decide on (its warm-up from the
5th report, ``interval_steps`` as in the bench): P(beat) from ``BeatPruner.probability`` with
every other curve of the pool COMPLETE (incumbent = their best final), against whether the
curve's final did beat it; each source with its held-out calibrations
(:mod:`bench.search.calibrations`). With ``--peers k`` the probability is the peer rule's (every
other curve a peer; no calibration).

Run: ``OMP_NUM_THREADS=1 python -m bench.search.reliability --jobs 2 [--peers 3]``; prints
markdown (bench/README.md, "Search").
"""

from __future__ import annotations

import argparse
import itertools
import time
import warnings
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import optuna

from bench.data import SOURCES, load_real
from bench.provenance import header
from bench.search.calibrations import loso_calibrations
from bench.search.memo import MemoForecaster
from bench.search.pools import Pool, build_pools
from bench.search.settings import BEAT_REPORTS, SHIPPED, BeatSetting, Calibrations
from scalerl.harness.optuna import BeatPruner

RELIABILITY_BINS = (0.0, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)


def _reliability_pool(job: tuple[Pool, Calibrations, int]) -> list[tuple[bool, int, float, bool]]:
    """For every curve of the pool and every prefix the beat rule would decide on (its default
    warm-up, ``interval_steps`` as in the bench): P(beat) from ``BeatPruner.probability``
    with every other curve COMPLETE (finished siblings; incumbent = their best final), and
    whether the curve's final did beat it; with ``peers`` > 0 the probability is the peer rule's
    (every other curve a peer). Rows: (is the pool's best, curve, P, beat)."""
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    pool, cal, peers = job
    finals = pool.finals
    top = int(np.argmax(finals))
    g = BeatSetting(0.1, 5, cal=cal, peers=peers)
    rows = []
    memo = MemoForecaster()
    for i, c in enumerate(pool.curves):
        pruner = g.factory(memo)(pool)
        assert isinstance(pruner, BeatPruner)
        study = optuna.create_study(direction="maximize", study_name=f"{pool.name}/{i}")
        for j, o in enumerate(pool.curves):
            if j != i:
                iv = {int(s): float(v) for s, v in zip(o.steps, o.values, strict=True)}
                study.add_trial(optuna.trial.create_trial(value=o.final, intermediate_values=iv))
        incumbent = float(np.max(np.delete(finals, i)))
        step = max(1, pool.points // BEAT_REPORTS)
        for k in range(g.min_points, c.steps.size + 1, step):
            iv = {int(s): float(v) for s, v in zip(c.steps[:k], c.values[:k], strict=True)}
            trial = optuna.trial.create_trial(state=optuna.trial.TrialState.RUNNING, intermediate_values=iv)
            pr = pruner.probability(study, trial)
            if np.isfinite(pr):
                rows.append((i == top, i, float(pr), bool(c.final > incumbent)))
    return rows


def reliability(pools: Sequence[Pool], n_jobs: int, peers: int = 0) -> None:
    """Is P(beat) calibrated where the pruner uses it? Each source with its held-out calibrations;
    with ``peers`` > 0 the peer rule's P (no calibration: the other curves of the pool are the
    peers; no margin), on every prefix from the 5th report."""
    t0 = time.perf_counter()
    cals = loso_calibrations(n_jobs) if not peers else dict.fromkeys((*SOURCES, None), SHIPPED)
    with ProcessPoolExecutor(max(1, n_jobs)) as ex:
        got = list(ex.map(_reliability_pool, [(pl, cals[pl.source], peers) for pl in pools]))
    print(header())
    print(f"wall: {time.perf_counter() - t0:.0f} s")
    what = f"the peer rule ({peers}+ peers)" if peers else "held-out calibrations"
    print(f"\n### P(beat the incumbent) against what happened, {what}\n")
    print("| P(beat) | decisions | mean P | share that did beat | of them, the pool's best curve |")
    print("|---|---|---|---|---|")
    rows = [r for rs in got for r in rs]
    for lo, hi in itertools.pairwise(RELIABILITY_BINS):
        sel = [r for r in rows if lo <= r[2] < hi or (hi == 1.0 and r[2] == 1.0)]
        if sel:
            print(
                f"| [{lo:g}, {hi:g}) | {len(sel)} | {np.mean([r[2] for r in sel]):.3f} | "
                f"{np.mean([r[3] for r in sel]):.3f} | {sum(r[0] for r in sel)} |"
            )
    print("\n### The pool's best curve: lowest P(beat) over its decisions (random order aside)\n")
    print("| pool | decisions | min P | first P | last P | decisions with P < 0.05 |")
    print("|---|---|---|---|---|---|")
    for pl, rs in zip(pools, got, strict=True):
        best = [r[2] for r in rs if r[0]]
        if best:
            low = sum(p < 0.05 for p in best)
            print(f"| {pl.name} | {len(best)} | {min(best):.3f} | {best[0]:.3f} | {best[-1]:.3f} | {low} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--peers", type=int, default=0, help="the peer rule's P (peers >= this); 0: the sweep forecast's"
    )
    ap.add_argument("--jobs", type=int, default=1, help="processes (one pool at a time each)")
    args = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    reliability(build_pools(load_real()), args.jobs, args.peers)


if __name__ == "__main__":
    main()
