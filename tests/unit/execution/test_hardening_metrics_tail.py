"""Issue 26, rule 2 on the command runner: a trainer's last metrics line without its newline is
read once the command has exited (never dropped while the run is marked completed); a cut-short
one is counted as ``truncated-tail``."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

import yaml

from scalerl import db
from scalerl.db import queries
from scalerl.harness.execution.runners.metrics_file import MetricsTail
from scalerl.harness.execution.runners.tail import Tails
from scalerl.harness.execution.sweep import launch, prepare
from tests.unit.execution.helpers import write_command_sweep

LINE = '{{"step": {s}, "metrics": {{"val/pass_rate": {v}}}, "compute": {{"flops": {s}}}}}'


class Sink:
    def __init__(self) -> None:
        self.points: list[tuple[int, dict[str, float]]] = []

    def add(self, step: int, metrics: Mapping[str, float], compute: Mapping[str, float]) -> None:
        self.points.append((step, dict(metrics)))

    def flush(self) -> None:
        return None


def test_the_final_poll_reads_a_last_line_without_its_newline(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text(LINE.format(s=5, v=0.25) + "\n" + LINE.format(s=10, v=0.5))
    sink = Sink()
    tail = MetricsTail(path, sink)
    assert tail.poll() == 1  # while the command runs, the unterminated line may still grow
    assert tail.poll(final=True) == 1  # it has exited: that line is all it wrote
    assert sink.points == [(5, {"val/pass_rate": 0.25}), (10, {"val/pass_rate": 0.5})]
    assert tail.poll(final=True) == 0  # read once
    assert not tail.losses.freeze()


def test_a_cut_short_last_line_is_counted_not_fatal_and_not_silent(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text(LINE.format(s=5, v=0.25) + "\n" + '{"step": 10, "metr')
    sink = Sink()
    tail = MetricsTail(path, sink)
    assert tail.poll(final=True) == 1
    lost = tail.losses.freeze()
    assert dict(lost.counts) == {"truncated-tail": 1}
    assert lost.examples["truncated-tail"][0].startswith("line 2: ")


def test_tails_pass_final_to_the_metrics_tail(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text(LINE.format(s=1, v=0.1))
    sink = Sink()
    tails = Tails(MetricsTail(path, sink), None)
    assert tails.poll() == 0
    assert tails.poll(final=True) == 1


def test_a_command_runs_last_unterminated_line_reaches_the_store(tmp_path: Path) -> None:
    body = (
        "import os\n"
        "with open(os.environ['SCALERL_METRICS_FILE'], 'a') as fh:\n"
        f"    fh.write({LINE.format(s=5, v=0.25)!r} + '\\n')\n"
        f"    fh.write({LINE.format(s=10, v=0.5)!r})  # no newline: print(..., end='')\n"
    )
    script = tmp_path / "script.py"
    script.write_text(body)
    sweep_file = write_command_sweep(tmp_path, name="scr", steps=10, knobs=(), max_retries=0)
    recipe_path = tmp_path / "scr-recipe.yaml"
    recipe = yaml.safe_load(recipe_path.read_text())
    recipe["runner"]["argv"] = [sys.executable, str(script)]
    recipe_path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    url = f"sqlite:///{tmp_path / 's.db'}"
    prepared = prepare(sweep_file, [], executor="debug", profile=None, db_url=url, state_dir=tmp_path / "st")
    store = db.open_store(url)
    try:
        launch(store, prepared)
        (row,) = queries.runs(store, "scr").to_dict("records")
        curve = queries.curves(store, "scr", "val/pass_rate").sort_values("step")
    finally:
        store.close()
    assert row["status"] == "completed"
    assert curve["step"].tolist() == [5, 10] and curve["value"].tolist() == [0.25, 0.5]
