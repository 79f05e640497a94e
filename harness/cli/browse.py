"""``scalerl ls`` (the store's sweeps) and ``scalerl logs RUN`` (a run's job log)."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from scalerl.harness.argtypes import non_negative_int, real
from scalerl.harness.cli.output import emit

LINGER_S = 120.0  # `logs -f`: how long a job may go on writing after its run ended
_DB_HELP = "store URL (default: $SCALERL_DB_URL, else sqlite:///./scalerl.db)"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "ls",
        help="list the store's sweeps: when made, where from, their runs by status",
        description="One line per sweep of the store: its name, source (recipe: `scalerl sweep`; "
        "import: `scalerl import`; attach: runs that registered with scalerl.harness.client.init; "
        "train: `scalerl train`), when it was created, and its runs counted by status "
        "(waiting: pending, submitted, queued or requeued; stopped: cancelled, pruned or stopped "
        "once decided). Reads the store only; never creates one.",
    )
    p.add_argument("--db", metavar="URL", help=_DB_HELP)
    p.set_defaults(func=_ls)

    lg = sub.add_parser(
        "logs",
        help="print a run's job log (local or Slurm executor)",
        description="Print the log of RUN's latest job: a local run's stdout and stderr "
        "(<state>/local/logs/RUN.log), or a Slurm job's submitit .out and .err files. RUN is a run "
        "id or a unique prefix of one (as git takes a short hash).",
    )
    lg.add_argument("run", metavar="RUN", help="run id, or a unique prefix of one")
    lg.add_argument("--tail", type=non_negative_int, metavar="N", help="only the last N lines of each file")
    lg.add_argument(
        "-f", "--follow", action="store_true", help="keep printing what the job appends until the run ends"
    )
    lg.add_argument(
        "--poll-s",
        type=real(0.0, 3600.0, lo_open=True),
        default=1.0,
        help="with --follow: read every S seconds",
    )
    lg.add_argument("--db", metavar="URL", help=_DB_HELP)
    lg.set_defaults(func=_logs)


def _ls(args: argparse.Namespace) -> int:
    from scalerl import db
    from scalerl.db import queries
    from scalerl.db.engine import redact, resolve_url

    where = redact(resolve_url(args.db))
    store = db.open_store(args.db, readonly=True)  # a listing never writes, nor creates a store
    try:
        frame = queries.sweep_summaries(store)
    finally:
        store.close()
    groups = list(queries.STATUS_GROUPS)
    rows: list[dict[str, Any]] = [
        {
            "name": str(r["name"]),
            "source": queries.sweep_source(r["spec"] or {}),
            "created_at": _iso(r["created_at"]),
            "last_event": _iso(r["last_event"]),
            "runs": int(r["n_runs"]),
            **{g: int(r[g]) for g in groups},
        }
        for r in frame.to_dict("records")
    ]
    if args.json:
        emit({"store": where, "sweeps": rows})
        return 0
    if not rows:
        print(
            f"store {where}: no sweeps yet (`scalerl sweep SWEEP.yaml` or "
            "`scalerl import ... --sweep NAME` makes one)"
        )
        return 0
    header = ["sweep", "source", "created", "last event", "runs", *groups]
    table = [header] + [
        [r["name"], r["source"], _short(r["created_at"]), _short(r["last_event"])]
        + [str(r[k]) for k in ("runs", *groups)]
        for r in rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        print(
            "  ".join(
                c.rjust(w) if i >= 4 else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))
            ).rstrip()
        )
    return 0


def _iso(value: Any) -> str | None:
    if value is None or value != value:  # None or NaT
        return None
    return str(value.isoformat()) if hasattr(value, "isoformat") else str(value)


def _short(iso: str | None) -> str:
    """``2026-11-26T03:10:40.5+00:00`` -> ``2026-11-26 03:10`` (the store keeps UTC)."""
    return "-" if iso is None else iso[:16].replace("T", " ")


def _logs(args: argparse.Namespace) -> int:
    from scalerl import db
    from scalerl.harness.errors import ConfigError
    from scalerl.harness.execution.logs import read_from, resolve_run, run_logs, tail_start

    if args.follow and args.json:
        raise ConfigError(
            "--follow streams; --json prints one document", field="--follow", fix="drop one of the two"
        )
    store = db.open_store(args.db, readonly=True)
    try:
        run_id = resolve_run(store, args.run)
        logs = run_logs(store, run_id)
        offsets = {p: tail_start(p, args.tail) if args.tail is not None else 0 for p in logs.files}
        if args.json:
            files = [{"path": str(p), "text": b"".join(read_from(p, offsets[p])).decode(errors="replace")}
                     for p in logs.files]  # fmt: skip
            emit({"run_id": run_id, "executor": logs.executor, "job_id": logs.job_id, "files": files})
            return 0
        out = sys.stdout
        several = len(logs.files) > 1
        for p in logs.files:
            if several:
                out.write(f"==> {p} <==\n")
            offsets[p] = _copy(p, offsets[p], out)
        if args.follow:
            _follow(store, logs, offsets, out, args.poll_s, last=logs.files[-1] if several else None)
    finally:
        store.close()
    return 0


def _copy(path: Any, offset: int, out: Any) -> int:
    """Write ``path`` from ``offset`` to its end on ``out``; returns the new offset."""
    from scalerl.harness.execution.logs import read_from

    for chunk in read_from(path, offset):
        out.write(chunk.decode(errors="replace"))
        offset += len(chunk)
    out.flush()
    return offset


def _follow(
    store: Any, logs: Any, offsets: dict[Any, int], out: Any, poll_s: float, *, last: Any = None
) -> None:
    """``tail -f`` until the run has ended in the store and its job has exited (a job writes its
    last lines after the store says the run ended: a cancel is recorded before the job stops),
    then one last read; or Ctrl-C. A job that outlives its run by LINGER_S is left to itself.
    With several files (``last``: the one printed last), new lines under another file's name get
    that file's ``==> path <==`` header first, as ``tail -f`` does."""
    from scalerl.harness.execution.logs import size
    from scalerl.harness.execution.status import TERMINAL

    def read_all() -> None:
        nonlocal last
        for p, at in offsets.items():
            if size(p) < at:  # truncated or replaced: start over, as tail -F does
                at = 0
            if last is not None and p != last and size(p) > at:
                out.write(f"\n==> {p} <==\n")
                last = p
            offsets[p] = _copy(p, at, out)

    ended_at: float | None = None
    while True:
        read_all()
        if ended_at is None:
            info = store.get_run(logs.run_id)
            if info is None or info.status in TERMINAL:
                ended_at = time.monotonic()
        if ended_at is not None and (not logs.job_alive() or time.monotonic() - ended_at > LINGER_S):
            read_all()
            return
        time.sleep(poll_s)
