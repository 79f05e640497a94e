"""The ``scalerl`` entry point itself: argument handling shared by every command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scalerl.harness.cli import main

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


def test_verbose_works_after_the_command_and_a_closed_pipe_is_quiet(tmp_path: Path) -> None:
    """`scalerl plan X -v` is accepted; `scalerl plan --json | head -1` leaves no traceback."""
    import subprocess
    import sys

    from tests.unit.execution.helpers import REPO

    sweep = str(REPO / "recipes" / "tiny-loo.yaml")
    assert main(["plan", sweep, "-v"]) == 0
    # The reader is gone before the command writes a byte (as `| head` is after its lines).
    proc = subprocess.Popen(
        [sys.executable, "-m", "scalerl.harness", "plan", sweep, "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141
    assert "Traceback" not in err and "BrokenPipeError" not in err


def test_exit_codes_say_what_went_wrong(tmp_path: Path) -> None:
    from scalerl.harness.errors import (
        AnalysisError,
        ConfigError,
        ExecutionError,
        HarnessError,
        ImportFormatError,
        StoreError,
    )

    codes = [HarnessError.exit_code, ConfigError.exit_code, StoreError.exit_code, ExecutionError.exit_code,
             AnalysisError.exit_code, ImportFormatError.exit_code]  # fmt: skip
    assert codes == [1, 3, 4, 5, 6, 7]  # 2 stays argparse's usage error
    assert main(["plan", str(tmp_path / "missing.yaml")]) == 3


@pytest.mark.parametrize(
    "argv",
    [
        ["sweep", str(TINY_LOO), "--max-parallel", "0"],
        ["sweep", str(TINY_LOO), "--max-parallel", "-1"],
        ["sweep", str(TINY_LOO), "--workers", "x"],
        ["train", str(TINY_LOO), "--seed", "-1"],
    ],
)
def test_bad_numbers_are_usage_errors_before_anything_runs(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--db", f"sqlite:///{tmp_path / 'never.db'}"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert ("must be" in err or "not a whole number" in err) and "Traceback" not in err
    assert not (tmp_path / "never.db").exists()


def test_report_to_a_folder_is_refused_and_leaves_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", "any", "-o", str(tmp_path), "--db", f"sqlite:///{tmp_path / 'x.db'}"]) == 3
    assert "is a folder, not a file" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_url_with_a_non_numeric_port_is_a_store_error_not_a_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["status", "x", "--db", "postgresql://lab:pw-secret@db:abc/runs"]) == 4
    err = capsys.readouterr().err
    assert "is not a valid URL" in err and "pw-secret" not in err and "Traceback" not in err


def test_sweep_and_status_speak_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.unit.execution.helpers import write_command_sweep

    sweep = write_command_sweep(tmp_path, steps=10, executor="debug")
    url = f"sqlite:///{tmp_path / 's.db'}"
    assert main(["sweep", str(sweep), "--db", url, "--state-dir", str(tmp_path / "st"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["sweep"] == "cmd" and out["executor"] == "debug"
    assert [(d["variant"], d["action"]) for d in out["decisions"]] == [
        ("baseline", "submit"),
        ("loo-dapo", "submit"),
    ]
    assert main(["status", "cmd", "--db", url, "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["counts"]["completed"] == 2 == status["counts"]["total"]
    assert {r["status"] for r in status["runs"]} == {"completed"}
    assert {r["run_id"] for r in status["runs"]} == {d["run_id"] for d in out["decisions"]}
