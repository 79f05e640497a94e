"""Issue 26, second hostile pass, on ``scalerl db replay``: whatever sits in a spool folder, the
replay ends with a report: a FIFO named like a spool file (or its finish request) never blocks it,
a folder so named is no traceback, and a line nested past what ``json`` can read is set aside with
its reason like any unreadable line, while the rest of the folder drains."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from scalerl import db
from scalerl.db.spool import replay


def _replay_within(store: db.Store, spool: Path, seconds: float = 20.0) -> db.ReplayReport:
    """Run the replay in a thread so a hang fails the test instead of stalling the suite."""
    out: dict[str, db.ReplayReport | BaseException] = {}

    def body() -> None:
        try:
            out["report"] = replay(store, spool)
        except BaseException as exc:  # reported by the assertion below
            out["report"] = exc

    worker = threading.Thread(target=body, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), "the replay hung"
    report = out["report"]
    assert isinstance(report, db.ReplayReport), report
    return report


def test_fifos_folders_and_deep_lines_do_not_stop_the_replay(tmp_path: Path) -> None:
    store = db.open_store(f"sqlite:///{tmp_path / 's.db'}")
    spool = tmp_path / "spool"
    spool.mkdir()
    os.mkfifo(spool / "a-fifo.jsonl")
    os.mkfifo(spool / "b-fifo.jsonl.finish")
    (spool / "c-folder.jsonl").mkdir()
    (spool / "d-deep.jsonl").write_text('{"v": 2, "run_id": ' + "[" * 100_000 + "]" * 100_000 + "}\n")

    report = _replay_within(store, spool)

    assert report.files == 1 and report.points == 0  # the deep file drained into quarantine
    assert report.quarantined_points == 1
    (quarantine,) = report.quarantined
    (record,) = [json.loads(line) for line in Path(quarantine).read_text().splitlines()]
    assert record["line"] == 1 and record["reason"] == "a JSON line nested too deep to read"
    # Left alone: not spool files, and nothing of them was read or removed.
    assert (spool / "a-fifo.jsonl").exists() and (spool / "c-folder.jsonl").is_dir()
    assert (spool / "b-fifo.jsonl.finish").exists()
