"""``scalerl import`` into a real SQLite file store, then ``scalerl fit`` on what was imported."""

from __future__ import annotations

from pathlib import Path

import pytest

from scalerl import db
from scalerl.harness.cli import main

REAL = Path("/work/shared/data/real-rl-curves")


def test_import_then_fit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    tb = [
        str(REAL / "tensorboard-verl-async" / f) for f in ("q3b_fsdp_base.tfevents", "q7b_fsdp_base.tfevents")
    ]
    wandb = str(REAL / "wandb-export-deep-grpo" / "loss_weight.csv")
    args = ["import", *tb, wandb, "--sweep", "real", "--metric", "val-core/*", "--db", url]
    assert main(args) == 0
    assert "imported 6 curve(s), 2321 point(s) into sweep 'real': 6 run(s) (6 new)" in capsys.readouterr().out
    assert main(args) == 0  # idempotent: same run ids, points upserted
    assert "6 run(s) (0 new)" in capsys.readouterr().out
    store = db.open_store(url)
    runs = db.queries.runs(store, "real")
    curves = db.queries.curves(store, "real")
    store.close()
    assert len(runs) == 6 and set(runs["status"]) == {"completed"} and runs["n_points"].sum() == 2321
    assert len(curves) == 2321 and curves["flops"].isna().all()  # a step axis fills no compute column
    q3b = curves[curves["variant"] == "q3b_fsdp_base"].sort_values("step")
    assert q3b["value"].iloc[-1] == pytest.approx(0.8786959648132324) and q3b["step"].iloc[-1] == 105

    # A bad file among good ones: nothing is written.
    bad = tmp_path / "bad.csv"
    bad.write_text("step,reward\n1,0.1\n2,zz\n")
    assert main(["import", tb[0], str(bad), "--sweep", "other", "--db", url]) == 7  # ImportFormatError
    assert "bad.csv:3: column 'reward'" in capsys.readouterr().err
    store = db.open_store(url)
    assert "other" not in set(db.queries.sweeps(store)["name"])
    store.close()

    assert (
        main(
            [
                "fit",
                "real",
                "--axis",
                "step",
                "--metric",
                "val-core/openai/gsm8k/reward/mean@1",
                "--boot",
                "30",
                "--db",
                url,
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "4 fits (4 ok), 0 verdicts" in out and "verdicts skipped" in out
