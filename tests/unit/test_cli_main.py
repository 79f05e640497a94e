"""The ``scalerl`` entry point itself: argument handling shared by every command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main

TINY_LOO = Path(__file__).resolve().parents[2] / "recipes" / "tiny-loo.yaml"


def test_overrides_after_options_are_still_overrides(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(TINY_LOO), "--json", "seeds=[0, 1]"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 18 and {r["seed"] for r in rows} == {0, 1}


def test_unknown_option_is_an_error_not_an_override(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["plan", str(TINY_LOO), "--bogus"])
    assert exc.value.code == 2
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err


def test_no_command_prints_help_and_fails(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "plan" in capsys.readouterr().out
