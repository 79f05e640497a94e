"""The local executor's GPU sets and the torchrun launch, for real: detached schedulers, job
subprocesses, a real torchrun with two gloo ranks on CPU. The GPU ids are injected
(``SCALERL_GPUS``): this machine has none, and the sets are what CUDA_VISIBLE_DEVICES names."""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from scalerl.harness import Sweep
from tests.unit.execution.helpers import REPO

PROBE = """\
import json, os, sys, time
from pathlib import Path
start = time.time()
time.sleep(float(sys.argv[2]))
with open(os.environ["SCALERL_METRICS_FILE"], "a") as fh:
    fh.write(json.dumps({"step": 1, "metrics": {"val/pass_rate": 0.5}, "compute": {"flops": 1.0}}))
    fh.write("\\n")
out = Path(sys.argv[1]) / (os.environ["SCALERL_RUN_ID"] + ".json")
cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
out.write_text(json.dumps({"cvd": cvd, "start": start, "end": time.time()}))
"""

RANKS = """\
import json, os, sys
from pathlib import Path
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
total = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(total)  # 1 + 2 over two ranks: the ranks really talk to each other
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
if rank == 0:  # only rank 0 reports points
    with open(os.environ["SCALERL_METRICS_FILE"], "a") as fh:
        fh.write(json.dumps({"step": 1, "metrics": {"val/pass_rate": 0.5}, "compute": {"flops": 1.0}}))
        fh.write("\\n")
record = {"rank": rank, "world": world, "sum": total.item(), "cvd": os.environ.get("CUDA_VISIBLE_DEVICES")}
(Path(sys.argv[1]) / f"rank{rank}.json").write_text(json.dumps(record))
dist.destroy_process_group()
"""


def _sweep(folder: Path, script: str, args: list[str], *, seeds: list[int], gpus: int, **runner: Any) -> Path:
    (folder / "script.py").write_text(script)
    recipe = {
        "extends": str(REPO / "recipes" / "tiny.yaml"),
        "name": "gpu-recipe",
        "runner": {"type": "command", "argv": [sys.executable, str(folder / "script.py"), *args], **runner},
        "budget": {"value": 1, "unit": "steps"},
    }
    (folder / "recipe.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
    sweep = {
        "sweep": "gpu", "base": "recipe.yaml", "design": "loo", "loo": {"knobs": []}, "seeds": seeds,
        "resources": {"cpus": 1, "gpus": gpus, "mem_gb": 1, "time_min": 10}, "executor": "local",
    }  # fmt: skip
    (folder / "sweep.yaml").write_text(yaml.safe_dump(sweep, sort_keys=False))
    return folder / "sweep.yaml"


@pytest.fixture
def own_slots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Schedulers (subprocesses) keep their run slots and GPU locks in this test's slot folder
    ($SCALERL_SLOT_DIR), so other tests' local runs on this machine do not share them."""
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    monkeypatch.setenv("SCALERL_SLOT_DIR", str(tmp_path / "tmp" / "slots"))


def test_each_local_run_gets_its_own_gpu_set_and_waits_for_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, own_slots: None
) -> None:
    """Four GPUs, three runs of two GPUs each and three run slots: two run at once on disjoint
    sets; the third waits in the scheduler for a set, not for a slot."""
    monkeypatch.setenv("SCALERL_GPUS", "0,1,2,3")
    out = tmp_path / "out"
    out.mkdir()
    path = _sweep(tmp_path, PROBE, [str(out), "2.0"], seeds=[0, 1, 2], gpus=2)
    with Sweep.from_yaml(path, db=f"sqlite:///{tmp_path / 's.db'}") as sweep:
        launched = sweep.launch(state_dir=tmp_path / "st", max_parallel=3)
        assert launched.count("submit") == 3
        snap = sweep.wait(timeout_s=180, interval_s=0.2)
        assert (snap.completed, snap.failed) == (3, 0)
    seen = {p.stem: json.loads(p.read_text()) for p in out.glob("*.json")}
    assert len(seen) == 3
    sets = {rid: set(r["cvd"].split(",")) for rid, r in seen.items()}
    for ids in sets.values():
        assert len(ids) == 2 and ids <= {"0", "1", "2", "3"}
    overlapping = 0
    for a, b in itertools.combinations(seen, 2):
        if seen[a]["start"] < seen[b]["end"] and seen[b]["start"] < seen[a]["end"]:
            overlapping += 1
            assert not sets[a] & sets[b], f"{a} and {b} ran at once on GPUs {sets[a] & sets[b]}"
    assert overlapping < 3  # never all three at once: one waited for a free pair
    log = (tmp_path / "st" / "local" / "scheduler.log").read_text()
    assert "waits for 2 free GPU(s) of 4" in log
    assert log.count(" on GPU(s) ") == 3


def test_a_torchrun_command_run_starts_one_rank_per_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, own_slots: None
) -> None:
    """``launcher: torchrun`` with two GPUs: torchrun starts two gloo ranks (CPU), each seeing the
    run's GPU set; rank 0's point reaches the store."""
    monkeypatch.setenv("SCALERL_GPUS", "5,7")
    out = tmp_path / "out"
    out.mkdir()
    path = _sweep(tmp_path, RANKS, [str(out)], seeds=[0], gpus=2, launcher="torchrun")
    with Sweep.from_yaml(path, db=f"sqlite:///{tmp_path / 's.db'}") as sweep:
        sweep.launch(state_dir=tmp_path / "st", max_parallel=1)
        snap = sweep.wait(timeout_s=240, interval_s=0.2)
        assert (snap.completed, snap.failed, snap.points) == (1, 0, 1), sweep.status()["error"].tolist()
    ranks = sorted((json.loads(p.read_text()) for p in out.glob("rank*.json")), key=lambda r: r["rank"])
    assert ranks == [
        {"rank": 0, "world": 2, "sum": 3.0, "cvd": "5,7"},
        {"rank": 1, "world": 2, "sum": 3.0, "cvd": "5,7"},
    ]
