"""The package installed without extras is the light client: no torch, no transformers, and none
of the ``analysis`` extra (numpy, pandas, scipy, plotly, pyarrow, optuna, ...).

The slow test follows the README's install path (a wheel built from a copy of this checkout,
installed by its path into a fresh venv: ~30 s with a warm pip cache; it needs the package index
for the dependencies, as ``make setup`` does) and checks, in that venv, that the
client, the store and the CLI work, that the only top-level import name is ``scalerl``, that a
lab's script beside its own ``db`` and ``harness`` packages logs through the client, and that
``scalerl train`` says which extra to install instead of dying with an ImportError traceback, as
``scalerl fit`` and ``report`` do for ``[analysis]``. The fast tests pin the same messages, and the
same lab-script check (logging points loads no analysis package), in this environment's install.
A TRL trainer's install (``[trl]``) is checked with pip's own resolver against a lab's TRL pin,
offline (tests/fixtures/wheelhouse.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from scalerl import db
from scalerl.harness import rl
from scalerl.harness.cli import fit as fit_cli
from scalerl.harness.cli import main
from scalerl.harness.extras import ANALYSIS_FIX, ANALYSIS_PACKAGES

ROOT = Path(__file__).resolve().parents[2]
FIX = "pip install 'scalerl-harness[trainer]'"
# Where scalerl comes from, whether the generic names leaked as top-level packages, and which heavy
# modules importing the client pulled in.
PROBE = (
    "import importlib.util, sys, scalerl, scalerl.harness.client, scalerl.harness.cli, scalerl.db; "
    "print(scalerl.harness.__file__); "
    "print([m for m in ('harness', 'db') if importlib.util.find_spec(m) is not None]); "
    "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
)
# What a trainer that reports points never needs: the trainer extra's and the analysis extra's packages.
HEAVY = ("torch", "transformers", *ANALYSIS_PACKAGES)
MIGRATIONS = "import scalerl.db.schema as s; print(len(list(s.MIGRATIONS_DIR.glob('versions/*.py'))))"

# A lab's trainer repository: its own top-level ``db`` and ``harness`` packages, unrelated to ours.
LAB_DB = '"""The lab\'s own experiment database helpers (no open_store here)."""\nTABLES = ("experiments",)\n'
LAB_HARNESS = '"""The lab\'s own evaluation harness."""\nRIG = "lab-eval"\n'
LAB_TRAIN = """\
import sys

import db
import harness

# The lab's packages are the ones on the path ...
assert db.TABLES == ("experiments",) and harness.RIG == "lab-eval", (db.__file__, harness.__file__)

# ... and the documented import of the client still reaches the harness's own store.
from scalerl.harness import client

for step, value in enumerate((0.25, 0.5, 0.625)):
    client.log(step, {"val/pass_rate": value}, compute={"samples": 64 * (step + 1)}, n={"val/pass_rate": 256})
client.close()
assert sys.modules["db"] is db and sys.modules["harness"] is harness
# Reporting points loads none of the analysis libraries (nor torch), installed or not.
heavy = sorted(m for m in HEAVY if m in sys.modules)
assert not heavy, f"logging points loaded {heavy}"
print("lab-script-ok", db.TABLES[0], harness.RIG)
"""


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)


def _clean_env() -> dict[str, str]:
    """This process's environment without anything that would put this checkout on the path."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}


def _log_from_lab_repo(python: Path, tmp: Path) -> None:
    """Run a lab's script with ``python`` from a folder holding its own ``db/`` and ``harness/``
    (the working directory and first on ``PYTHONPATH``); it logs three points through
    ``scalerl.harness.client`` into a real SQLite file, read back here."""
    lab = tmp / "lab"
    for name, text in (("db", LAB_DB), ("harness", LAB_HARNESS)):
        (lab / name).mkdir(parents=True)
        (lab / name / "__init__.py").write_text(text)
    (lab / "train.py").write_text(f"HEAVY = {HEAVY!r}\n" + LAB_TRAIN)
    url = f"sqlite:///{tmp / 'lab-store.db'}"
    store = db.open_store(url, spool_dir=tmp / "spool")
    try:
        store.ensure_sweep("lab", {})
        store.register_run(db.RunRecord("lab-r1", "lab", "baseline", 0, {}, "h"))
        attempt = store.start_attempt("lab-r1")
        env = {
            **_clean_env(),
            "PYTHONPATH": str(lab),
            "SCALERL_RUN_ID": "lab-r1",
            "SCALERL_ATTEMPT": str(attempt),
            "SCALERL_DB_URL": url,
            "SCALERL_SPOOL_DIR": str(tmp / "spool"),
        }
        env.pop("RANK", None)
        env.pop("SLURM_PROCID", None)
        ran = _run([str(python), "train.py"], lab, env, 120)
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert ran.stdout.split() == ["lab-script-ok", "experiments", "lab-eval"]
        curve = db.curves(store, "lab", "val/pass_rate")
        assert curve["step"].tolist() == [0, 1, 2]
        assert curve["value"].tolist() == [0.25, 0.5, 0.625]
        assert curve["samples"].tolist() == [64.0, 128.0, 192.0]
        assert curve["n"].tolist() == [256.0, 256.0, 256.0]
    finally:
        store.close()


def test_a_lab_script_beside_its_own_db_and_harness_logs_through_the_client(tmp_path: Path) -> None:
    """This environment's install (editable in a checkout): ``from scalerl.harness import client``
    works from a lab repository whose own ``db``/``harness`` packages come first on the path."""
    _log_from_lab_repo(Path(sys.executable), tmp_path)


# The README's install path (section "Installing"): a wheel built from a checkout, installed by its
# path. The slow test runs exactly these commands (with this checkout for ./scalerl-harness).
README_BUILD = "python3 -m pip wheel --no-deps -w dist ./scalerl-harness"
README_INSTALL = "pip install dist/scalerl_harness-0.1.0-py3-none-any.whl"


def test_the_readme_installs_from_a_wheel_not_from_an_index() -> None:
    """No index a lab reaches has the package: the README gives the wheel it can build, and no
    bare ``pip install scalerl-harness`` (issue 38: `No matching distribution found`)."""
    import re

    readme = (ROOT / "README.md").read_text()
    assert README_BUILD in readme and README_INSTALL in readme
    assert f"'{README_INSTALL.split()[-1]}[analysis]'" in readme
    # An error message's `fix: pip install 'scalerl-harness[EXTRA]'` may be quoted; a command may not.
    bare = re.findall(r"(?<!fix: )pip install\s+'?scalerl-harness(?:\[[a-z-,]+\])?'?(?=[\s`)])", readme)
    assert not bare, bare


@pytest.mark.slow  # a fresh venv and a non-editable install (~30 s warm cache, ~2 min cold)
@pytest.mark.timeout(600)
def test_bare_install_has_no_torch_and_runs_the_client(tmp_path: Path) -> None:
    from tests.fixtures.wheelhouse import copy_checkout

    # The README's commands, on a copy named as a clone would be: the build's build/ and
    # *.egg-info never land in the checkout. scalerl/ keeps its relative symlinks to harness/ and db/.
    clone = copy_checkout(tmp_path / "scalerl-harness")
    assert (clone / "scalerl" / "harness").is_symlink() and (clone / "scalerl" / "db").is_symlink()
    # Nothing of this checkout's environment may leak in: PYTHONPATH would make torch importable.
    env = _clean_env()
    venv = tmp_path / "venv"
    made = _run([sys.executable, "-m", "venv", str(venv)], tmp_path, env, 120)
    assert made.returncode == 0, made.stderr
    py, scalerl = venv / "bin" / "python", venv / "bin" / "scalerl"

    build = README_BUILD.split()
    wheel = _run([str(py), *build[1:]], tmp_path, env, 480)  # python3 -> the fresh venv's python
    assert wheel.returncode == 0, f"{README_BUILD} failed:\n{wheel.stdout[-3000:]}\n{wheel.stderr[-3000:]}"
    pip = _run([str(py), "-m", *README_INSTALL.split(), "-q"], tmp_path, env, 480)
    assert pip.returncode == 0, f"{README_INSTALL} failed:\n{pip.stdout[-3000:]}\n{pip.stderr[-3000:]}"
    version = _run([str(scalerl), "--version"], tmp_path, env, 60)
    assert version.stdout.split() == ["scalerl", "0.1.0"], version.stdout + version.stderr

    found = "import importlib.util as u, sys; print([m for m in sys.argv[1:] if u.find_spec(m) is not None])"
    probe = _run([str(py), "-c", found, *HEAVY], tmp_path, env, 60)
    assert probe.returncode == 0 and probe.stdout.strip() == "[]", f"a bare install brought {probe.stdout}"

    client = _run([str(py), "-c", PROBE], tmp_path, env, 60)
    assert client.returncode == 0, client.stderr
    where, top_level, loaded = client.stdout.splitlines()
    assert Path(where).is_relative_to(venv), f"imported scalerl.harness from {where}, not the fresh venv"
    assert top_level == "[]", f"the install put generic top-level packages on the path: {top_level}"
    assert loaded == "[]"
    # The wheel holds copies (not links) and the Alembic migrations under the new name.
    migrations = _run([str(py), "-c", MIGRATIONS], tmp_path, env, 60)
    assert migrations.returncode == 0 and int(migrations.stdout) >= 3, migrations.stdout + migrations.stderr

    _log_from_lab_repo(py, tmp_path)

    helped = _run([str(scalerl), "--help"], tmp_path, env, 60)
    assert helped.returncode == 0, helped.stderr
    assert "train" in helped.stdout and "import" in helped.stdout
    as_module = _run([str(py), "-m", "scalerl.harness", "--help"], tmp_path, env, 60)
    assert as_module.returncode == 0 and as_module.stdout == helped.stdout, as_module.stderr

    plan = _run([str(scalerl), "plan", str(ROOT / "recipes" / "tiny-loo.yaml"), "--json"], tmp_path, env, 60)
    assert plan.returncode == 0, plan.stderr
    assert '"name": "baseline"' in plan.stdout

    train = _run([str(scalerl), "train", str(ROOT / "recipes" / "tiny.yaml"), "--no-db"], tmp_path, env, 60)
    assert train.returncode == 5, (train.returncode, train.stdout, train.stderr)  # ExecutionError
    assert FIX in train.stderr and "torch and transformers" in train.stderr
    assert "Traceback" not in train.stderr + train.stdout

    # Reading, fitting and reporting need the analysis extra, and say so.
    url = f"sqlite:///{tmp_path / 'lab-store.db'}"
    for command in (["fit", "lab"], ["report", "lab", "-o", str(tmp_path / "r.html")]):
        done = _run([str(scalerl), *command, "--db", url], tmp_path, env, 60)
        assert done.returncode == 5, (command, done.returncode, done.stdout, done.stderr)
        assert f"scalerl {command[0]} needs " in done.stderr and ANALYSIS_FIX in done.stderr, done.stderr
        assert "Traceback" not in done.stderr + done.stdout


def test_train_without_the_trainer_extra_names_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(rl, "TRAINER_PACKAGES", ("torch", "scalerl_no_such_package"))
    assert main(["train", str(ROOT / "recipes" / "tiny.yaml"), "--no-db", "--workdir", str(tmp_path)]) == 5
    err = capsys.readouterr().err
    assert f"needs scalerl_no_such_package, which this environment lacks (fix: {FIX})" in err
    assert not (tmp_path / "checkpoint").exists()


def test_a_command_without_the_analysis_extra_names_the_fix(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def no_scipy(args: object) -> int:
        raise ModuleNotFoundError("No module named 'scipy'", name="scipy.optimize")

    monkeypatch.setattr(fit_cli, "_fit", no_scipy)
    assert main(["fit", "loo"]) == 5
    err = capsys.readouterr().err
    want = f"scalerl: error: scalerl fit needs scipy, which this environment lacks (fix: {ANALYSIS_FIX})\n"
    assert err == want

    def not_ours(args: object) -> int:  # any other missing module is a bug, not a missing extra
        raise ModuleNotFoundError("No module named 'scalerl_gone'", name="scalerl_gone")

    monkeypatch.setattr(fit_cli, "_fit", not_ours)
    with pytest.raises(ModuleNotFoundError, match="scalerl_gone"):
        main(["fit", "loo"])


# What a trainer's environment must never get from installing the harness beside it.
NOT_FOR_TRAINERS = ("scipy", "optuna", "plotly", "submitit", "numpy", "pandas", "pyarrow")


def test_the_trl_extra_installs_beside_a_labs_pinned_trl(tmp_path: Path) -> None:
    """pip's own resolver, offline, against this package's real metadata and stand-in wheels: a
    lab pinned to TRL 1.15 gets the callback's install (``[trl]``) without a conflict and without
    the analysis stack; the ``trl`` runner's extra still says it needs 1.16."""
    import json

    from tests.fixtures.wheelhouse import build_house, resolve

    house, _ = build_house(tmp_path, {"trl": "1.15.0"})
    report = tmp_path / "report.json"
    done = resolve(house, "scalerl-harness[trl]", "trl==1.15.0", report=report)
    assert done.returncode == 0, done.stdout + done.stderr
    chosen = {
        i["metadata"]["name"].lower(): i["metadata"]["version"]
        for i in json.loads(report.read_text())["install"]
    }
    assert chosen["trl"] == "1.15.0" and "scalerl-harness" in chosen
    assert not set(NOT_FOR_TRAINERS) & set(chosen), sorted(chosen)

    # The light base install and the callback need no trl at all: a lab without TRL is fine too.
    done = resolve(house, "scalerl-harness", report=report)
    assert done.returncode == 0, done.stderr
    bare = {i["metadata"]["name"].lower() for i in json.loads(report.read_text())["install"]}
    assert "trl" not in bare and not set(NOT_FOR_TRAINERS) & bare

    # The runner's extra keeps its floor: against the lab's 1.15 pin, pip refuses it by name.
    refused = resolve(house, "scalerl-harness[trl-runner]", "trl==1.15.0", report=report)
    assert refused.returncode != 0
    assert "trl" in refused.stderr and (
        "conflict" in refused.stderr.lower() or "ResolutionImpossible" in refused.stderr
    )
