"""Ingest and query benchmark: this store vs MLflow's SQL tracking store vs Optuna's RDB storage.

The same synthetic curves (runs x steps x 3 metrics, with compute) are written by:

- this store: one ``PointWriter`` per run (background batched Core upserts, fenced);
- MLflow: ``MlflowClient.log_batch`` (1,000 metrics per call, MLflow's maximum) into a
  ``sqlite:///`` or ``postgresql`` tracking URI;
- Optuna: ``RDBStorage`` with one trial per run, ``trial.report(value, step)`` per step (Optuna
  keeps one intermediate value per step, so it gets one metric per step);

on SQLite and on PostgreSQL (a throwaway server started like the test fixture, or
``$SCALERL_TEST_PG_URL``). Then a sweep's points are read into a DataFrame by ``scalerl.db.curves``
versus MLflow's ``get_metric_history`` (one call per run and metric).

MLflow and Optuna are far slower, so they write ``--baseline-runs`` runs of at most
``--baseline-steps`` steps; their rate is per point and the full-size time is extrapolated from
it (said so in the output). Usage::

    .venv/bin/python -m bench.ingest                 # 100 runs x 10,000 steps x 3 metrics
    .venv/bin/python -m bench.ingest --scale 0.1     # 10x fewer steps
    .venv/bin/python -m bench.ingest --no-postgres
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

METRICS = ("val/pass_rate", "train/reward", "train/entropy")
WARM_READS = 5


@dataclass(frozen=True)
class Result:
    tool: str
    backend: str
    what: str
    points: int
    seconds: float
    extrapolated: bool = False

    @property
    def rate(self) -> float:
        return self.points / self.seconds if self.seconds > 0 else float("inf")


def _value(run: int, step: int, m: int) -> float:
    return 0.2 + 0.5 * step / (step + 500.0) + 0.001 * run + 0.01 * m


def bench_ours(url: str, backend: str, runs: int, steps: int, tmp: Path) -> tuple[Result, Result, Result]:
    from scalerl import db

    store = db.open_store(url, spool_dir=tmp / "spool")
    store.ensure_sweep("bench", {})
    for r in range(runs):
        store.register_run(db.RunRecord(f"run{r:04d}", "bench", f"v{r % 8}", r // 8, {}, "h"))
    attempts = {f"run{r:04d}": store.start_attempt(f"run{r:04d}") for r in range(runs)}
    t0 = time.perf_counter()
    for r in range(runs):
        w = store.writer(f"run{r:04d}", attempts[f"run{r:04d}"])
        for s in range(steps):
            w.add(s, {k: _value(r, s, i) for i, k in enumerate(METRICS)},
                  {"gpu_hours": s * 1e-3, "flops": s * 1e12, "tokens": s * 4096.0, "samples": s * 64.0,
                   "wall_s": s * 3.6})  # fmt: skip
        w.close()
    write = Result(
        "scalerl-harness", backend, "ingest", runs * steps * len(METRICS), time.perf_counter() - t0
    )
    store.close()
    store = db.open_store(url)  # a fresh process-like start: first query pays any warm-up
    t0 = time.perf_counter()
    df = db.curves(store, "bench")
    cold = Result("scalerl-harness", backend, "read (first query)", len(df), time.perf_counter() - t0)
    times = []
    for _ in range(WARM_READS):  # a shared machine: one read is noise, the median is the number
        t0 = time.perf_counter()
        df = db.curves(store, "bench")
        times.append(time.perf_counter() - t0)
    warm = Result(
        "scalerl-harness", backend, f"read (median of {WARM_READS})", len(df), statistics.median(times)
    )
    assert len(df) == write.points, (len(df), write.points)
    store.close()
    return write, cold, warm


def bench_mlflow(uri: str, backend: str, runs: int, steps: int) -> tuple[Result, Result]:
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.create_experiment(f"bench-{time.time_ns()}")
    run_ids = [client.create_run(exp).info.run_id for _ in range(runs)]
    t0 = time.perf_counter()
    now = int(time.time() * 1000)
    for r, run_id in enumerate(run_ids):
        batch: list[Metric] = []
        for s in range(steps):
            batch.extend(Metric(k, _value(r, s, i), now + s, s) for i, k in enumerate(METRICS))
            if len(batch) >= 999:
                client.log_batch(run_id, metrics=batch)
                batch = []
        if batch:
            client.log_batch(run_id, metrics=batch)
    write = Result("MLflow", backend, "ingest", runs * steps * len(METRICS), time.perf_counter() - t0, True)
    t0 = time.perf_counter()
    n = sum(len(client.get_metric_history(run_id, k)) for run_id in run_ids for k in METRICS)
    read = Result("MLflow", backend, "read", n, time.perf_counter() - t0, True)
    assert n == write.points
    return write, read


def bench_optuna(url: str, backend: str, runs: int, steps: int) -> Result:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = optuna.storages.RDBStorage(url)
    study = optuna.create_study(storage=storage, study_name=f"bench-{time.time_ns()}")
    t0 = time.perf_counter()
    for r in range(runs):
        trial = study.ask()
        for s in range(steps):
            trial.report(_value(r, s, 0), s)
    return Result("Optuna", backend, "ingest", runs * steps, time.perf_counter() - t0, True)


@contextmanager
def postgres() -> Iterator[Callable[[], str] | None]:
    """Yields a factory of fresh empty database URLs, or None when no server can be had."""
    external = os.environ.get("SCALERL_TEST_PG_URL")
    from tests.fixtures.postgres import PgServer, _start_managed

    if external:
        server = PgServer(external, False, None)
        yield server.create_database
        return
    try:
        server = _start_managed()
    except BaseException as err:  # pytest's skip/fail outside pytest: no server here
        print(f"PostgreSQL unavailable ({err}); skipping its rows")
        yield None
        return
    try:
        yield server.create_database
    finally:
        server.stop()
        assert server.root is not None
        shutil.rmtree(server.root, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--scale", type=float, default=1.0, help="multiply --steps by this")
    ap.add_argument("--baseline-runs", type=int, default=2, help="runs written by MLflow / Optuna")
    ap.add_argument("--baseline-steps", type=int, default=1_000, help="max steps per MLflow / Optuna run")
    ap.add_argument("--no-postgres", action="store_true")
    args = ap.parse_args()
    steps = max(1, int(args.steps * args.scale))
    b_runs, b_steps = min(args.runs, args.baseline_runs), min(steps, args.baseline_steps)
    tmp = Path(tempfile.mkdtemp(prefix="scalerl-bench-"))
    results: list[Result] = []
    try:
        results += bench_ours(f"sqlite:///{tmp / 'ours.db'}", "SQLite", args.runs, steps, tmp)
        results += bench_mlflow(f"sqlite:///{tmp / 'mlflow.db'}", "SQLite", b_runs, b_steps)
        results.append(bench_optuna(f"sqlite:///{tmp / 'optuna.db'}", "SQLite", b_runs, b_steps))
        if not args.no_postgres:
            with postgres() as new_db:
                if new_db is not None:
                    results += bench_ours(new_db(), "PostgreSQL", args.runs, steps, tmp)
                    results += bench_mlflow(new_db(), "PostgreSQL", b_runs, b_steps)
                    results.append(bench_optuna(new_db(), "PostgreSQL", b_runs, b_steps))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    _report(results, args.runs, steps)


def _report(results: list[Result], runs: int, steps: int) -> None:
    full = runs * steps * len(METRICS)
    print(f"\n{runs} runs x {steps} steps x {len(METRICS)} metrics = {full:,} points (ours)")
    print("| tool | backend | what | points measured | seconds | points/s | ours / tool |")
    print("|---|---|---|---:|---:|---:|---:|")
    for r in results:
        ours = next(
            (o for o in results if o.tool == "scalerl-harness" and o.backend == r.backend
             and o.what.startswith("ingest" if r.what == "ingest" else "read (median")),
            None,
        )  # fmt: skip
        ratio = f"{ours.rate / r.rate:.0f}x" if ours is not None and r.tool != "scalerl-harness" else ""
        note = " (subset; rate per point)" if r.extrapolated else ""
        print(
            f"| {r.tool} | {r.backend} | {r.what}{note} | {r.points:,} | {r.seconds:.2f} "
            f"| {r.rate:,.0f} | {ratio} |"
        )
    for r in results:
        if r.extrapolated and r.what == "read":
            print(f"{r.tool} {r.backend}: reading {full:,} points extrapolates to {full / r.rate:.0f} s")


if __name__ == "__main__":
    main()
