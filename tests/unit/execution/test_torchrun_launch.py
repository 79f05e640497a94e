"""The command runner's torchrun launch: the command line it builds, and the recipe's checks."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from scalerl.harness.errors import ConfigError
from scalerl.harness.execution.runners.base import RunContext
from scalerl.harness.execution.runners.command import build_command, check_templates, torchrun_program
from scalerl.harness.execution.spec import Resources, RunSpec
from scalerl.harness.recipe.schema import Recipe


def _argv(tmp_path: Path, runner: dict[str, Any], gpus: int) -> list[str]:
    recipe = Recipe.model_validate({"name": "c", "runner": runner})
    spec = RunSpec("s", "baseline", None, None, 2, "r-s2", recipe.model_dump(mode="json"), str(tmp_path),
                   resources=Resources(gpus_per_node=gpus))  # fmt: skip
    ctx = RunContext(spec, 1, None, tmp_path, threading.Event(), None)  # type: ignore[arg-type]
    return build_command(ctx)[0]


def test_torchrun_wraps_argv_with_one_process_per_gpu(tmp_path: Path) -> None:
    runner = {"type": "command", "argv": ["python3", "train.py", "--seed", "{seed}"], "launcher": "torchrun"}
    torchrun = torchrun_program()  # this interpreter's torch, else torchrun on PATH (a torch-free venv)
    assert torchrun[-1] in ("torch.distributed.run", "torchrun") or torchrun[-1].endswith("/torchrun")
    assert _argv(tmp_path, runner, gpus=4) == [
        *torchrun, "--standalone", "--nproc-per-node", "4", "--no-python",
        "python3", "train.py", "--seed", "2",
    ]  # fmt: skip
    k = len(torchrun)
    assert _argv(tmp_path, runner, gpus=0)[k : k + 3] == ["--standalone", "--nproc-per-node", "1"]  # CPU: one
    explicit = runner | {"nproc_per_node": 2}
    assert _argv(tmp_path, explicit, gpus=8)[k : k + 3] == ["--standalone", "--nproc-per-node", "2"]
    plain = {"type": "command", "argv": ["python3", "train.py"]}  # no launcher: as before, at any GPU count
    assert _argv(tmp_path, plain, gpus=4) == ["python3", "train.py"]


def test_the_launcher_keeps_old_run_ids_and_checks_its_fields() -> None:
    plain = Recipe.model_validate({"name": "c", "runner": {"type": "command", "argv": ["t.py"]}})
    assert "launcher" not in plain.resolved()["runner"]  # unset: left out, so run ids do not move
    with_it = {"type": "command", "argv": ["t.py"], "launcher": "torchrun", "nproc_per_node": 2}
    dumped = Recipe.model_validate({"name": "c", "runner": with_it}).resolved()["runner"]
    assert (dumped["launcher"], dumped["nproc_per_node"]) == ("torchrun", 2)
    base = {"type": "command", "argv": ["t.py"]}
    with pytest.raises(ValidationError, match="nproc_per_node=2 without a launcher"):
        Recipe.model_validate({"name": "c", "runner": base | {"nproc_per_node": 2}})
    with pytest.raises(ValidationError, match="launcher"):
        Recipe.model_validate({"name": "c", "runner": base | {"launcher": "mpirun"}})


def test_torchrun_over_several_slurm_tasks_is_refused_before_submission(tmp_path: Path) -> None:
    runner = {"type": "command", "argv": ["python3", "train.py"], "launcher": "torchrun"}
    recipe = Recipe.model_validate({"name": "c", "runner": runner}).model_dump(mode="json")
    one = RunSpec("s", "b", None, None, 0, "r", recipe, str(tmp_path), resources=Resources(gpus_per_node=8))
    check_templates(one)  # one node, one task: torchrun starts the 8 ranks
    two = RunSpec("s", "b", None, None, 0, "r", recipe, str(tmp_path), resources=Resources(nodes=2))
    with pytest.raises(ConfigError, match=r"2 node\(s\) x 1 task\(s\)") as err:
        check_templates(two)
    assert err.value.field == "runner.launcher"
