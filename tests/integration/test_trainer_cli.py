"""``scalerl train``: one run into a real SQLite store, and the ``--no-db`` JSON-lines mode."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from scalerl.harness.cli import main
from tests.unit.rl.micro import _policy_cache, micro_recipe

__all__ = ["_policy_cache"]


def _recipe_file(tmp_path: Path) -> Path:
    recipe = micro_recipe(budget={"value": 2, "unit": "steps"}, eval={"every_steps": 1})
    path = tmp_path / "micro.yaml"
    data = recipe.model_dump(mode="json")
    data.pop("runner")
    path.write_text(yaml.safe_dump(data))
    return path


def test_train_streams_points_into_a_sqlite_store(tmp_path: Path) -> None:
    from scalerl import db
    from scalerl.db import queries

    url = f"sqlite:///{tmp_path / 'store.db'}"
    cfg = _recipe_file(tmp_path)
    assert main(["train", str(cfg), "--seed", "3", "--workdir", str(tmp_path / "w"), "--db", url]) == 0
    store = db.open_store(url)
    try:
        df = queries.curves(store, "adhoc", "val/pass_rate")
        runs = queries.runs(store, "adhoc")
    finally:
        store.close()
    assert sorted(df["step"].tolist()) == [0, 1, 2]
    assert df["value"].between(0, 1).all()
    assert (df.sort_values("step")["flops"].diff().dropna() > 0).all()
    assert runs["status"].tolist() == ["completed"]


def test_train_no_db_prints_json_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = _recipe_file(tmp_path)
    # Overrides come right after CONFIG (argparse cannot take positionals after options).
    assert main(["train", str(cfg), "optimizer.lr=0.002", "--no-db", "--workdir", str(tmp_path / "w")]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    assert [x["step"] for x in lines] == [0, 1, 2]
    assert {"val/pass_rate", "flops", "tokens", "samples", "gpu_hours", "wall_s"} <= set(lines[1])
    assert lines[1]["train/response_len"] > 0


def test_bad_override_is_a_clean_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = _recipe_file(tmp_path)
    assert main(["train", str(cfg), "knobs.loss.choice=ppo", "--no-db"]) == 3  # ConfigError
    err = capsys.readouterr().err
    assert "knobs.loss.choice" in err and "Traceback" not in err
