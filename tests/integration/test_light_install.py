"""A bare ``pip install scalerl-harness`` (no extras) is the light client: no torch, no transformers.

The slow test builds the package from a copy of this checkout into a fresh venv (~30 s with a warm
pip cache; it needs the package index, as ``make setup`` does) and checks, in that venv, that the
client, the store and the CLI work, and that ``scalerl train`` says which extra to install instead
of dying with an ImportError traceback. The fast test pins the same message in this environment.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import harness.rl
from harness.cli import main

ROOT = Path(__file__).resolve().parents[2]
FIX = "pip install 'scalerl-harness[trainer]'"
# Where harness comes from, and which heavy modules importing the client pulled in.
PROBE = (
    "import sys, harness, harness.client, harness.cli, db; print(harness.__file__); "
    "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
)


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)


@pytest.mark.slow  # a fresh venv and a non-editable install (~30 s warm cache, ~2 min cold)
@pytest.mark.timeout(600)
def test_bare_install_has_no_torch_and_runs_the_client(tmp_path: Path) -> None:
    # Build from a copy, so the build's build/ and *.egg-info never land in the checkout.
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    for pkg in ("harness", "db"):
        shutil.copytree(ROOT / pkg, src / pkg, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    # Nothing of this checkout's environment may leak in: PYTHONPATH would make torch importable.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    venv = tmp_path / "venv"
    made = _run([sys.executable, "-m", "venv", str(venv)], tmp_path, env, 120)
    assert made.returncode == 0, made.stderr
    py, scalerl = venv / "bin" / "python", venv / "bin" / "scalerl"

    pip = _run([str(py), "-m", "pip", "install", "-q", str(src)], tmp_path, env, 480)
    assert pip.returncode == 0, f"pip install (no extras) failed:\n{pip.stdout[-3000:]}\n{pip.stderr[-3000:]}"

    for heavy in ("torch", "transformers"):
        probe = _run([str(py), "-c", f"import {heavy}"], tmp_path, env, 60)
        assert probe.returncode != 0, f"a bare install brought {heavy}"
        assert f"No module named '{heavy}'" in probe.stderr

    client = _run([str(py), "-c", PROBE], tmp_path, env, 60)
    assert client.returncode == 0, client.stderr
    where, loaded = client.stdout.splitlines()
    assert Path(where).is_relative_to(venv), f"imported harness from {where}, not the fresh venv"
    assert loaded == "[]"

    helped = _run([str(scalerl), "--help"], tmp_path, env, 60)
    assert helped.returncode == 0, helped.stderr
    assert "train" in helped.stdout and "import" in helped.stdout

    plan = _run([str(scalerl), "plan", str(ROOT / "recipes" / "tiny-loo.yaml"), "--json"], tmp_path, env, 60)
    assert plan.returncode == 0, plan.stderr
    assert '"name": "baseline"' in plan.stdout

    train = _run([str(scalerl), "train", str(ROOT / "recipes" / "tiny.yaml"), "--no-db"], tmp_path, env, 60)
    assert train.returncode == 5, (train.returncode, train.stdout, train.stderr)  # ExecutionError
    assert FIX in train.stderr and "torch and transformers" in train.stderr
    assert "Traceback" not in train.stderr + train.stdout


def test_train_without_the_trainer_extra_names_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(harness.rl, "TRAINER_PACKAGES", ("torch", "scalerl_no_such_package"))
    assert main(["train", str(ROOT / "recipes" / "tiny.yaml"), "--no-db", "--workdir", str(tmp_path)]) == 5
    err = capsys.readouterr().err
    assert f"needs scalerl_no_such_package, which this environment lacks (fix: {FIX})" in err
    assert not (tmp_path / "checkpoint").exists()
