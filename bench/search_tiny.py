"""A real search on the tiny testbed, side by side: no pruning, Optuna's MedianPruner and
HyperbandPruner, and this project's forecast pruner (BoundPruner), with the same sampler, seed and
trial budget.

    OMP_NUM_THREADS=1 .venv/bin/python -m bench.search_tiny [--trials 10] [--budget 150]

Each pruner runs ``recipes/tiny-search.yaml`` (learning rate x loss on the tiny preset) into its
own SQLite store with one in-process worker (``--executor debug``: the trials run one after
another, so the sampler sees the same history and the comparison is exact). The trained runs
are real reference-trainer runs with pinned numerics, so two pruners that train the same trial
get bit-identical curves. Reported per pruner: compute spent (training steps summed over trials),
the best final value found (the objective: mean of the last 3 evaluations of a completed trial),
and the regret against the best final value among every configuration the unpruned search
trained. Work files: bench/.work/search-tiny/.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SWEEP = ROOT / "recipes" / "tiny-search.yaml"
PRUNERS = {
    "none": "{type: none}",
    "median": "{type: median, options: {n_startup_trials: 2, n_warmup_steps: 40}}",
    "hyperband": "{type: hyperband, options: {min_resource: 30, reduction_factor: 3}}",
    "forecast": "{type: forecast}",
}


def run(pruner: str, spec: str, work: Path, trials: int, budget: int) -> dict[str, float]:
    import optuna

    from scalerl import db
    from scalerl.db import queries

    url = f"sqlite:///{work / f'{pruner}.db'}"
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "scalerl.harness", "sweep", str(SWEEP), f"optuna.pruner={spec}",
         f"optuna.n_trials={trials}", f"budget.value={budget}", "--executor", "debug", "--db", url,
         "--state-dir", str(work / f"state-{pruner}")],
        check=True, cwd=ROOT, stdout=subprocess.DEVNULL, env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    wall = time.perf_counter() - t0
    study = optuna.load_study(study_name="tiny-search", storage=url)
    runs = queries.runs(db.open_store(url), "tiny-search")
    steps = float(runs["last_step"].fillna(0).sum())
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    finals = {t.user_attrs["run_id"]: float(t.value) for t in done if t.value is not None}
    best = max(finals.values()) if finals else float("nan")
    return {"steps": steps, "best": best, "complete": len(done), "pruned": len(study.trials) - len(done),
            "wall": wall, "finals": finals}  # type: ignore[dict-item]  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--budget", type=int, default=150)
    ap.add_argument("--work", type=Path, default=ROOT / "bench" / ".work" / "search-tiny")
    args = ap.parse_args()
    work = args.work.resolve()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    cpu = platform.processor() or platform.machine()
    print(f"# tiny search: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {cpu}, {os.cpu_count()} cores; "
          f"{args.trials} trials, budget {args.budget} steps, TPE seed 0")  # fmt: skip
    results = {name: run(name, spec, work, args.trials, args.budget) for name, spec in PRUNERS.items()}
    oracle = max(results["none"]["finals"].values())  # type: ignore[attr-defined]
    base = results["none"]["steps"]
    print("\n| pruner | trials complete / pruned | steps trained | vs none | best final | regret | wall s |")
    print("|---|---|---|---|---|---|---|")
    for name, r in results.items():
        regret = oracle - r["best"]
        print(f"| {name} | {r['complete']:.0f} / {r['pruned']:.0f} | {r['steps']:.0f} | "
              f"{r['steps'] / base:.2f}x | {r['best']:.4f} | {regret:+.4f} | {r['wall']:.0f} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
