"""Cluster manners: the scheduler is asked about our jobs only, and not every tick; profiles are
found where a lab keeps them."""

from __future__ import annotations

import getpass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from scalerl.harness.errors import ConfigError
from scalerl.harness.execution.executors import slurm
from scalerl.harness.execution.executors.base import ExecutorContext, JobHandle, JobState
from scalerl.harness.execution.progress import Throttle
from scalerl.harness.execution.sweep import resolve_profile


def test_poll_asks_squeue_for_this_users_jobs_only(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls: list[list[str]] = []

    def fake_run(argv: list[str]) -> str:
        calls.append(argv)
        return "12_0|RUNNING\n12_1|PENDING\n"

    monkeypatch.setattr(slurm, "_run", fake_run)
    monkeypatch.setattr(slurm, "_require", lambda cmd: cmd)
    ex = slurm.SlurmExecutor(ExecutorContext(tmp_path))
    states = ex.poll([JobHandle("a", "slurm", "12_0"), JobHandle("b", "slurm", "12_1")])
    assert states == {"a": JobState.RUNNING, "b": JobState.PENDING}
    assert calls == [["squeue", "-h", "-r", "-u", getpass.getuser(), "-o", "%i|%T"]]  # no sacct needed


def test_the_scheduler_is_polled_at_most_every_poll_s(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    monkeypatch.setattr("scalerl.harness.execution.progress.time.monotonic", lambda: now[0])
    hits: list[float] = []
    throttle = Throttle(lambda: hits.append(now[0]), 60.0)
    for t in range(0, 181, 2):  # a --wait loop ticking every 2 s for 3 minutes
        now[0] = 1000.0 + t
        throttle()
    assert hits == [1000.0, 1060.0, 1120.0, 1180.0]


def _sweep(profile: str | None) -> Any:
    return SimpleNamespace(resources=SimpleNamespace(profile=profile), path=None)


def test_profiles_are_found_on_the_path_variable_then_the_user_config(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    site, home = tmp_path / "site", tmp_path / "xdg"
    (site).mkdir()
    (home / "scalerl" / "profiles").mkdir(parents=True)
    (site / "gpu.yaml").write_text("partition: site-gpu\n")
    (home / "scalerl" / "profiles" / "gpu.yaml").write_text("partition: my-gpu\n")
    (home / "scalerl" / "profiles" / "mine.yaml").write_text("partition: mine\n")
    monkeypatch.setenv("SCALERL_PROFILE_PATH", str(site))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    monkeypatch.chdir(tmp_path)  # no slurm/profiles here
    assert resolve_profile(_sweep("gpu"), None).partition == "site-gpu"  # the path variable wins
    assert resolve_profile(_sweep(None), "mine").partition == "mine"  # then the user's config dir
    with pytest.raises(ConfigError) as info:
        resolve_profile(_sweep("nope"), None)
    msg = str(info.value)
    assert str(site) in msg and "['gpu', 'mine']" in msg and "SCALERL_PROFILE_PATH" in msg
