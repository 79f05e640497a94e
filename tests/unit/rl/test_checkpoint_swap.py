"""The reference trainer's checkpoint swap with two attempts of one run saving into one folder
(a superseded attempt still stopping while its successor checkpoints): neither save fails, and a
load meanwhile always finds a whole checkpoint."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

import torch

from scalerl.harness.rl import checkpoint


def _saver(workdir: str, writer: int, n: int) -> int:
    for i in range(n):
        checkpoint.save(Path(workdir), {"writer": writer, "step": i, "w": torch.full((4,), float(i))})
    return n


def _loader(workdir: str, n: int) -> int:
    seen = 0
    for _ in range(n):
        state = checkpoint.load(Path(workdir))
        if state is not None:
            assert float(state["w"][0]) == state["step"]  # a whole checkpoint, never half of two
            seen += 1
    return seen


def test_two_attempts_saving_into_one_folder_never_fail_and_loads_see_whole_checkpoints(
    tmp_path: Path,
) -> None:
    ctx = mp.get_context("spawn")  # torch in the parent: no fork
    with ctx.Pool(3) as pool:
        saves = [pool.apply_async(_saver, (str(tmp_path), w, 300)) for w in (0, 1)]
        loads = pool.apply_async(_loader, (str(tmp_path), 300))
        assert [s.get(timeout=240) for s in saves] == [300, 300]
        assert loads.get(timeout=240) >= 0
    final = checkpoint.load(tmp_path)
    assert final is not None and final["step"] == 299 and final["writer"] in (0, 1)
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == [".checkpoint.lock", "checkpoint"]  # no temporary or .old directory behind


def test_load_of_a_missing_folder_is_none(tmp_path: Path) -> None:
    assert checkpoint.load(tmp_path / "never") is None
    assert not (tmp_path / "never").exists()  # reading does not create the folder
