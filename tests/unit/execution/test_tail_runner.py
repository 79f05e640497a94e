"""The TensorBoard tail: real event files copied in while they grow, cut mid-record, and a second
file (a resumed run) appearing later; what the tail ingests equals importing the final directory."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from scalerl.harness.execution.runners.tail import TensorBoardTail
from scalerl.harness.importers.tensorboard import LogdirTail, read_logdir
from scalerl.harness.recipe.schema import CommandRunnerConfig, TensorBoardCompute

pytest.importorskip("tensorboard")


class Sink:
    def __init__(self) -> None:
        self.adds: list[tuple[int, dict[str, float], dict[str, float]]] = []

    def add(self, step: int, metrics: Mapping[str, float], compute: Mapping[str, float]) -> None:
        self.adds.append((step, dict(metrics), dict(compute)))

    def flush(self) -> None:
        return None

    def curves(self) -> dict[str, dict[int, float]]:
        out: dict[str, dict[int, float]] = {}
        for step, metrics, _ in self.adds:
            for name, value in metrics.items():
                out.setdefault(name, {})[step] = value  # the store keeps the last value per step
        return out


def event_bytes(tmp: Path, points: list[tuple[int, dict[str, float]]], wall0: float = 1.7e9) -> bytes:
    """A real events file (tensorboard's own writer) holding ``points``, as bytes."""
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    scratch = tmp / f"scratch{time.monotonic_ns()}"
    writer = EventFileWriter(str(scratch))
    for step, values in points:
        for tag, v in values.items():  # one event per tag, as SummaryWriter.add_scalar writes
            summary = Summary(value=[Summary.Value(tag=tag, simple_value=v)])
            writer.add_event(Event(wall_time=wall0 + step, step=step, summary=summary))
    writer.close()
    (written,) = scratch.iterdir()
    return written.read_bytes()


def _points(n: int, start: int = 0) -> list[tuple[int, dict[str, float]]]:
    return [(s, {"val/reward": 0.25 * s, "loss": 1.0 / (s + 1)}) for s in range(start, start + n)]


def _imported(run_dir: Path) -> dict[str, dict[int, float]]:
    (result,) = read_logdir(run_dir)
    return {c.metric: dict(zip(c.steps, c.values, strict=True)) for c in result.curves}


def test_tail_while_growing_equals_import_afterwards(tmp_path: Path) -> None:
    run = tmp_path / "tb"
    sink = Sink()
    tail = TensorBoardTail(run, sink)
    assert tail.poll() == 0  # no directory yet
    run.mkdir()
    first = event_bytes(tmp_path, _points(30))
    second = event_bytes(tmp_path, _points(10, start=25))  # resumed: re-logs 25..29, then 30..34
    a = run / "events.out.tfevents.1700000001.host.1.0"
    b = run / "events.out.tfevents.1700000002.host.1.0"
    polled = []
    # Chunks of 97 bytes: nearly every chunk ends mid-record (header or body).
    for cut in range(0, len(first), 97):
        with a.open("ab") as fh:
            fh.write(first[cut : cut + 97])
        polled.append(tail.poll())
    assert 0 in polled and sum(polled) == 60  # polls that ended mid-record waited, none lost
    for cut in range(0, len(second), 150):
        with b.open("ab") as fh:
            fh.write(second[cut : cut + 150])
        tail.poll()
    assert tail.poll(final=True) == 0
    assert not tail.reader.losses.freeze()  # a record cut by a poll is not a loss
    expected = _imported(run)
    assert sink.curves() == expected
    assert expected["val/reward"][34] == 8.5 and len(expected["loss"]) == 35
    assert sink.adds[0] == (0, {"val/reward": 0.0, "loss": 1.0}, {})


def test_records_match_the_importer_point_for_point(tmp_path: Path) -> None:
    run = tmp_path / "tb"
    run.mkdir()
    data = event_bytes(tmp_path, _points(20))
    path = run / "events.out.tfevents.1700000001.host.1.0"
    reader = LogdirTail(run)
    got: dict[str, list[tuple[int, float, float, str]]] = {}
    for cut in range(0, len(data), 61):
        with path.open("ab") as fh:
            fh.write(data[cut : cut + 61])
        for tag, pts in reader.poll().items():
            got.setdefault(tag, []).extend(pts)
    from scalerl.harness.importers.base import LossLog
    from scalerl.harness.importers.tensorboard import _read_events

    whole, _ = _read_events(path, LossLog())
    assert got == dict(whole)  # same steps, wall times, values and record numbers


def test_truncated_tail_counts_only_on_the_final_poll(tmp_path: Path) -> None:
    run = tmp_path / "tb"
    run.mkdir()
    data = event_bytes(tmp_path, _points(3))
    (run / "events.out.tfevents.1.h").write_bytes(data[:-5])  # the writer died mid-record
    tail = TensorBoardTail(run, Sink())
    assert tail.poll() == 5  # 6 points; the last record waits
    assert not tail.reader.losses.freeze()
    assert tail.poll(final=True) == 0
    assert tail.reader.losses.freeze().counts == {"truncated-tail": 1}
    assert tail.poll(final=True) == 0
    assert tail.reader.losses.freeze().counts == {"truncated-tail": 1}  # counted once


def test_tags_are_renamed_and_compute_comes_from_step_and_wall_time(tmp_path: Path) -> None:
    run = tmp_path / "tb"
    run.mkdir()
    (run / "events.out.tfevents.1.h").write_bytes(event_bytes(tmp_path, _points(4), wall0=100.0))
    cfg = CommandRunnerConfig.model_validate(
        {
            "type": "command",
            "argv": ["x"],
            "tensorboard_dir": "tb",
            "tensorboard_tags": {"val/reward": "val/pass_rate"},
            "tensorboard_compute": {"samples": {"column": "step", "scale": 512}, "wall_s": "wall_time"},
        }
    )
    sink = Sink()
    TensorBoardTail(run, sink, cfg.tensorboard_tags, cfg.tensorboard_compute).poll(final=True)
    assert sink.adds == [
        (s, {"val/pass_rate": 0.25 * s}, {"samples": 512.0 * s, "wall_s": float(s)}) for s in range(4)
    ]
    assert cfg.tensorboard_compute["wall_s"] == TensorBoardCompute(column="wall_time")


def test_config_needs_a_directory_and_unset_fields_keep_run_ids() -> None:
    with pytest.raises(ValueError, match="without tensorboard_dir"):
        CommandRunnerConfig.model_validate({"type": "command", "argv": ["x"], "tensorboard_tags": {"a": "b"}})
    with pytest.raises(ValueError, match="column"):
        CommandRunnerConfig.model_validate(
            {
                "type": "command",
                "argv": ["x"],
                "tensorboard_dir": "tb",
                "tensorboard_compute": {"flops": "loss"},
            }
        )
    plain = CommandRunnerConfig(type="command", argv=("x",))
    assert "tensorboard_dir" not in plain.model_dump(mode="json")  # run ids of older recipes hold
