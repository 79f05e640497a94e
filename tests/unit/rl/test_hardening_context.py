"""Issue 26, rule 3 on the dataset task: a prompt longer than the checkpoint's context is refused
before the run trains (never truncated, never run at gigabytes), naming the rows and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from scalerl.harness.errors import ConfigError
from scalerl.harness.recipe import load_recipe
from scalerl.harness.rl.context import check_prompt_lengths
from scalerl.harness.rl.tasks.base import Problem, Split
from scalerl.harness.rl.tokenizer import CharTokenizer
from scalerl.harness.rl.toy import build_checkpoint, word_problems, write_jsonl

ROOT = Path(__file__).resolve().parents[3]
RECIPE = ROOT / "recipes" / "examples" / "toy-math.yaml"


def test_prompts_that_fit_pass_and_a_long_one_is_named() -> None:
    tok = CharTokenizer()
    fits = Problem("1+2=", "3", 0)
    long = Problem("1+" * 300 + "1=", "301", 0, where="data.jsonl:7")
    check_prompt_lengths(Split((fits,), (fits,)), tok, 512, 64)  # fits: no error
    with pytest.raises(ConfigError) as info:
        check_prompt_lengths(Split((fits, long, long), (fits,)), tok, 512, 64)
    msg = str(info.value)
    assert "2 of 3 train prompt(s) do not fit the checkpoint's context: 512 positions" in msg
    assert "at most 448 prompt tokens" in msg
    assert "data.jsonl:7: 603 tokens (602 characters)" in msg
    assert "prompts are never truncated" in msg and "lower scale.max_gen_len" in msg


def test_a_completion_budget_as_long_as_the_context_is_refused() -> None:
    fits = Problem("1+2=", "3", 0)
    with pytest.raises(ConfigError, match="leaves none for the prompt") as info:
        check_prompt_lengths(Split((fits,), ()), CharTokenizer(), 512, 512)
    assert info.value.field == "scale.max_gen_len"


def test_the_trainer_refuses_a_dataset_prompt_longer_than_the_checkpoint(tmp_path: Path) -> None:
    from scalerl.harness.rl.trainer import Trainer

    train = word_problems(40, 0)
    train[17]["question"] = "Tom has " + "many apples and " * 1100 + "how many?"  # ~18k characters
    write_jsonl(tmp_path / "train.jsonl", train)
    write_jsonl(tmp_path / "val.jsonl", word_problems(10, 1))
    texts = [r["question"] + " " + r["solution"] for r in train[:17]]
    ckpt = build_checkpoint(tmp_path / "ckpt", texts=texts, hidden=32, layers=1, heads=2, max_positions=512)
    recipe = load_recipe(
        RECIPE,
        [
            f"model.path={ckpt}",
            f"task.params.path={tmp_path / 'train.jsonl'}",
            f"task.params.val_path={tmp_path / 'val.jsonl'}",
            "task.n_train=40",
            "task.n_val=10",
        ],
    )
    with pytest.raises(ConfigError) as info:
        Trainer(recipe, 0)
    msg = str(info.value)
    assert "1 of 40 train prompt(s) do not fit the checkpoint's context: 512 positions" in msg
    assert f"{tmp_path / 'train.jsonl'}:18: " in msg  # the dataset row, 1-based line
