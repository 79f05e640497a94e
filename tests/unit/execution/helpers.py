"""Shared by the execution tests (unit and integration): small sweep files around the example
command trainer (recipes/examples/my_trainer.py), which runs in a fraction of a second."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[3]
TRAINER = REPO / "recipes" / "examples" / "my_trainer.py"


def write_command_sweep(
    folder: Path,
    *,
    name: str = "cmd",
    steps: int = 20,
    knobs: tuple[str, ...] = ("loss",),
    extra_args: tuple[str, ...] = (),
    report: str = "file",
    step_seconds: float = 0.0,
    max_retries: int = 1,
    executor: str = "debug",
    fail_variant_arg: str | None = None,
) -> Path:
    """A LOO sweep over ``knobs`` whose runs are my_trainer.py; returns the sweep file.

    ``fail_variant_arg``: a loss name; the run with that loss gets ``--fail-at 7``.
    """
    argv: list[str] = [
        sys.executable, str(TRAINER), "--loss", "{knobs.loss.choice}", "--seed", "{seed}",
        "--steps", "{budget.value}", "--report", report, "--step-seconds", str(step_seconds),
        "--eval-every", "5", "--checkpoint-every", "5", *extra_args,
    ]  # fmt: skip
    if fail_variant_arg:
        argv += ["--fail-loss", fail_variant_arg]
    recipe = {
        "extends": str(REPO / "recipes" / "tiny.yaml"),
        "name": f"{name}-recipe",
        "runner": {"type": "command", "argv": argv, "metrics_file": "metrics.jsonl"},
        "budget": {"value": steps, "unit": "steps"},
    }
    (folder / f"{name}-recipe.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
    sweep: dict[str, Any] = {
        "sweep": name,
        "base": f"{name}-recipe.yaml",
        "design": "loo",
        "loo": {"knobs": list(knobs)},
        "seeds": [0],
        "fit": {"metric": "val/pass_rate", "axis": "flops", "window": {"fraction": 0.1}},
        "resources": {"cpus": 1, "gpus": 0, "mem_gb": 1, "time_min": 10},
        "executor": executor,
        "max_retries": max_retries,
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(sweep, sort_keys=False))
    return path


def expected_steps(steps: int, every: int = 5) -> list[int]:
    return list(range(every, steps + 1, every))


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def wait_until_done(store: Any, sweep: str, timeout_s: float) -> Any:
    """Sync job states until every run of ``sweep`` is completed or failed; returns the runs frame."""
    import time

    from scalerl.db import queries
    from scalerl.harness.execution.progress import snapshot
    from scalerl.harness.execution.status import sync

    deadline = time.monotonic() + timeout_s
    while True:
        sync(store, sweep)
        snap = snapshot(store, sweep)
        if snap.total and snap.done:
            return queries.runs(store, sweep)
        if time.monotonic() > deadline:
            raise AssertionError(
                f"sweep {sweep} not done after {timeout_s} s: {snap.headline()}\n{snap.table}"
            )
        time.sleep(1.0)


def client_run(tmp_path: Path, monkeypatch: Any) -> Any:
    """A store at ``tmp_path`` with sweep ``s`` and run ``r1`` started, and the environment a
    harness-launched process gives ``scalerl.harness.client`` (rank 0); returns the store."""
    from scalerl import db

    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = db.open_store(url, spool_dir=tmp_path / "spool")
    store.ensure_sweep("s", {})
    store.register_run(db.RunRecord("r1", "s", "baseline", 0, {}, "h"))
    attempt = store.start_attempt("r1")
    for key, value in {
        "SCALERL_RUN_ID": "r1",
        "SCALERL_ATTEMPT": str(attempt),
        "SCALERL_DB_URL": url,
        "SCALERL_SPOOL_DIR": str(tmp_path / "spool"),
    }.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("SLURM_PROCID", raising=False)
    return store


def git(repo: Path, *args: str) -> str:
    """Run git in ``repo`` with a throwaway identity (tests make real commits); its stdout."""
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", "-c", "commit.gpgsign=false", *args],
        cwd=repo, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.strip()
