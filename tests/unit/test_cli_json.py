"""``--json`` on every command (one document on stdout, errors included, same exit codes) and
``scalerl --version``."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from scalerl.harness.cli import build_parser, main
from tests.unit.execution.helpers import REPO

TINY_LOO = REPO / "recipes" / "tiny-loo.yaml"


def _leaf_parsers(parser: argparse.ArgumentParser, path: str = "") -> dict[str, argparse.ArgumentParser]:
    out: dict[str, argparse.ArgumentParser] = {}
    groups = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not groups:
        return {path: parser}
    for group in groups:
        for name, sub in group.choices.items():
            out.update(_leaf_parsers(sub, f"{path} {name}".strip()))
    return out


def test_every_command_takes_json() -> None:
    leaves = _leaf_parsers(build_parser())
    assert {"plan", "config", "sweep", "status", "cancel", "fit", "forecast", "report", "import", "train",
            "ls", "logs", "db upgrade", "db current", "db replay"} <= set(leaves)  # fmt: skip
    without = [name for name, p in leaves.items() if "--json" not in p._option_string_actions]
    assert without == []


def test_version_is_the_installed_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"scalerl {version('scalerl-harness')}"
    assert main(["--version", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"version": version("scalerl-harness")}


def test_an_error_is_a_json_document_with_the_same_exit_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(tmp_path / "missing.yaml")
    assert main(["plan", missing]) == 3
    plain = capsys.readouterr()
    assert plain.out == "" and "scalerl: error:" in plain.err
    # --json before the command works as well as after it.
    for argv in (["plan", missing, "--json"], ["--json", "plan", missing]):
        assert main(argv) == 3
        got = capsys.readouterr()
        doc = json.loads(got.out)
        assert doc["error"]["type"] == "ConfigError" and doc["error"]["exit_code"] == 3
        assert "missing.yaml" in doc["error"]["message"] and not doc["error"]["message"].startswith("error")
        assert "scalerl: error:" in got.err  # the person still reads it on stderr


def test_a_usage_error_is_a_json_document_too(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["plan", str(TINY_LOO), "--json", "--bogus"])
    assert exc.value.code == 2
    doc = json.loads(capsys.readouterr().out)
    assert doc["error"] == {
        "type": "UsageError",
        "message": "scalerl: unrecognized arguments: --bogus",
        "exit_code": 2,
    }


def test_human_text_goes_to_stderr_and_the_result_to_stdout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    assert main(["db", "upgrade", url, "--json"]) == 0
    got = capsys.readouterr()
    doc = json.loads(got.out)
    assert doc["before"] is None and doc["upgraded"] is True and doc["after"]
    assert "upgraded (empty) ->" in got.err
    assert main(["db", "current", url, "--json"]) == 0
    current = json.loads(capsys.readouterr().out)
    assert current["revision"] == current["head"] == doc["after"] and current["up_to_date"] is True


def test_config_json_carries_the_run_id_plan_gives(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(TINY_LOO), "--json"]) == 0
    plan = {(r["name"], r["seed"]): r["run_id"] for r in json.loads(capsys.readouterr().out)}
    assert main(["config", str(TINY_LOO), "loo-dapo", "--seed", "1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["run_id"] == plan[("loo-dapo", 1)] and doc["variant"] == "loo-dapo" and doc["seed"] == 1
    assert doc["config"]["knobs"]["loss"]["choice"] == "dapo"


def test_cancel_json_and_its_exit_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.unit.execution.helpers import write_command_sweep

    sweep = write_command_sweep(tmp_path, steps=10, executor="debug")
    url = f"sqlite:///{tmp_path / 's.db'}"
    assert (
        main(["sweep", str(sweep), "--db", url, "--state-dir", str(tmp_path / "st"), "--wait", "--json"]) == 0
    )
    got = capsys.readouterr()
    launched = json.loads(got.out)  # one document: the decisions, then the counts once waited for
    assert [d["action"] for d in launched["decisions"]] == ["submit", "submit"]
    assert launched["final"]["completed"] == 2 == launched["final"]["total"]
    assert "2/2 done" in got.err  # the progress went to stderr
    # Every run completed: nothing to cancel, exit 1 as without --json, and a document saying so.
    assert main(["cancel", "cmd", "--db", url, "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["sweep"] == "cmd" and doc["cancelled"] == 0 and len(doc["runs"]) == 2


def test_the_real_command_line_speaks_json_on_errors(tmp_path: Path) -> None:
    """The installed entry point, in its own process: stdout holds only the document."""
    done = subprocess.run(
        [sys.executable, "-m", "scalerl.harness", "--json", "status", "nope", "--db",
         f"sqlite:///{tmp_path / 'none.db'}"],
        capture_output=True, text=True, timeout=120, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 4, done.stderr
    doc = json.loads(done.stdout)
    assert doc["error"]["exit_code"] == 4 and doc["error"]["type"].endswith("Error")
    assert "none.db" in doc["error"]["message"]
