"""One convention per condition across the commands (README, "Scripting with --json, and exit
codes"): the same exit code and message for a sweep or store that is not there, `--db` as a path,
did-you-mean for a mistyped command, `$SCALERL_SWEEP` wherever a sweep is named, the Python API's
own wording, and progress on a terminal only (stderr; never under --json)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from scalerl.harness.cli import main
from scalerl.harness.errors import NotFoundError
from tests.fixtures import report_sweep

# The commands that read a stored sweep by name.
READERS = ("status", "fit", "forecast", "report", "cancel")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("conventions") / "scalerl.db"
    report_sweep.write_sweep(f"sqlite:///{path}")
    return path


def test_a_missing_store_is_exit_4_everywhere_and_never_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nowhere.db"
    for command in (*READERS, "ls"):
        argv = [command] + ([] if command == "ls" else ["x"]) + ["--db", f"sqlite:///{missing}"]
        assert main(argv) == 4, command
        assert "no store at" in capsys.readouterr().err, command
    assert not missing.exists()  # `scalerl cancel` used to create it and then say "no such sweep"


def test_db_takes_a_path(
    store: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["status", report_sweep.SWEEP, "--db", str(store), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["sweep"] == report_sweep.SWEEP
    monkeypatch.chdir(store.parent)  # a relative path is the file under the working folder
    assert main(["ls", "--db", store.name, "--json"]) == 0
    assert report_sweep.SWEEP in capsys.readouterr().out
    from scalerl.harness import Sweep

    assert not Sweep.open(report_sweep.SWEEP, db=str(store)).runs().empty


def test_a_mistyped_command_names_the_one_meant(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["fti", "loo"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'fti'" in err and "did you mean 'fit'?" in err
    with pytest.raises(SystemExit):
        main(["--json", "reprot"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["error"]["exit_code"] == 2 and "did you mean 'report'?" in doc["error"]["message"]


def test_the_sweep_comes_from_scalerl_sweep(
    store: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("SCALERL_SWEEP", raising=False)
    with pytest.raises(SystemExit) as exited:
        main(["status", "--db", str(store)])
    assert exited.value.code == 2 and "pass SWEEP, or set $SCALERL_SWEEP" in capsys.readouterr().err
    monkeypatch.setenv("SCALERL_SWEEP", report_sweep.SWEEP)
    assert main(["status", "--db", str(store), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["sweep"] == report_sweep.SWEEP
    assert main(["forecast", "--db", str(store), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["sweep"] == report_sweep.SWEEP
    monkeypatch.setenv("SCALERL_SWEEP", "loo-reprot")
    assert main(["fit", "--db", str(store)]) == 3
    assert "did you mean 'loo-report'?" in capsys.readouterr().err


def test_the_python_api_names_its_own_argument(store: Path) -> None:
    from scalerl.harness import Sweep

    sweep = Sweep.open(report_sweep.SWEEP, db=f"sqlite:///{store}")
    for call in (lambda: sweep.fit(metric="val/pass_rat", save=False), lambda: sweep.forecast(metric="nope")):
        with pytest.raises(NotFoundError) as err:
            call()
        assert "pass metric=NAME" in str(err.value) and "--metric" not in str(err.value)
    with pytest.raises(NotFoundError, match="did you mean 'loo-report'"):
        Sweep.open("loo-reprot", db=f"sqlite:///{store}")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_fit_import_and_report_show_progress_on_a_terminal_only(
    store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from scalerl.harness.cli import busy

    shown: list[str] = []
    real = busy.Activity.step

    def seen(self: busy.Activity, text: str) -> None:
        shown.append(text)
        real(self, text)

    monkeypatch.setattr(busy.Activity, "step", seen)
    terminal = _Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    out = tmp_path / "r.html"
    assert main(["report", report_sweep.SWEEP, "--db", str(store), "-o", str(out)]) == 0
    assert main(["fit", report_sweep.SWEEP, "--db", str(store), "--no-save", "--boot", "20"]) == 0
    drawn = terminal.getvalue()
    assert "\x1b[" in drawn  # rich drew (and cleared) its line on the terminal
    assert shown == [f"drawing {len(report_sweep.TRUTH) * 2} runs"]
    stdout = capsys.readouterr().out
    assert "\x1b[" not in stdout and "report:" in stdout  # never on stdout

    # Under --json, or when stderr is no terminal, nothing is drawn.
    terminal.seek(0)
    terminal.truncate()
    assert main(["fit", report_sweep.SWEEP, "--db", str(store), "--no-save", "--boot", "20", "--json"]) == 0
    assert "\x1b[" not in terminal.getvalue()
    monkeypatch.setattr("sys.stderr", io.StringIO())
    assert busy.on_terminal(False) is False
