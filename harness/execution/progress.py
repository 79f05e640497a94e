"""The progress display of ``scalerl sweep --wait`` and the local executor: runs done, points,
the latest value of the fit metric per run. Reads the store, so it follows runs on any executor
(plus, for local runs waiting on machine-wide slots, who holds them). On a terminal it redraws
one region in place with ``rich.live`` (cursor moves, never a screen clear: a terminal's or
tmux's scrollback keeps what was printed above it and the final table, not a frame every 2 s);
otherwise (a log file, CI, a pipe) it prints a line only when something changed, or every 30 s.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

QUIET_LINE_S = 30.0
NOTE_S = 10.0  # how often the progress asks again who holds the local slots its runs wait for


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

    @property
    def waiting(self) -> int:
        """Runs neither ended nor running: queued, submitted, pending."""
        ended = self.completed + self.failed + self.cancelled + self.stopped
        return max(0, self.total - ended - self.running)

    def as_dict(self) -> dict[str, int]:
        """The counts, as ``scalerl status --json`` and ``sweep --wait --json`` print them."""
        keys = ("total", "completed", "running", "failed", "cancelled", "stopped", "waiting", "points")
        return {k: int(getattr(self, k)) for k in keys}

    def counts(self) -> str:
        return f"{self.completed}/{self.running}/{self.failed}/{self.cancelled}/{self.stopped}/{self.total}"

    def headline(self) -> str:
        return (
            f"{self.completed}/{self.total} done, {self.running} running, {self.waiting} waiting, "
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


class Display:
    """Where progress goes, chosen once from ``out``: a ``rich.live.Live`` region on a terminal
    (no refresh thread: redrawn on each :meth:`show`; stdout and stderr are not redirected, so
    nothing else in the process changes), plain lines anywhere else. :meth:`say` prints a line
    that stays (above the region on a terminal); :meth:`close` leaves the final table printed."""

    def __init__(self, out: TextIO | None = None) -> None:
        self.out = sys.stdout if out is None else out
        self._live: Any = None
        self._console: Any = None
        if self.out.isatty():
            from rich.console import Console

            from scalerl.harness.terminal import raw

            # The live region moves the cursor with escape sequences of its own: it writes below
            # the CLI's terminal-safe stream, and every text it shows is neutralised in show().
            console = Console(file=raw(self.out), highlight=False)
            # A dumb terminal cannot move its cursor: it gets the plain lines.
            if console.is_terminal and not console.is_dumb_terminal:
                self._console = console
        self._shown = ""
        self._note: str | None = None
        self._last_line = -math.inf

    @property
    def live(self) -> bool:
        return self._console is not None

    def say(self, text: str) -> None:
        if self._live is not None:
            from rich.text import Text

            self._live.console.print(Text(text))
        else:
            self.out.write(text + "\n")
            self.out.flush()

    def show(self, snap: Snapshot, note: str | None = None) -> None:
        head = f"[{time.strftime('%H:%M:%S')}] {snap.headline()}"
        if self._console is not None:
            from rich.live import Live
            from rich.text import Text

            from scalerl.harness.terminal import neutralise

            shown = neutralise("\n".join([head, *([f"  {note}"] if note else []), snap.table]))
            body = Text(shown, no_wrap=True)
            if self._live is None:
                self._live = Live(body, console=self._console, auto_refresh=False, transient=True,
                                  redirect_stdout=False, redirect_stderr=False)  # fmt: skip
                self._live.start(refresh=True)
            else:
                self._live.update(body, refresh=True)
            return
        # Not a terminal (a log, CI): a line when a run starts or ends or the wait changes, else every 30 s.
        changed = snap.counts() != self._shown or note != self._note
        if changed or time.monotonic() - self._last_line > QUIET_LINE_S:
            self.out.write(head + "\n" + (f"  {note}\n" if note and note != self._note else ""))
            self.out.flush()
            self._last_line = time.monotonic()
        self._shown, self._note = snap.counts(), note

    def close(self, snap: Snapshot | None) -> None:
        """Stop the live region (a transient one: it goes) and print the last table once."""
        if self._live is not None:
            self._live.stop()
            self._live = None
        if snap is not None:
            last = f"[{time.strftime('%H:%M:%S')}] {snap.headline()}\n" if self.live else ""
            self.out.write(last + snap.table + "\n")
            self.out.flush()


def slot_note(store: Any, sweep: str, snap: Snapshot) -> str | None:
    """When runs of ``sweep`` wait, what for: the local slots' holders (other executors' queues
    are the scheduler's business, shown by ``scalerl status``)."""
    if not snap.waiting:
        return None
    from scalerl.harness.execution.executors.local_slots import sweep_waiting
    from scalerl.harness.execution.status import latest_handles

    found = sweep_waiting(latest_handles(store, sweep).values())
    return "; ".join(w.describe() for w in found) or None


def follow(
    store: Any,
    sweep: str,
    *,
    metric: str = "val/pass_rate",
    interval_s: float = 2.0,
    timeout_s: float | None = None,
    out: TextIO | None = None,
    before_tick: Callable[[], object] | None = None,
    display: Display | None = None,
) -> Snapshot:
    """Show progress until every run ended (or ``timeout_s``); returns the last snapshot.
    ``before_tick`` runs first on each tick (the CLI syncs job states there, so a killed job shows
    up as failed instead of running forever). ``display`` (default: one on ``out``, default
    stdout) is where it goes; pass the one whose :meth:`Display.say` the tick speaks through."""
    display = display if display is not None else Display(out)
    start = time.monotonic()
    snap: Snapshot | None = None
    note: str | None = None
    noted = -math.inf
    try:
        while True:
            if before_tick is not None:
                before_tick()
            snap = snapshot(store, sweep, metric)
            # Who holds the slots reads the sweep's event log: at most every NOTE_S, not each tick.
            if time.monotonic() - noted >= NOTE_S or not snap.waiting:
                note, noted = slot_note(store, sweep, snap), time.monotonic()
            display.show(snap, note)
            if snap.done or (timeout_s is not None and time.monotonic() - start > timeout_s):
                return snap
            time.sleep(interval_s)
    finally:
        display.close(snap)


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
