"""The live view at a lab's scale: `scalerl ui` on 1,000 runs x 1,000 points, beside `scalerl report`
and optuna-dashboard on the same number of runs and points.

For each store (SQLite; PostgreSQL when a server can be had) it starts `scalerl ui` in a subprocess
and measures, in headless Chromium (tests/fixtures/chromium.py) and over HTTP:

- the first open right after the server starts (it may still be reading the sweep: a cold open);
- a warm open: navigation to the sweep page until the verdict table, the knob map, the curves and
  the runs table are drawn (median of ``--repeat``);
- a refresh when nothing changed, and a refresh after one running run logged 10 more points
  (time of the poll the page makes, and its bytes), beside the first load's bytes.

The fits are the ones `scalerl fit --boot 20` stored (the page opens on them), and the view runs
with ``--no-fit`` while it is timed: its own refit of 1,000 runs takes minutes in a worker
process and would compete for this 2-core machine's CPU (``--refit`` times one such refit).
Then `scalerl report` on the SQLite store (time, size, Chromium load), and optuna-dashboard on an
Optuna RDB storage (SQLite) holding 1,000 trials x 1,000 intermediate values (its study page and
its poll, ``/api/studies/ID?after=N``). Prints Markdown for bench/README.md ("Live view").

    .venv/bin/python -m bench.ui [--runs 1000] [--points 1000] [--reuse] [--no-postgres] [--no-report]
        [--no-optuna] [--refit]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.ui_store import METRIC, SWEEP, build_store
from tests.fixtures.chromium import ChromiumError, Tab, load_page, open_tab

ROOT = Path(__file__).resolve().parents[1]

READY = (
    "document.body.dataset.ready === '1'"
    " && document.querySelector('table.verdicts tr[data-verdict]') !== null"
    " && document.querySelector('#knob-map .main-svg') !== null"
    " && document.querySelector('#curves .main-svg .scatterlayer .trace') !== null"
    " && document.querySelectorAll('table.runs tr[data-run]').length > 0"
)


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> tuple[float, bytes]:
    t0 = time.perf_counter()
    with urllib.request.urlopen(url, timeout=600) as r:
        body = r.read()
    return time.perf_counter() - t0, body


@contextmanager
def serve(cmd: list[str], probe: str, log: Path) -> Iterator[tuple[str, float]]:
    """Run a web server; yields (its address, seconds until ``probe`` answered)."""
    port = _port()
    t0 = time.perf_counter()
    with log.open("w") as out:
        proc = subprocess.Popen([*cmd, "--port", str(port)], stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
    address = f"http://127.0.0.1:{port}"
    try:
        while True:
            try:
                _get(address + probe)
                break
            except OSError:
                if proc.poll() is not None or time.perf_counter() - t0 > 300:
                    raise SystemExit(f"{cmd[:3]} did not start: {log.read_text()[-2000:]}") from None
                time.sleep(0.1)
        yield address, time.perf_counter() - t0
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def open_ms(tab: Tab, url: str, ready: str, timeout: float = 300.0) -> float:
    """Milliseconds from navigation until ``ready`` holds (a page too busy to answer a probe is
    asked again until ``timeout``; then ChromiumError)."""
    t0 = time.perf_counter()
    tab.navigate(url, timeout)
    return until_ms(tab, ready, t0, timeout, url)


def until_ms(tab: Tab, ready: str, t0: float, timeout: float = 300.0, url: str = "the page") -> float:
    """Milliseconds from ``t0`` (``time.perf_counter()``) until ``ready`` holds in ``tab``."""
    while True:
        try:
            if tab.evaluate(ready, timeout=timeout):
                return 1000 * (time.perf_counter() - t0)
        except ChromiumError:
            pass
        if time.perf_counter() - t0 > timeout:
            raise ChromiumError(f"{url}: not drawn after {timeout:.0f} s")
        time.sleep(0.02)


def live_run(url: str) -> tuple[Any, str, int]:
    """A new running run in the sweep (the 1,001st), with its writer's store and attempt."""
    from scalerl import db
    from scalerl.db.records import RunRecord

    store = db.open_store(url)
    run_id = f"{SWEEP}-live-{int(time.time())}"
    store.register_run(RunRecord(run_id, SWEEP, "baseline", 10_000, {}, run_id[-16:]))
    return store, run_id, store.start_attempt(run_id, executor="local")


def bench_ui(url: str, backend: str, repeat: int, work: Path) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "scalerl.harness", "ui", "--db", url, "--no-fit", "--refresh", "1"]
    out: dict[str, Any] = {"backend": backend}
    with (
        serve(cmd, "/api/info", work / f"ui-{backend}.log") as (address, up_s),
        open_tab(width=1440, height=1000) as tab,
    ):
        out["server_up_s"] = up_s
        page = f"{address}/sweep?name={SWEEP}"
        t0 = time.perf_counter()
        tab.navigate(page, 300.0)
        out["cold_open_ms"] = until_ms(tab, READY, t0, url=page)
        # The first open draws each run from a sample (first, last, lowest, highest and evenly
        # spaced points); every point follows, drawn by the report's rule, without a reload.
        out["sampled"] = bool(tab.evaluate("document.querySelector('main p.meta').dataset.sampled === '1'"))
        full = "document.querySelector('main p.meta').dataset.sampled !== '1'"
        out["full_ms"] = until_ms(tab, full, t0, url=page) if out["sampled"] else out["cold_open_ms"]
        out["open_ms"] = statistics.median(open_ms(tab, page, READY) for _ in range(repeat))
        api = f"{address}/api/sweep?name={SWEEP}"
        t, body = _get(api + "&since=0")
        out["snapshot_ms"], out["snapshot_kb"] = 1000 * t, len(body) / 1e3
        seq = json.loads(body)["seq"]
        idle = [_get(f"{api}&since={seq}") for _ in range(10)]
        out["idle_ms"] = 1000 * statistics.median(t for t, _ in idle)
        out["idle_kb"] = len(idle[-1][1]) / 1e3
        store, run_id, attempt = live_run(url)
        step = 0
        writer = store.writer(run_id, attempt)
        for _ in range(10):
            writer.add(step, {METRIC: 0.1}, {"flops": 1e13 * (step + 1)})
            step += 1
        writer.flush()
        time.sleep(1.1)
        seq = json.loads(_get(f"{api}&since={seq}")[1])["seq"]  # the new run, read whole (10 points)
        times, sizes = [], []
        for _ in range(5):
            for _ in range(10):
                writer.add(step, {METRIC: 0.1 + step / 1e3}, {"flops": 1e13 * (step + 1)})
                step += 1
            writer.flush()
            time.sleep(1.1)  # past the view's refresh interval
            t, body = _get(f"{api}&since={seq}")
            got = json.loads(body)
            assert sum(len(c["x"]) for c in got["curves"]) == 10, got["curves"]
            seq = got["seq"]
            times.append(t)
            sizes.append(len(body))
        writer.close()
        store.finish_run(run_id, attempt, "completed")
        store.close()
        out["append_ms"] = 1000 * statistics.median(times)
        out["append_kb"] = statistics.median(sizes) / 1e3
        shot = work / f"ui-{backend}.png"
        tab.navigate(page)
        tab.wait_for(READY, timeout=300)
        shot.write_bytes(tab.screenshot())
        out["screenshot"] = str(shot)
    return out


def bench_refit(url: str, work: Path) -> float:
    """Seconds from the view's start until its own fit of every point (bootstrap 20) lands."""
    cmd = [sys.executable, "-m", "scalerl.harness", "ui", "--db", url, "--boot", "20", "--refresh", "1"]
    with serve(cmd, "/api/info", work / "ui-refit.log") as (address, up_s):
        t0 = time.perf_counter()
        api = f"{address}/api/sweep?name={SWEEP}"
        seq = json.loads(_get(api + "&since=0")[1])["seq"]
        while True:
            got = json.loads(_get(f"{api}&since={seq - 1}")[1])
            fit = got.get("fit") or {}
            if fit.get("source") == "live" or fit.get("error"):
                return time.perf_counter() - t0 + up_s
            time.sleep(2)


def bench_report(url: str, work: Path) -> dict[str, Any]:
    from scalerl.harness.cli import main as scalerl

    out = work / "report.html"
    t0 = time.perf_counter()
    if scalerl(["report", SWEEP, "--db", url, "-o", str(out)]) != 0:
        raise SystemExit("scalerl report failed")
    gen = time.perf_counter() - t0
    page = load_page(out, width=1440, timeout=600.0)
    return {"gen_s": gen, "mb": out.stat().st_size / 1e6, "load_ms": page.load_ms, "drawn_ms": page.drawn_ms,
            "plots": page.plots, "drawn": page.drawn}  # fmt: skip


def optuna_storage(path: Path, runs: int, points: int) -> tuple[str, float]:
    """An Optuna RDB storage with ``runs`` finished trials of ``points`` intermediate values.

    Trials, params and values go through Optuna's storage API; the intermediate values (the rows
    ``trial.report(value, step)`` writes) are inserted in bulk with SQLAlchemy Core, which takes
    a minute where a million ``report`` calls would take hours on this machine."""
    import numpy as np
    import optuna
    from sqlalchemy import create_engine, text

    from scalerl.harness.analysis.fit.curve import sigmoid_curve

    url = f"sqlite:///{path}"
    if path.exists():
        return url, float("nan")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = optuna.storages.RDBStorage(url)
    optuna.create_study(storage=storage, study_name=SWEEP, direction="maximize")
    study_id = storage.get_study_id_from_name(SWEEP)
    rng = np.random.default_rng(0)
    flops = np.geomspace(1e13, 3e16, points)
    dist = optuna.distributions.IntDistribution(0, 99)
    engine = create_engine(url)
    insert = text(
        "INSERT INTO trial_intermediate_values (trial_id, step, intermediate_value, intermediate_value_type) "
        "VALUES (:t, :s, :v, 'FINITE')"
    )
    t0 = time.perf_counter()
    for r in range(runs):
        v = r // max(runs // 100, 1)
        noise = rng.normal(0, 0.019, points)
        values = sigmoid_curve(flops, 0.05, 0.6 - 0.0004 * v, 1.4 - 0.002 * v, 1e15) + noise
        trial_id = storage.create_new_trial(study_id)
        storage.set_trial_param(trial_id, "variant", float(v), dist)
        with engine.begin() as conn:
            conn.execute(insert, [{"t": trial_id, "s": i, "v": float(x)} for i, x in enumerate(values)])
        storage.set_trial_state_values(trial_id, optuna.trial.TrialState.COMPLETE, [float(values[-1])])
    engine.dispose()
    return url, time.perf_counter() - t0


def bench_optuna_dashboard(url: str, repeat: int, work: Path) -> dict[str, Any]:
    exe = shutil.which("optuna-dashboard", path=str(Path(sys.executable).parent))
    if exe is None:
        return {"error": "optuna-dashboard is not installed (pip install optuna-dashboard)"}
    ready = "document.querySelectorAll('.js-plotly-plot .main-svg .scatterlayer .trace').length >= 1"
    out: dict[str, Any] = {}
    log = work / "optuna-dashboard.log"
    with serve([exe, url, "--host", "127.0.0.1"], "/api/studies", log) as (address, up), open_tab() as tab:
        out["server_up_s"] = up
        page = f"{address}/dashboard/studies/1"
        try:
            # One warm load after the first: each takes minutes at this size.
            out["cold_open_ms"] = open_ms(tab, page, ready, timeout=900.0)
            out["open_ms"] = open_ms(tab, page, ready, timeout=900.0)
        except ChromiumError as err:  # not drawn in 10 minutes: say so in the table
            out["cold_open_ms"] = out["open_ms"] = float("nan")
            out["error_open"] = str(err)
        t, body = _get(f"{address}/api/studies/1")
        out["snapshot_ms"], out["snapshot_kb"] = 1000 * t, len(body) / 1e3
        n = len(json.loads(body)["trials"])
        polls = [_get(f"{address}/api/studies/1?after={n}") for _ in range(10)]
        out["idle_ms"] = 1000 * statistics.median(t for t, _ in polls)
        out["idle_kb"] = len(polls[-1][1]) / 1e3
        shot = work / "optuna-dashboard.png"
        shot.write_bytes(tab.screenshot())
        out["screenshot"] = str(shot)
    return out


@contextmanager
def postgres_url(enabled: bool) -> Iterator[str | None]:
    if not enabled:
        yield None
        return
    from bench.ingest import postgres

    with postgres() as new_db:
        yield None if new_db is None else new_db()


def copy_fits(src: str, dst: str) -> None:
    """The fits and verdicts `scalerl fit` stored at ``src``, stored at ``dst`` too."""
    from scalerl import db
    from scalerl.db import queries

    a, b = db.open_store(src, create=False, readonly=True), db.open_store(dst, create=False)
    fits, verdicts = queries.fits(a, SWEEP), queries.verdicts(a, SWEEP)
    kw = {"metric": METRIC, "axis": "flops"}

    def rows(frame: Any) -> list[dict[str, Any]]:
        return [
            {str(k): v for k, v in r.items()}
            for r in frame.drop(columns=["metric", "axis"]).to_dict("records")
        ]

    b.replace_fits(SWEEP, rows(fits), **kw)
    b.replace_verdicts(SWEEP, rows(verdicts), **kw)
    a.close()
    b.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--points", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workdir", type=Path, default=ROOT / "bench/.work/ui")
    ap.add_argument("--reuse", action="store_true", help="keep the stores already in --workdir")
    ap.add_argument("--no-postgres", action="store_true")
    ap.add_argument("--no-report", action="store_true")
    ap.add_argument("--no-optuna", action="store_true", help="skip optuna-dashboard (its open takes minutes)")
    ap.add_argument("--refit", action="store_true", help="also time the view's own refit (minutes)")
    args = ap.parse_args()
    work = args.workdir
    sqlite = f"sqlite:///{work / 'ui.db'}"
    if not (args.reuse and (work / "ui.db").exists()):
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        print(f"store written in {build_store(sqlite, args.runs, args.points):.0f} s")
    from scalerl import db
    from scalerl.db import queries

    probe = db.open_store(sqlite, create=False, readonly=True)
    if queries.verdicts(probe, SWEEP).empty:
        t0 = time.perf_counter()
        from scalerl.harness.cli import main as scalerl

        if scalerl(["fit", SWEEP, "--db", sqlite, "--boot", "20"]) != 0:
            raise SystemExit("scalerl fit failed")
        print(f"scalerl fit --boot 20: {time.perf_counter() - t0:.0f} s")
    probe.close()
    # Each part's numbers are kept in results.json as it ends: --reuse skips the parts already there.
    saved = work / "results.json"
    results: dict[str, Any] = json.loads(saved.read_text()) if args.reuse and saved.exists() else {}

    def part(key: str, fn: Any) -> Any:
        if key not in results:
            results[key] = fn()
            saved.write_text(json.dumps(results, indent=1))
        return results[key]

    rows = [part("ui-sqlite", lambda: bench_ui(sqlite, "sqlite", args.repeat, work))]
    if not args.no_postgres and "ui-postgresql" not in results:
        with postgres_url(True) as pg:
            if pg is not None:
                print(f"PostgreSQL store written in {build_store(pg, args.runs, args.points):.0f} s")
                copy_fits(sqlite, pg)
                part("ui-postgresql", lambda: bench_ui(pg, "postgresql", args.repeat, work))
    if "ui-postgresql" in results:
        rows.append(results["ui-postgresql"])
    report = None if args.no_report else part("report", lambda: bench_report(sqlite, work))
    dash, opt_s = None, float("nan")
    if not args.no_optuna:
        opt_url, opt_s = optuna_storage(work / "optuna.db", args.runs, args.points)
        dash = part("optuna-dashboard", lambda: bench_optuna_dashboard(opt_url, args.repeat, work))
    refit = part("refit", lambda: bench_refit(sqlite, work)) if args.refit else None

    machine = platform.processor() or platform.machine()
    print(f"\n{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.node()}, {machine}, {os.cpu_count()} cores; "
          f"{args.runs} runs x {args.points} points")  # fmt: skip
    print("\n| tool (store) | server up (s) | first open (ms) | open (ms) | first load (kB) | "
          "poll, nothing new (ms / kB) | poll, 10 new points (ms / kB) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| `scalerl ui` ({r['backend']}) | {r['server_up_s']:.1f} | {r['cold_open_ms']:.0f} | "
              f"{r['open_ms']:.0f} | {r['snapshot_kb']:.0f} | {r['idle_ms']:.0f} / {r['idle_kb']:.2f} | "
              f"{r['append_ms']:.0f} / {r['append_kb']:.2f} |")  # fmt: skip
    if dash is None:
        pass
    elif "error" in dash:
        print(f"| optuna-dashboard | {dash['error']} |")
    else:
        print(f"| optuna-dashboard (sqlite) | {dash['server_up_s']:.1f} | {dash['cold_open_ms']:.0f} | "
              f"{dash['open_ms']:.0f} | {dash['snapshot_kb']:.0f} | "
              f"{dash['idle_ms']:.0f} / {dash['idle_kb']:.2f} | – |")  # fmt: skip
    if report is not None:
        print(f"| `scalerl report` (sqlite, a file) | {report['gen_s']:.1f} (writing it) | – | "
              f"{report['drawn_ms']:.0f} ({report['drawn']}/{report['plots']} figures) | "
              f"{1000 * report['mb']:.0f} | – (no updates) | – |")  # fmt: skip
    if refit is not None:
        print(f"\nthe view's own refit of every point (bootstrap 20), from its start: {refit:.0f} s")
    if opt_s == opt_s:
        print(f"optuna storage written in {opt_s:.0f} s")
    for r in rows:
        if "full_ms" in r:
            drew = "a sample of each run" if r["sampled"] else "every point"
            print(f"`scalerl ui` ({r['backend']}): the first open drew {drew}; every point drawn "
                  f"{r['full_ms']:.0f} ms after it was asked for")  # fmt: skip
    for r in rows:
        print(f"screenshot: {r['screenshot']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
