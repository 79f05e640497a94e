"""The progress display: on a terminal one region redrawn in place by rich (no screen clear, so
scrollback keeps the final table, not a frame every 2 s); elsewhere a line only when the counts
or the wait change."""

from __future__ import annotations

import io
import re

import pytest

from scalerl.harness.execution.progress import Display, Snapshot


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _snap(completed: int, running: int, total: int = 3) -> Snapshot:
    table = f"  variant seed status\n  base 0 {'completed' if completed else 'running'}\n  marker-{completed}"
    return Snapshot(total=total, completed=completed, failed=0, cancelled=0, running=running, points=7,
                    table=table)  # fmt: skip


def test_a_terminal_gets_a_live_region_that_never_clears_the_screen(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.delenv("NO_COLOR", raising=False)
    out = _Terminal()
    display = Display(out)
    assert display.live
    display.show(_snap(0, 1), note="1 run(s) waiting for a machine-wide local slot (1 of 1 held): x")
    display.say("variant loo-x stopped: decided")
    display.show(_snap(1, 1))
    display.show(_snap(2, 1))
    display.close(_snap(3, 0))
    text = out.getvalue()
    assert "\x1b[2J" not in text and "\x1b[H" not in text  # no clear-screen, no cursor-home
    assert re.search(r"\x1b\[\d*A", text)  # redrawn in place: the cursor moves up over the region
    # The region is transient: after the last control sequence only the final table is left, once.
    tail = re.split(r"\x1b\[[0-9;?]*[A-Za-z]", text)[-1]
    assert "3/3 done" in tail and "marker-3" in tail and "marker-2" not in tail
    assert text.count("marker-3") == 1
    assert "variant loo-x stopped: decided" in text  # a said line stays (printed above the region)


def test_a_dumb_terminal_gets_plain_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "dumb")
    assert not Display(_Terminal()).live


def test_a_log_gets_a_line_per_change_and_the_table_at_the_end() -> None:
    out = io.StringIO()
    display = Display(out)
    assert not display.live
    note = "1 run(s) waiting for a machine-wide local slot (1 of 1 held): sweep other run r1 (pid 42)"
    for _ in range(3):  # nothing changed: one line, and the note once
        display.show(_snap(0, 1), note=note)
    display.show(_snap(1, 1), note=note)  # counts changed: a line; the note is not repeated
    display.show(_snap(1, 1))  # the wait ended: a line
    display.close(_snap(3, 0))
    lines = out.getvalue().splitlines()
    heads = [ln for ln in lines if ln.startswith("[")]
    assert [h.split("] ", 1)[1].split(",")[0] for h in heads] == ["0/3 done", "1/3 done", "1/3 done"]
    assert sum(note in ln for ln in lines) == 1
    assert lines[-1] == "  marker-3" and "\x1b" not in out.getvalue()


def test_snapshot_counts_waiting_runs() -> None:
    snap = Snapshot(total=6, completed=1, failed=1, cancelled=0, running=2, points=0, table="", stopped=1)
    assert snap.waiting == 1
    assert snap.as_dict() == {"total": 6, "completed": 1, "running": 2, "failed": 1, "cancelled": 0,
                              "stopped": 1, "waiting": 1, "points": 0}  # fmt: skip
