"""The metrics JSONL tail: only complete lines, each once, errors name file:line."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from scalerl.harness.errors import ImportFormatError
from scalerl.harness.execution.runners.metrics_file import MetricsTail


class Sink:
    def __init__(self) -> None:
        self.points: list[tuple[int, dict[str, float], dict[str, float]]] = []

    def add(self, step: int, metrics: Mapping[str, float], compute: Mapping[str, float]) -> None:
        self.points.append((step, dict(metrics), dict(compute)))

    def flush(self) -> None:
        return None


def test_half_written_line_waits_until_complete(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    sink = Sink()
    tail = MetricsTail(path, sink)
    assert tail.poll() == 0  # no file yet
    path.write_text(
        '{"step": 5, "metrics": {"val/pass_rate": 0.25}, "compute": {"flops": 5}}\n{"step": 10, "met'
    )
    assert tail.poll() == 1
    assert sink.points == [(5, {"val/pass_rate": 0.25}, {"flops": 5.0})]
    assert tail.poll() == 0  # the half line is not ingested, the first is not re-read
    with path.open("a") as fh:
        fh.write('rics": {"val/pass_rate": 0.5}}\n{"step": 15, "val/pass_rate": 0.75}\n')
    assert tail.poll() == 2
    assert [p[0] for p in sink.points] == [5, 10, 15]
    assert sink.points[2][1] == {"val/pass_rate": 0.75}  # flat form: other keys are metrics


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ("not json", "not valid JSON"),
        ('{"metrics": {"x": 1}}', 'needs an object with "step"'),
        ('{"step": -1, "x": 1}', "step=-1 must be a non-negative integer"),
        ('{"step": 1, "metrics": {"x": "high"}}', "metrics.x='high' is not a finite number"),
        ('{"step": 1, "x": 0.5, "n": {"y": 3}}', "n.y names no metric on this line"),
        ('{"step": 1, "x": 0.5, "n": {"x": 0}}', "n.x=0 must be an integer >= 1"),
        ('{"step": 1, "x": 0.5, "n": {"x": 2.5}}', "n.x=2.5 must be an integer >= 1"),
    ],
)
def test_bad_lines_name_file_and_line(tmp_path: Path, line: str, needle: str) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text('{"step": 1, "x": 0.5}\n' + line + "\n")
    with pytest.raises(ImportFormatError) as err:
        MetricsTail(path, Sink()).poll()
    assert str(err.value).startswith(f"{path}:2: ")
    assert needle in str(err.value)


class CountingSink(Sink):
    def __init__(self) -> None:
        super().__init__()
        self.counts: list[dict[str, int] | None] = []

    def add(
        self,
        step: int,
        metrics: Mapping[str, float],
        compute: Mapping[str, float],
        n: Mapping[str, int] | None = None,
    ) -> None:
        super().add(step, metrics, compute)
        self.counts.append(None if n is None else dict(n))


def test_sample_counts_reach_the_sink_and_are_not_metrics(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text(
        '{"step": 1, "metrics": {"val/pass_rate": 0.5, "loss": 2.0}, "n": {"val/pass_rate": 512}}\n'
        '{"step": 2, "val/pass_rate": 0.625, "n": {"val/pass_rate": 128}}\n'
        '{"step": 3, "val/pass_rate": 0.75}\n'
    )
    sink = CountingSink()
    assert MetricsTail(path, sink).poll() == 3
    assert sink.counts == [{"val/pass_rate": 512}, {"val/pass_rate": 128}, None]
    assert sink.points[1] == (2, {"val/pass_rate": 0.625}, {})  # flat form: "n" is not a metric
