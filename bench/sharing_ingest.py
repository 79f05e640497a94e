"""What row-level security costs a writer on a shared PostgreSQL store (issue 40).

The store's administrator (it owns the tables) is exempt from the policies; a writer role pays a
policy check per written point (``scalerl_can_write_run``). Both write the same points through
the ordinary writer, alternately, into a throwaway server (tests/fixtures/postgres.py):

    python -m bench.sharing_ingest --points 200000 --reps 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _write(url: str, sweep: str, run_id: str, points: int) -> float:
    from scalerl import db
    from scalerl.db import RunRecord

    store = db.open_store(url)
    try:
        store.ensure_sweep(sweep, {})
        store.register_run(RunRecord(run_id, sweep, "baseline", 0, {"r": run_id}, "h"))
        attempt = store.start_attempt(run_id)
        start = time.perf_counter()
        with store.writer(run_id, attempt) as w:
            for step in range(points):
                w.add(step, {"val/pass_rate": 0.5}, {"flops": float(step + 1)})
        return time.perf_counter() - start
    finally:
        store.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", type=int, default=200_000)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    import psycopg
    from sqlalchemy.engine import make_url

    from scalerl import db
    from scalerl.harness.cli import main as cli
    from tests.fixtures.postgres import _start_managed

    server = _start_managed()
    try:
        admin = server.create_database()
        u = make_url(admin)
        who = {
            "host": u.host,
            "port": u.port,
            "user": u.username,
            "password": u.password,
            "dbname": u.database,
        }
        with psycopg.connect(**who, autocommit=True) as conn:
            conn.execute("CREATE ROLE writer LOGIN PASSWORD 'pw'")
        db.open_store(admin).close()
        assert cli(["db", "grant", "writer", admin, "--write"]) == 0
        writer = u.set(username="writer", password="pw").render_as_string(hide_password=False)
        times: dict[str, list[float]] = {"administrator (exempt)": [], "writer (row-level security)": []}
        for rep in range(args.reps):
            times["administrator (exempt)"].append(_write(admin, "admins", f"a{rep}-s0", args.points))
            times["writer (row-level security)"].append(_write(writer, "writers", f"w{rep}-s0", args.points))
        base = statistics.median(times["administrator (exempt)"])
        for who, seconds in times.items():
            med = statistics.median(seconds)
            print(f"{who:30} {args.points / med:10,.0f} points/s (median of {args.reps}: {med:.2f} s; "
                  f"x{med / base:.2f} the administrator's time)")  # fmt: skip
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
