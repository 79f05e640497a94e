"""Importers on every real file (counts and exact values), malformed files, and ``scalerl import``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from scalerl.harness.errors import ImportFormatError
from scalerl.harness.importers import detect, read_curves
from scalerl.harness.importers.ingest import infer_unit, run_id_for

REAL = Path("/work/shared/data/real-rl-curves")
WANDB = REAL / "wandb-export-deep-grpo"
TB = REAL / "tensorboard-verl-async"
VERL = REAL / "verl-fork-parsed"

# file -> (curves, points, distinct runs)
WANDB_COUNTS = {
    "grpo_scale_rollout.csv": (5, 4404, 5),
    "loss_weight.csv": (4, 2277, 4),
    "sampling_strategy.csv": (6, 4170, 6),
    "scale_budget.csv": (4, 2315, 4),
    "training_dynamics__test_reward.csv": (2, 1512, 2),
    "tree_methods_training_instability__test_reward.csv": (1, 186, 1),
}


@pytest.mark.parametrize("name", sorted(WANDB_COUNTS))
def test_wandb_exports(name: str) -> None:
    path = WANDB / name
    assert detect(path).name == "wandb-csv"
    curves = read_curves(path)
    assert (len(curves), sum(len(c) for c in curves), len({c.run for c in curves})) == WANDB_COUNTS[name]
    for c in curves:
        # Real GSM8K evaluations: every value is a multiple of 1/1319 (the test set size).
        np.testing.assert_allclose(c.values * 1319, np.round(c.values * 1319), atol=1e-6)
        assert (np.diff(c.steps) > 0).all() and c.metric.startswith("val-core/")


def test_wandb_exact_values_and_time_axis() -> None:
    (first, *_rest) = read_curves(WANDB / "grpo_scale_rollout.csv")
    assert first.run == "Qwen2.5-0.5B-Instruct-GSM8K-CRPO-sp-p1-b8-gamma2.0-lam1.0-01161659"
    assert first.metric == "val-core/GSM8K/reward/mean@1" and first.x_name == "Step"
    assert (len(first), int(first.steps[-1])) == (592, 2955)
    assert first.values[0] == 0.42835481425322214 and first.values[-1] == 0.6580742987111448
    longest = max(read_curves(WANDB / "grpo_scale_rollout.csv"), key=len)
    assert len(longest) == 1075 and longest.run.endswith("GRPO-n64")
    # scale_budget.csv: x is W&B "Relative Time (Process)" seconds; steps come from each run's _step.
    budget = {c.run: c for c in read_curves(WANDB / "scale_budget.csv")}
    c = budget["Qwen2.5-0.5B-Instruct-GSM8K-CRPO-sp-p1b4-gamma2.0-lam1.0-01182022"]
    assert c.x_name == "Relative Time (Process)" and len(c) == 781
    assert c.steps[:3].tolist() == [0, 5, 10] and int(c.steps[-1]) == 3900
    assert c.x[-1] == 154508.342432078 and c.values[-1] == 0.6413949962092494
    assert infer_unit(c.x_name) == "wall_s" and infer_unit("Step") == "step"
    by_step = read_curves(WANDB / "scale_budget.csv", axis_column="_step")
    assert by_step[0].x_name == "_step" and by_step[0].x[:3].tolist() == [0.0, 5.0, 10.0]


def test_tensorboard_events() -> None:
    files = sorted(TB.glob("*.tfevents"))
    assert len(files) == 11
    for f in files:
        assert detect(f).name == "tensorboard"
        curves = {c.metric: c for c in read_curves(f)}
        assert len(curves) in (62, 63)
        val = curves["val-core/openai/gsm8k/reward/mean@1"]
        train = curves["critic/score/mean"]
        assert (len(val), len(train)) == (22, 105)
        assert val.steps.tolist() == list(range(0, 106, 5))
        assert val.run == f.name.removesuffix(".tfevents")
    q3b = {c.metric: c for c in read_curves(TB / "q3b_fsdp_base.tfevents")}
    val = q3b["val-core/openai/gsm8k/reward/mean@1"]
    assert val.values[0] == pytest.approx(0.5670962929725647) and val.values[-1] == pytest.approx(
        0.8786959648132324
    )
    assert sum(len(c) for c in q3b.values()) == 6259
    wall = read_curves(TB / "q3b_fsdp_base.tfevents", metric="critic/score/mean", axis_column="wall_time")[0]
    assert wall.x_name == "wall_time" and wall.x[0] >= 0 and (np.diff(wall.x) > 0).all()


def test_parsed_verl_csvs() -> None:
    files = sorted(VERL.glob("*.csv"))
    assert len(files) == 7
    finals = []
    for f in files:
        assert detect(f).name == "csv"
        curves = {c.metric: c for c in read_curves(f)}
        assert len(curves) == 23 and sum(len(c) for c in curves.values()) == 2443
        reward = curves["critic/rewards/mean"]
        assert len(reward) == 116 and reward.steps[0] == 1 and reward.steps[-1] == 116
        finals.append(reward.values[-1])
    first = read_curves(files[0], metric="critic/rewards/mean")[0]
    assert first.run == "dp_2_gpu_20251110_100611" and first.values[:2].tolist() == [0.0, 0.015625]
    timed = read_curves(files[0], metric="critic/rewards/mean", axis_column="timing_s/step")[0]
    assert timed.x[0] == 9.474421 and timed.x_name == "timing_s/step"


@pytest.mark.parametrize(
    ("name", "text", "needle"),
    [
        (
            "bad.csv",
            '"Step","run - m","run - m__MIN"\n"0","0.5","0.4"\n"5","oops","0.4"\n',
            "bad.csv:3: column 'run - m': 'oops' is not a number",
        ),
        ("short.csv", '"Step","run - m"\n"0","0.5"\n"5"\n', "short.csv:3: 1 cells but the header has 2"),
        ("plain.csv", "step,reward\n1,0.1\n2,x\n", "plain.csv:3: column 'reward': 'x' is not a number"),
        ("nostep.csv", "epoch,reward\n1,0.1\n", "unrecognised curve file (fix: pass --format"),
        ("empty.tfevents", "", "no scalar summaries"),
        (
            "mixed.csv",
            '"Step","run - m","run - m__MIN","loose"\n"0","0.5","0.5","1"\n',
            "column 4 'loose' is not '<run> - <metric>'",
        ),
    ],
)
def test_malformed_files_name_file_line_and_fix(tmp_path: Path, name: str, text: str, needle: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ImportFormatError, match="fix") as err:
        read_curves(path)
    assert needle in str(err.value) and str(path) in str(err.value)


def test_unknown_metric_and_axis_list_the_choices(tmp_path: Path) -> None:
    with pytest.raises(ImportFormatError, match=r"no metric matches 'nope' \(fix: use one of: val-core"):
        read_curves(WANDB / "loss_weight.csv", metric="nope")
    with pytest.raises(ImportFormatError, match=r"axis column 'flops' not in the header"):
        read_curves(VERL / "dp_2_gpu_20251110_100611_parsed.csv", axis_column="flops")
    with pytest.raises(ImportFormatError, match="cannot tell which compute unit"):
        infer_unit("timing_s/step")
    assert run_id_for("s", "r") == run_id_for("s", "r") != run_id_for("s2", "r")


def test_fractional_steps_are_rejected(tmp_path: Path) -> None:
    path = tmp_path / "frac.csv"
    path.write_text("step,reward\n1,0.1\n1.5,0.2\n")
    with pytest.raises(
        ImportFormatError, match=r"frac.csv: bad-step 1 \(line 3: step 1.5 is not a whole number\)"
    ):
        read_curves(path)
    assert read_curves(path, allow_partial=True)[0].steps.tolist() == [1]
