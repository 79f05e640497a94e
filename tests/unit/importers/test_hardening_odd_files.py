"""Issue 26, second hostile pass, on the importers' odd files: a JSON value nested past what
Python's parser can read (``[[[[...]]]]``) is an ImportFormatError naming the file, never a
RecursionError traceback, whether the format is given or detected; a CSV saved with a UTF-8
byte-order mark (Excel) is read like any other, its first column still the step."""

from __future__ import annotations

from pathlib import Path

import pytest

from scalerl.harness.errors import ImportFormatError
from scalerl.harness.importers.base import read_file


@pytest.mark.parametrize("fmt", ["verl-jsonl", None])
def test_a_deeply_nested_json_line_is_a_format_error(tmp_path: Path, fmt: str | None) -> None:
    path = tmp_path / "deep.jsonl"
    deep = "[" * 100_000 + "]" * 100_000
    path.write_text('{"step": 1, "acc": 0.5}\n{"step": 2, "acc": ' + deep + "}\n")
    with pytest.raises(ImportFormatError) as info:
        read_file(path, fmt=fmt)
    reason = "nested too deeply to read (a value inside thousands of brackets)"
    assert str(info.value) == f"{path}: {reason} (fix: repair or re-export it)"


@pytest.mark.parametrize("fmt", ["csv", None])
def test_a_csv_with_a_byte_order_mark_is_read(tmp_path: Path, fmt: str | None) -> None:
    path = tmp_path / "run.csv"
    path.write_text("step,val/pass_rate\n0,0.1\n10,0.2\n", encoding="utf-8-sig")
    (curve,) = read_file(path, fmt=fmt).curves
    assert curve.metric == "val/pass_rate" and curve.steps.tolist() == [0, 10]
    assert curve.values.tolist() == [0.1, 0.2]


def test_a_wandb_export_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    path = tmp_path / "panel.csv"
    path.write_text(
        '"Step","r1 - acc","r1 - acc__MIN","r1 - acc__MAX"\n1,0.5,0.5,0.5\n2,0.6,0.6,0.6\n',
        encoding="utf-8-sig",
    )
    (curve,) = read_file(path).curves
    assert curve.run == "r1" and curve.steps.tolist() == [1, 2]


def test_a_negative_compute_value_is_dropped_and_counted_as_bad_axis() -> None:
    # Compute and time are cumulative: a negative x cannot be placed on the axis (probe C13/I20).
    from scalerl.harness.importers.base import LossLog, make_curve

    log = LossLog()
    curve = make_curve(
        "f.csv", "r", "m", "perf/gpu_hours", [0, 1, 2], [0.0, -1.0, 2.0], [0.1, 0.2, 0.3],
        ["f.csv:2", "f.csv:3", "f.csv:4"], log,
    )  # fmt: skip
    assert curve.steps.tolist() == [0, 2] and curve.x.tolist() == [0.0, 2.0]
    assert [(e[0], e[1]) for e in log._entries] == [("bad-axis", "f.csv:3: perf/gpu_hours -1.0")]
