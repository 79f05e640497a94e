"""The verl metrics JSON-lines importer on the real SPEED-RL files and on malformed input."""

from __future__ import annotations

from pathlib import Path

import pytest

from scalerl.harness.errors import ImportFormatError
from scalerl.harness.importers import detect, read_curves

SPEEDRL = Path("/work/shared/data/real-rl-curves/speedrl-dapo-json")
FIRST = SPEEDRL / "1.5B-Math-DAPO-NuminaMath-N24" / "processed_metrics.json"


def test_every_speedrl_file_reads_as_verl_jsonl() -> None:
    files = sorted(SPEEDRL.glob("*/processed_metrics.json"))
    assert len(files) == 20
    assert all(detect(f).name == "verl-jsonl" for f in files)
    curves = [c for f in files for c in read_curves(f, metric="val-core/*/acc/mean@*")]
    # SOURCES.md: 100 validation curves (5 benchmarks x 20 runs).
    assert len(curves) == 100 and sum(len(c) for c in curves) == 3730
    assert {c.x_name for c in curves} == {"train_global_steps"}


def test_exact_values_run_name_and_time_axis() -> None:
    (c,) = read_curves(FIRST, metric="val-core/MATH500*mean@*")
    assert c.run == "1.5B-Math-DAPO-NuminaMath-N24"  # the folder, not "processed_metrics"
    assert c.metric == "val-core/MATH500-Qwen-instruct/acc/mean@1"
    assert len(c) == 34 and c.steps[0] == 0 and c.steps[-1] == 825
    assert c.values[-1] == pytest.approx(0.702)
    (t,) = read_curves(FIRST, metric="val-core/MATH500*mean@*", axis_column="accumulated_training_time")
    assert t.x_name == "accumulated_training_time" and t.x[-1] == pytest.approx(81306.21082696089)
    names = {k.metric for k in read_curves(FIRST)}
    assert "accumulated_training_time" not in names and "train_global_steps" not in names


def test_nulls_text_fields_and_duplicate_steps(tmp_path: Path) -> None:
    f = tmp_path / "run7.jsonl"
    f.write_text(
        '{"step": 1, "reward": 0.1, "name": "a", "acc": null}\n'
        '{"step": 2, "reward": 0.2, "name": "a", "acc": 0.5}\n'
        "\n"
        '{"step": 2, "reward": 0.25, "name": "a"}\n'
    )
    with pytest.raises(ImportFormatError, match=r"run7.jsonl: duplicate-step 1 \(line 2: step 2\)"):
        read_curves(f)
    by = {c.metric: c for c in read_curves(f, allow_partial=True)}
    assert set(by) == {"reward", "acc"}  # "name" is text, not a metric
    assert by["reward"].run == "run7"
    assert by["reward"].values.tolist() == [0.1, 0.25]  # a re-logged step supersedes
    assert by["acc"].steps.tolist() == [2] and by["acc"].values.tolist() == [0.5]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('{"step": 1, "r": 0.1}\n{"step": 2, "r": \n', "m.jsonl:2: not a JSON object"),
        ('{"step": 1, "r": 0.1}\n[1, 2]\n', "m.jsonl:2: a JSON list"),
        ('{"step": 1, "r": 0.1}\n{"r": 0.2}\n', "m.jsonl:2: no 'step'"),
        (
            '{"step": 1, "r": 0.1}\n{"step": "two", "r": 0.2}\n',
            "m.jsonl:2: key 'step': 'two' is not a number",
        ),
    ],
)
def test_malformed_lines_name_file_line_and_fix(tmp_path: Path, text: str, needle: str) -> None:
    f = tmp_path / "m.jsonl"
    f.write_text(text)
    with pytest.raises(ImportFormatError, match="fix:") as err:
        read_curves(f, fmt="verl-jsonl")
    assert needle in str(err.value)


def test_unknown_axis_lists_the_keys(tmp_path: Path) -> None:
    f = tmp_path / "m.jsonl"
    f.write_text('{"step": 1, "r": 0.1}\n')
    with pytest.raises(ImportFormatError, match="axis key 'time' not found"):
        read_curves(f, axis_column="time")
