"""Bounded YAML: an alias bomb or an oversized document is a clear ConfigError, at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from scalerl.harness.errors import ConfigError
from scalerl.harness.recipe import load_sweep
from scalerl.harness.recipe.yamlio import MAX_DOCUMENT_BYTES, MAX_VALUES, parse_yaml


def _bomb(levels: int) -> str:
    lines = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels):
        prev, cur = chr(ord("a") + i - 1), chr(ord("a") + i)
        lines.append(f"{cur}: &{cur} [" + ", ".join([f"*{prev}"] * 9) + "]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("levels", [7, 9])
def test_an_alias_bomb_is_refused_with_the_fix(tmp_path: Path, levels: int) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text("sweep: s\nbase: x.yaml\n" + _bomb(levels))
    with pytest.raises(ConfigError) as info:  # 9**7 = 4.8M values before the bound
        load_sweep(path)
    msg = str(info.value)
    assert str(path) in msg and f"more than {MAX_VALUES:,} values" in msg and "fix:" in msg


def test_ordinary_aliases_still_work() -> None:
    data, _ = parse_yaml("base: &b {lr: 0.001, k: 2}\nother: *b\nmerged: {<<: *b, t: 4}\n", "ok.yaml")
    assert data["other"] == {"lr": 0.001, "k": 2} and data["merged"] == {"lr": 0.001, "k": 2, "t": 4}


def test_an_oversized_document_is_refused_before_parsing() -> None:
    text = "a: " + "x" * (MAX_DOCUMENT_BYTES + 1) + "\n"
    with pytest.raises(ConfigError, match="more than the 1,048,576 a recipe or sweep may be"):
        parse_yaml(text, "big.yaml")


@pytest.mark.parametrize(
    ("name", "needle"), [("..", "pattern"), (".hidden", "pattern"), ("x" * 5000, "at most 100")]
)
def test_a_sweep_name_that_escapes_the_state_dir_or_overflows_is_refused(
    tmp_path: Path, name: str, needle: str
) -> None:
    from tests.unit.execution.helpers import REPO

    path = tmp_path / "s.yaml"
    path.write_text(f"sweep: '{name}'\nbase: {REPO / 'recipes' / 'tiny.yaml'}\n")
    with pytest.raises(ConfigError) as info:
        load_sweep(path)
    assert needle in str(info.value) and f"{path}:1" in str(info.value)
