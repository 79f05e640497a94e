"""Atomic checkpoints in ``workdir/checkpoint/``: written to a temp dir, then renamed.

One file, ``state.pt`` (``torch.save`` of a dict: model, optimizer, scheduler, every RNG, sampler,
resampling history, step, the pipeline schedule with its in-flight cohorts and KV caches,
cumulative compute, metric accumulators). A crash at any moment leaves either the previous or the
new checkpoint complete: the new one is renamed over after the old one is moved aside, and a
leftover ``checkpoint.old`` is used if ``checkpoint`` is missing. The swap and the read hold
``.checkpoint.lock``: a superseded attempt still stopping may save into the same folder as its
successor, and two unguarded swaps can rename each other's directories away. The file is unpickled with
``weights_only=False`` (it holds Python objects): only load checkpoints this harness wrote.
"""

from __future__ import annotations

import fcntl
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from scalerl.harness.errors import HarnessError

NAME = "checkpoint"
FORMAT_VERSION = 1


@contextmanager
def _locked(workdir: Path, exclusive: bool) -> Iterator[None]:
    with (workdir / f".{NAME}.lock").open("a") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield  # (closing the file releases the lock)


def save(workdir: Path, state: dict[str, Any]) -> Path:
    workdir.mkdir(parents=True, exist_ok=True)
    target, old = workdir / NAME, workdir / f"{NAME}.old"
    tmp = Path(tempfile.mkdtemp(dir=workdir, prefix=f".{NAME}-"))
    try:
        torch.save({"format": FORMAT_VERSION, **state}, tmp / "state.pt")
        with _locked(workdir, exclusive=True):
            if old.exists():
                shutil.rmtree(old)
            if target.exists():
                target.rename(old)
            tmp.rename(target)
            shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # only left when the save failed
    return target


def load(workdir: Path) -> dict[str, Any] | None:
    """The latest complete checkpoint in ``workdir``, or None when there is none."""
    if not workdir.is_dir():
        return None
    with _locked(workdir, exclusive=False):
        return _load(workdir)


def _load(workdir: Path) -> dict[str, Any] | None:
    for name in (NAME, f"{NAME}.old"):
        path = workdir / name / "state.pt"
        if path.exists():
            try:
                state: dict[str, Any] = torch.load(path, weights_only=False)
            except Exception as err:  # a truncated file is a user-visible failure, not a crash
                raise HarnessError(
                    f"{path}: unreadable checkpoint ({err}); fix: delete it to restart the run"
                ) from err
            if state.get("format") != FORMAT_VERSION:
                raise HarnessError(
                    f"{path}: checkpoint format {state.get('format')!r}, expected "
                    f"{FORMAT_VERSION}; fix: delete it or use the matching harness version"
                )
            return state
    return None
