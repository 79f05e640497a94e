"""Report at lab scale: 100 runs x 10,000 points, downsampled for display, against the naive page.

Builds a SQLite store through the real writer (10 variants x 10 seeds, Eq. 1 curves with noise),
stores its fits once (``scalerl fit``), then writes the report twice: as shipped (at most 400
drawn points per run) and with downsampling effectively off (every point drawn). For each it
measures the `scalerl report` wall time, the file size, and, in headless Chromium, the time to the
load event and to every figure drawn. A page holding only plotly.js and one tiny figure gives the
floor that any offline Plotly page pays. Prints a Markdown table for bench/README.md.

    .venv/bin/python bench/report_scale.py [--runs 100] [--points 10000] [--workdir bench/.work/report]
"""

from __future__ import annotations

import argparse
import platform
import shutil
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

# The Chromium driver lives with the test fixtures; bench scripts run from the repo root.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scalerl.harness.analysis.fit.curve import sigmoid_curve
from scalerl.harness.cli import main as scalerl
from tests.fixtures.chromium import PageResult, load_page

SWEEP = "scale"
METRIC = "val/pass_rate"


def build_store(url: str, runs: int, points: int) -> float:
    from scalerl import db
    from scalerl.db.records import RunRecord

    store = db.open_store(url)
    store.ensure_sweep(SWEEP, {"design": "loo"})
    rng = np.random.default_rng(0)
    flops = np.geomspace(1e13, 3e16, points)
    seeds = 10
    t0 = time.perf_counter()
    for r in range(runs):
        v, seed = divmod(r, seeds)
        variant = "baseline" if v == 0 else f"loo-knob{v}"
        a, b = 0.6 - 0.012 * v, 1.4 - 0.05 * v
        run_id = f"{SWEEP}-{variant}-s{seed}"
        store.register_run(RunRecord(run_id=run_id, sweep=SWEEP, variant=variant, seed=seed, config={},
                                     config_hash=f"{r:016x}", knob=None if v == 0 else f"knob{v}",
                                     alternative=None if v == 0 else "alt"))  # fmt: skip
        attempt = store.start_attempt(run_id, executor="debug")
        values = sigmoid_curve(flops, 0.05, a, b, 1e15) + rng.normal(0, 0.01, points)
        writer = store.writer(run_id, attempt)
        for step in range(points):
            writer.add(step, {METRIC: float(values[step])}, {"flops": float(flops[step])})
        writer.close()
        store.finish_run(run_id, attempt, "completed")
    return time.perf_counter() - t0


def timed_report(url: str, out: Path, max_points: int) -> float:
    t0 = time.perf_counter()
    rc = scalerl(
        ["report", SWEEP, "-o", str(out), "--db", url, "--axis", "flops", "--max-points", str(max_points)]
    )
    if rc != 0:
        raise SystemExit(f"scalerl report failed with exit code {rc}")
    return time.perf_counter() - t0


def median_load(path: Path, repeat: int) -> tuple[PageResult, float, float]:
    results = [load_page(path, timeout=180.0) for _ in range(repeat)]
    for r in results:
        if r.errors or r.drawn != r.plots:
            raise SystemExit(f"{path}: not fully drawn ({r.drawn}/{r.plots}) or errors: {r.errors}")
    return (
        results[0],
        float(np.median([r.load_ms for r in results])),
        float(np.median([r.drawn_ms for r in results])),
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--points", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3, help="browser loads per page (median reported)")
    ap.add_argument("--boot", type=int, default=20, help="bootstrap replicates for the stored fits")
    ap.add_argument("--workdir", type=Path, default=Path("bench/.work/report"))
    ap.add_argument("--reuse", action="store_true", help="keep the store and fits already in --workdir")
    args = ap.parse_args()
    url = f"sqlite:///{args.workdir / 'scale.db'}"
    write_s = fit_s = float("nan")
    if not (args.reuse and (args.workdir / "scale.db").exists()):
        shutil.rmtree(args.workdir, ignore_errors=True)
        args.workdir.mkdir(parents=True)
        write_s = build_store(url, args.runs, args.points)
        t0 = time.perf_counter()
        if scalerl(["fit", SWEEP, "--db", url, "--axis", "flops", "--boot", str(args.boot)]) != 0:
            raise SystemExit("scalerl fit failed")
        fit_s = time.perf_counter() - t0

    import plotly.graph_objects as go
    import plotly.io as pio

    floor = args.workdir / "plotly-floor.html"
    floor.write_text(pio.to_html(go.Figure(go.Scatter(x=[1, 2], y=[1, 2])), include_plotlyjs=True))
    rows = []
    for label, max_points in (
        ("report (<=400 drawn points/run)", 400),
        ("naive (every point drawn)", args.points),
    ):
        out = args.workdir / f"report-{max_points}.html"
        gen_s = timed_report(url, out, max_points)
        page, load_ms, drawn_ms = median_load(out, args.repeat)
        rows.append((label, gen_s, out.stat().st_size / 1e6, load_ms, drawn_ms, page.paths))
    _, floor_load, floor_drawn = median_load(floor, args.repeat)
    rows.append(("plotly.js + one tiny figure (floor)", float("nan"), floor.stat().st_size / 1e6, floor_load,
                 floor_drawn, 0))  # fmt: skip

    print(f"\n{args.runs} runs x {args.points} points ({args.runs * args.points:,} points); "
          f"store written in {write_s:.1f} s, `scalerl fit --boot {args.boot}` {fit_s:.1f} s")  # fmt: skip
    machine = platform.processor() or platform.machine()
    print(f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.node()}, {machine}\n")
    print("| page | `scalerl report` (s) | file (MB) | Chromium load event (ms) | all figures drawn (ms) |")
    print("|---|---|---|---|---|")
    for label, gen_s, mb, load_ms, drawn_ms, _paths in rows:
        gen = "–" if gen_s != gen_s else f"{gen_s:.1f}"
        print(f"| {label} | {gen} | {mb:.1f} | {load_ms:.0f} | {drawn_ms:.0f} |")
    small, naive = rows[0], rows[1]
    print(f"\nratios naive/report: file {naive[2] / small[2]:.1f}x, all drawn {naive[4] / small[4]:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
