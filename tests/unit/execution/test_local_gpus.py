"""The local executor's GPU sets: which GPUs the machine has, and one set per run (real flocks)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from scalerl.harness.errors import ConfigError
from scalerl.harness.execution.executors.local_gpus import GpuPool, check_gpus, discover_gpus, spec_gpus
from scalerl.harness.execution.spec import Resources, RunSpec


def test_scalerl_gpus_wins_then_cuda_visible_devices_as_cuda_reads_it() -> None:
    both = {"SCALERL_GPUS": "4,5", "CUDA_VISIBLE_DEVICES": "0,1,2"}
    assert discover_gpus(both) == ("4", "5")
    assert discover_gpus({"SCALERL_GPUS": "none", "CUDA_VISIBLE_DEVICES": "0"}) == ()
    assert discover_gpus({"CUDA_VISIBLE_DEVICES": "0, 2,-1,3"}) == ("0", "2")  # CUDA stops at -1
    assert discover_gpus({"CUDA_VISIBLE_DEVICES": "-1"}) == ()
    assert discover_gpus({"CUDA_VISIBLE_DEVICES": "GPU-aa,GPU-bb"}) == ("GPU-aa", "GPU-bb")
    with pytest.raises(ConfigError, match=r"SCALERL_GPUS='0,0': a GPU list holds an empty or repeated id"):
        discover_gpus({"SCALERL_GPUS": "0,0"})


def test_nvidia_smi_lines_give_the_indices(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "nvidia-smi"
    fake.write_text(
        "#!/bin/sh\n"
        "echo 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1111)'\n"
        "echo '  MIG 1g.10gb     Device  0: (UUID: MIG-2222)'\n"
        "echo 'GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-3333)'\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert discover_gpus({}) == ("0", "1")
    fake.write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed' >&2\nexit 9\n")  # no driver: next source
    assert discover_gpus({}) in {(), tuple(str(i) for i in range(8))}  # torch's count (0 on CPU)


def test_each_run_gets_its_own_gpus_all_or_none(tmp_path: Path) -> None:
    pool = GpuPool({"SCALERL_GPUS": "0,1,2,3"}, lock_dir=tmp_path)
    first, second = pool.take(2), pool.take(2)
    assert first is not None and second is not None
    assert (first.ids, second.ids) == (("0", "1"), ("2", "3"))
    assert second.env() == {"CUDA_VISIBLE_DEVICES": "2,3"}
    other = GpuPool({"SCALERL_GPUS": "0,1,2,3"}, lock_dir=tmp_path)  # another scheduler
    assert other.take(1) is None  # all four held
    first.release()
    assert pool.take(3) is None  # two free: a run asking for three waits and holds none
    got = other.take(2)
    assert got is not None and got.ids == ("0", "1")
    with pytest.raises(
        ConfigError, match=r"resources.gpus=5: a run asks for 5 GPU\(s\); the local executor sees 4"
    ):
        pool.take(5)


def _spec(tmp_path: Path, gpus: int) -> RunSpec:
    res = Resources(gpus_per_node=gpus)
    return RunSpec("s", "baseline", None, None, 0, "r1", {}, str(tmp_path), resources=res)


def test_a_run_asking_for_more_gpus_than_the_machine_has_is_refused(tmp_path: Path) -> None:
    check_gpus([_spec(tmp_path, 0)], {"SCALERL_GPUS": ""})  # CPU runs need no GPU
    check_gpus([_spec(tmp_path, 2)], {"SCALERL_GPUS": "0,1"})
    too_many = r"asks for 3 GPU\(s\) but the local executor sees 2 \(0, 1\)"
    with pytest.raises(ConfigError, match=too_many) as err:
        check_gpus([_spec(tmp_path, 1), _spec(tmp_path, 3)], {"SCALERL_GPUS": "0,1"})
    assert err.value.field == "resources.gpus" and "SCALERL_GPUS" in str(err.value.fix)
    path = tmp_path / "1-r1.json"
    _spec(tmp_path, 2).write(path)
    assert spec_gpus(path) == 2
    path.write_text("{not json")
    assert spec_gpus(path) == 0
