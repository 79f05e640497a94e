"""Atomic replacement with several writers at once (a superseded attempt still stopping while its
successor checkpoints into the same folder): nobody's write fails, nothing is left behind."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from scalerl.harness.atomicio import PRIVATE, write_atomic
from tests.unit.execution.helpers import TRAINER


def _hammer(target: str, writer: int, n: int) -> int:
    for i in range(n):
        write_atomic(Path(target), json.dumps({"writer": writer, "i": i}))
    return n


def test_two_processes_replacing_one_file_never_fail_and_leave_one_whole_file(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    with ProcessPoolExecutor(2) as pool:
        done = list(pool.map(_hammer, [str(target)] * 2, [0, 1], [400, 400]))
    assert done == [400, 400]
    last = json.loads(target.read_text())  # whole JSON, from one writer's last write
    assert last["writer"] in (0, 1) and last["i"] == 399
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]  # no temporary left


def test_modes_follow_the_umask_or_stay_private(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        write_atomic(tmp_path / "page.html", "<p>x</p>")
        write_atomic(tmp_path / "spec.json", "{}", mode=PRIVATE)
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "page.html").stat().st_mode) == 0o644  # as open() would
    assert stat.S_IMODE((tmp_path / "spec.json").stat().st_mode) == 0o600
    assert (tmp_path / "page.html").read_text() == "<p>x</p>"


def test_a_failed_write_keeps_the_old_file_and_leaves_nothing_behind(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    target.write_text('{"step": 1}')

    class Boom:
        def __str__(self) -> str:
            raise RuntimeError("boom")

    with pytest.raises(TypeError):
        write_atomic(target, Boom())  # type: ignore[arg-type]  # fh.write refuses a non-str
    assert target.read_text() == '{"step": 1}'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


def test_durable_writes_the_same_content(tmp_path: Path) -> None:
    write_atomic(tmp_path / "a.json", '{"a": 1}', durable=True)
    assert json.loads((tmp_path / "a.json").read_text()) == {"a": 1}


def test_two_example_trainers_checkpointing_into_one_folder_both_finish(tmp_path: Path) -> None:
    """The example trainer a lab copies: two attempts of one run saving every step into the same
    checkpoint folder (a superseded attempt not yet stopped) must not crash each other."""
    env = {**os.environ, "SCALERL_CHECKPOINT_DIR": str(tmp_path / "checkpoint")}
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(TRAINER),
                "--steps",
                "400",
                "--checkpoint-every",
                "1",
                "--eval-every",
                "400",
                "--step-seconds",
                "0",
            ],
            cwd=tmp_path,
            env={**env, "SCALERL_METRICS_FILE": str(tmp_path / f"m{i}.jsonl")},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    results = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-2000:] for _, err in results]
    assert json.loads((tmp_path / "checkpoint" / "state.json").read_text())["step"] == 400
    assert [p.name for p in (tmp_path / "checkpoint").iterdir()] == ["state.json"]
