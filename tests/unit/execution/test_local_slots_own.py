"""A local queue behind its own scheduler's runs is an ordinary queue, not a machine-wide wait."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from scalerl.harness.execution.executors import local_slots
from scalerl.harness.execution.executors.local_files import LocalLayout


def _hold(monkeypatch: pytest.MonkeyPatch, state_dirs: list[str]) -> None:
    held = [
        local_slots.Holder(i, f"sweep{i}", f"run{i}", os.getpid(), d, 0.0) for i, d in enumerate(state_dirs)
    ]
    monkeypatch.setattr(local_slots, "holders", lambda max_parallel: held[:max_parallel])


def test_own_runs_holding_the_slots_write_no_waiting_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    layout = LocalLayout(tmp_path / "state")
    layout.root.mkdir(parents=True)
    monkeypatch.setattr(LocalLayout, "queued", lambda self: ["a", "b", "c"])
    mine = str(layout.state_dir)
    _hold(monkeypatch, [mine, mine])
    local_slots.note_waiting(layout, 2)
    assert not (layout.root / local_slots.WAITING).exists()
    # One slot held by another state dir's run: now the queue waits on someone else, and says whom.
    _hold(monkeypatch, [mine, str(tmp_path / "other")])
    local_slots.note_waiting(layout, 2)
    found = local_slots.waiting(layout, check_scheduler=False)
    assert found is not None and found.queued == 3
    assert [h.sweep for h in found.holders] == ["sweep0", "sweep1"]
    assert "sweep sweep1 run run1" in found.describe()
    # Back to only its own runs: the note goes.
    _hold(monkeypatch, [mine, mine])
    local_slots.note_waiting(layout, 2)
    assert local_slots.waiting(layout, check_scheduler=False) is None
