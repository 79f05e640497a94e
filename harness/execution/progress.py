"""The progress display of ``scalerl sweep --wait`` and the local executor: runs done, points,
the latest value of the fit metric per run. Reads only the store, so it follows runs on any
executor; on a terminal it redraws in place, otherwise it prints a line when something changed.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

QUIET_LINE_S = 30.0


@dataclass(frozen=True)
class Snapshot:
    total: int
    completed: int
    failed: int
    cancelled: int
    running: int
    points: int
    table: str
    stopped: int = 0  # pruned by a search, or stopped once its verdict was decided

    @property
    def done(self) -> bool:
        return self.completed + self.failed + self.cancelled + self.stopped >= self.total

    def counts(self) -> str:
        return f"{self.completed}/{self.running}/{self.failed}/{self.cancelled}/{self.stopped}/{self.total}"

    def headline(self) -> str:
        pending = self.total - self.completed - self.failed - self.cancelled - self.stopped - self.running
        return (
            f"{self.completed}/{self.total} done, {self.running} running, {pending} waiting, "
            f"{self.failed} failed"
            + (f", {self.cancelled} cancelled" if self.cancelled else "")
            + (f", {self.stopped} stopped early" if self.stopped else "")
            + f"; {self.points} points"
        )


def snapshot(store: Any, sweep: str, metric: str = "val/pass_rate") -> Snapshot:
    from scalerl.db import queries

    runs = queries.runs(store, sweep)
    curves = queries.curves(store, sweep, metric=metric)
    latest: dict[str, tuple[int, float]] = {}
    if not curves.empty:
        by_run = curves.sort_values("step").groupby("run_id", observed=True)
        last: list[dict[Any, Any]] = by_run.tail(1).to_dict("records")
        latest = {str(r["run_id"]): (int(r["step"]), float(r["value"])) for r in last}
    records: list[dict[Any, Any]] = runs.to_dict("records")
    lines = [f"  {'variant':<28} {'seed':>4} {'status':<10} {'att':>3} {'step':>6} {metric}"]
    for r in records:
        step, value = latest.get(str(r["run_id"]), (None, None))
        shown_step = "-" if step is None else str(step)
        shown_value = "-" if value is None else f"{value:.4f}"
        lines.append(
            f"  {str(r['variant'])[:28]:<28} {int(r['seed']):>4} {str(r['status'])[:10]:<10} "
            f"{int(r['attempts']):>3} {shown_step:>6} {shown_value}"
        )
    status = [str(r["status"]) for r in records]
    return Snapshot(
        total=len(runs),
        completed=int(sum(s == "completed" for s in status)),
        failed=int(sum(s == "failed" for s in status)),
        cancelled=int(sum(s == "cancelled" for s in status)),
        running=int(sum(s == "running" for s in status)),
        stopped=int(sum(s in ("pruned", "stopped-decided") for s in status)),
        points=sum(int(r["n_points"] or 0) for r in records),
        table="\n".join(lines),
    )


def follow(
    store: Any,
    sweep: str,
    *,
    metric: str = "val/pass_rate",
    interval_s: float = 2.0,
    timeout_s: float | None = None,
    out: TextIO = sys.stdout,
    before_tick: Callable[[], object] | None = None,
) -> Snapshot:
    """Print progress until every run is completed or failed (or ``timeout_s``); returns the last
    snapshot. ``before_tick`` runs first on each tick (the CLI syncs job states there, so a killed
    job shows up as failed instead of running forever)."""
    tty = out.isatty()
    start = time.monotonic()
    shown = ""
    last_line = 0.0
    while True:
        if before_tick is not None:
            before_tick()
        snap = snapshot(store, sweep, metric)
        text = f"[{time.strftime('%H:%M:%S')}] {snap.headline()}\n{snap.table}"
        if tty:
            out.write("\x1b[H\x1b[2J" + text + "\n")
        elif snap.counts() != shown or time.monotonic() - last_line > QUIET_LINE_S:
            # Not a terminal (a log, CI): a line when a run starts or ends, else every 30 s.
            out.write(f"[{time.strftime('%H:%M:%S')}] {snap.headline()}\n")
            last_line = time.monotonic()
        shown = snap.counts()
        out.flush()
        if snap.done or (timeout_s is not None and time.monotonic() - start > timeout_s):
            if not tty:
                out.write(snap.table + "\n")
            return snap
        time.sleep(interval_s)


class Throttle:
    """Call ``fn`` at most every ``every_s`` seconds (the first call always runs)."""

    def __init__(self, fn: Callable[[], object], every_s: float) -> None:
        self.fn, self.every_s, self.last = fn, every_s, float("-inf")

    def __call__(self) -> None:
        now = time.monotonic()
        if now - self.last >= self.every_s:
            self.last = now
            self.fn()


def wait_tick(
    store: Any,
    sweep: str,
    *,
    every_s: float,
    stop_when: str = "never",
    confidence: float = 0.95,
    say: Callable[[str], object] = print,
) -> Callable[[], None]:
    """What ``scalerl sweep --wait`` (and ``scalerl.harness.Sweep.wait``) does before each progress read:
    sync job states into the store at most every ``every_s`` (the scheduler is shared; the store
    is ours to read every couple of seconds) and, with ``stop_when == "decided"``, stop the runs
    of variants whose verdict is decided (:class:`scalerl.harness.execution.decide.DecideMonitor`);
    with ``"settled"``, also those more compute cannot decide."""
    from scalerl.harness.execution.status import sync

    scheduler = Throttle(lambda: sync(store, sweep), every_s)
    if stop_when not in ("decided", "settled"):
        return scheduler
    from scalerl.harness.execution.decide import DecideMonitor

    monitor = DecideMonitor(store, sweep, confidence=confidence, say=say, settle=stop_when == "settled")

    def sync_and_decide() -> None:
        scheduler()
        monitor()

    return sync_and_decide
