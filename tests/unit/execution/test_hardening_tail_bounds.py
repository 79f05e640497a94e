"""Issue 26, second hostile pass, on the command runner's metrics tail: a file the script
truncates or replaces is read again (never a silent gap), a runaway line without a newline fails
the run instead of being buffered whole, and a repeated JSON key is counted, not silently resolved."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import pytest

from scalerl.harness.errors import ImportFormatError
from scalerl.harness.execution.runners import metrics_file
from scalerl.harness.execution.runners.metrics_file import MetricsTail

LINE = '{{"step": {s}, "metrics": {{"val/pass_rate": {v}}}}}\n'


class Sink:
    def __init__(self) -> None:
        self.points: dict[int, dict[str, float]] = {}

    def add(self, step: int, metrics: Mapping[str, float], compute: Mapping[str, float]) -> None:
        self.points[step] = dict(metrics)

    def flush(self) -> None:
        return None


def _lines(steps: range) -> str:
    return "".join(LINE.format(s=s, v=s / 100) for s in steps)


def test_a_file_truncated_and_rewritten_is_read_again_from_its_start(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text(_lines(range(1, 6)))
    sink = Sink()
    tail = MetricsTail(path, sink)
    assert tail.poll() == 5
    path.write_text(_lines(range(6, 9)))  # the script reopened it with "w": shorter than before
    assert tail.poll(final=True) == 3
    assert sorted(sink.points) == [1, 2, 3, 4, 5, 6, 7, 8]


def test_a_file_replaced_by_another_is_read_from_its_start(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text(_lines(range(1, 3)))
    sink = Sink()
    tail = MetricsTail(path, sink)
    assert tail.poll() == 2
    new = tmp_path / "m.tmp"
    new.write_text(_lines(range(1, 6)))  # a rewrite-all-then-rename writer: longer, new inode
    os.replace(new, path)
    assert tail.poll(final=True) == 5
    assert sorted(sink.points) == [1, 2, 3, 4, 5]


def test_a_line_longer_than_a_read_block_fails_with_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(metrics_file, "READ_BLOCK", 256)
    path = tmp_path / "m.jsonl"
    path.write_text(_lines(range(1, 3)) + '{"step": 3, "metrics": {"x": "' + "A" * 1000)
    sink = Sink()
    tail = MetricsTail(path, sink)
    with pytest.raises(ImportFormatError, match=r"m\.jsonl:3: a line longer than 256 bytes"):
        tail.poll()
    assert sorted(sink.points) == [1, 2]  # what came before it is kept


def test_many_lines_are_read_block_by_block_to_the_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(metrics_file, "READ_BLOCK", 256)
    path = tmp_path / "m.jsonl"
    path.write_text(_lines(range(1, 101)) + LINE.format(s=101, v=0.5).rstrip("\n"))
    sink = Sink()
    tail = MetricsTail(path, sink)
    assert tail.poll(final=True) == 101
    assert sorted(sink.points) == list(range(1, 102))


def test_a_repeated_key_keeps_the_first_value_and_is_counted(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text(
        '{"step": 1, "step": 2, "metrics": {"val/pass_rate": 0.1}}\n'
        '{"step": 3, "metrics": {"val/pass_rate": 0.1, "val/pass_rate": 0.9}}\n'
    )
    sink = Sink()
    tail = MetricsTail(path, sink)
    assert tail.poll(final=True) == 2
    assert sink.points == {1: {"val/pass_rate": 0.1}, 3: {"val/pass_rate": 0.1}}
    assert dict(tail.losses.freeze().counts) == {"duplicate-column": 2}
