"""A command run whose script writes TensorBoard events while it runs (no metrics file, no client):
the curve the runner stored by tailing the directory equals importing the directory afterwards."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from scalerl import db
from scalerl.db import queries
from scalerl.harness.execution.sweep import launch, prepare
from scalerl.harness.importers.tensorboard import read_logdir

pytest.importorskip("tensorboard")

SCRIPT = """
import sys, time
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.summary.writer.event_file_writer import EventFileWriter

writer = EventFileWriter(sys.argv[1])
for step in range(40):
    for tag, value in (("val-core/gsm8k/reward/mean@1", step / 40), ("actor/loss", 1.0 / (step + 1))):
        summary = Summary(value=[Summary.Value(tag=tag, simple_value=value)])
        writer.add_event(Event(wall_time=time.time(), step=step, summary=summary))
    writer.flush()
    time.sleep(0.02)
writer.close()
"""


def test_tailed_tensorboard_curve_equals_the_import_afterwards(tmp_path: Path) -> None:
    script = tmp_path / "trainer.py"
    script.write_text(SCRIPT)
    tb = tmp_path / "tb"
    recipe = {
        "name": "tb-recipe",
        "runner": {
            "type": "command",
            "argv": [sys.executable, str(script), str(tb)],
            "tensorboard_dir": str(tb),
            "tensorboard_tags": {"val-core/gsm8k/reward/mean@1": "val/pass_rate", "actor/loss": "train/loss"},
            "tensorboard_compute": {"samples": {"column": "step", "scale": 512}},
        },
        "budget": {"value": 40, "unit": "steps"},
    }
    (tmp_path / "tb-recipe.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
    sweep = {
        "sweep": "tb",
        "base": "tb-recipe.yaml",
        "design": "loo",
        "loo": {"knobs": []},
        "seeds": [0],
        "fit": {"metric": "val/pass_rate", "axis": "samples", "window": {"fraction": 0.1}},
        "resources": {"cpus": 1, "gpus": 0, "mem_gb": 1, "time_min": 10},
        "executor": "debug",
        "max_retries": 0,
    }
    (tmp_path / "tb.yaml").write_text(yaml.safe_dump(sweep, sort_keys=False))
    url = f"sqlite:///{tmp_path / 's.db'}"
    prepared = prepare(
        tmp_path / "tb.yaml", [], executor="debug", profile=None, db_url=url, state_dir=tmp_path / "st"
    )
    store = db.open_store(url)
    launch(store, prepared)
    runs = queries.runs(store, "tb")
    assert list(runs["status"]) == ["completed"]

    (imported,) = read_logdir(tb)
    names = {"val-core/gsm8k/reward/mean@1": "val/pass_rate", "actor/loss": "train/loss"}
    assert {names[c.metric] for c in imported.curves} == {"val/pass_rate", "train/loss"}
    for curve in imported.curves:
        stored = queries.curves(store, "tb", metric=names[curve.metric]).sort_values("step")
        assert list(stored["step"]) == list(curve.steps) == list(range(40))
        assert list(stored["value"]) == pytest.approx(list(curve.values), abs=0)
        if names[curve.metric] == "val/pass_rate":
            assert list(stored["samples"]) == [512.0 * s for s in range(40)]
