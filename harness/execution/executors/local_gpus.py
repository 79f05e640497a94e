"""GPU sets for the local executor: a run that asks for GPUs gets its own, in CUDA_VISIBLE_DEVICES.

A run asks with the sweep's ``resources.gpus`` (``Resources.gpus_per_node`` on its spec). The
scheduler gives it that many GPUs nobody else holds and starts it with ``CUDA_VISIBLE_DEVICES``
naming them; until enough are free it waits in the queue, first in first out, as it waits for a
run slot. A run that asks for 0 GPUs is left as before: its environment is not touched (it sees
what the sweep's shell sees), so CPU sweeps and labs that place GPUs themselves are unchanged.

Which GPUs the machine has (:func:`discover_gpus`), first answer wins, looked up only once a run
asks for GPUs:

1. ``$SCALERL_GPUS``: comma-separated ids the executor may hand out (``0,1,2,3``, or GPU UUIDs);
   empty or ``none`` means none. For a lab that keeps some GPUs out of sweeps, and for tests.
2. ``$CUDA_VISIBLE_DEVICES`` of the scheduler (the ids it lists, up to the first invalid one,
   as CUDA reads it; empty or ``-1``: none).
3. ``nvidia-smi -L``: the index of every ``GPU i:`` line.
4. ``torch.cuda.device_count()``, where torch is importable (imported here only).

A GPU is held machine-wide (across sweeps and schedulers of this user) by an flock on
``gpu-<id>.lock`` beside the run slots (:func:`scalerl.harness.execution.executors.local_files.slot_dir`),
so a killed scheduler releases it. Two schedulers must name a GPU the same way (both by index, or
both by UUID) for the locks to keep them apart.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from scalerl.harness.errors import ConfigError
from scalerl.harness.execution.executors.local_files import slot_dir, try_lock

log = logging.getLogger(__name__)

GPU_ENV = "SCALERL_GPUS"
_SMI_LINE = re.compile(r"^GPU (\d+):", re.MULTILINE)
_SMI_TIMEOUT_S = 20.0


def _listed(text: str, *, cuda: bool) -> tuple[str, ...]:
    """The ids of a comma-separated list; ``cuda``: read as CUDA reads CUDA_VISIBLE_DEVICES (stop
    at the first negative entry, so ``-1`` hides every GPU)."""
    text = text.strip()
    if text.lower() in ("", "none", "-1"):
        return ()
    ids: list[str] = []
    for item in (p.strip() for p in text.split(",")):
        if cuda and item.startswith("-"):
            break
        if not item or item in ids:
            raise ConfigError(
                "a GPU list holds an empty or repeated id",
                field="CUDA_VISIBLE_DEVICES" if cuda else GPU_ENV,
                value=text,
                fix="list each GPU once, comma-separated, e.g. 0,1,2,3",
            )
        ids.append(item)
    return tuple(ids)


def _from_nvidia_smi() -> tuple[str, ...] | None:
    """GPU indices from ``nvidia-smi -L``; None when it is missing or fails (no driver)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        done = subprocess.run(
            [exe, "-L"], capture_output=True, text=True, timeout=_SMI_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return tuple(_SMI_LINE.findall(done.stdout))


def _from_torch() -> tuple[str, ...]:
    if importlib.util.find_spec("torch") is None:
        return ()
    import torch  # the scheduler's one torch import, only when a run asks for GPUs

    return tuple(str(i) for i in range(torch.cuda.device_count()))


def discover_gpus(env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The GPU ids the local executor may hand out, in order (see the module docstring)."""
    env = os.environ if env is None else env
    if GPU_ENV in env:
        return _listed(env[GPU_ENV], cuda=False)
    if "CUDA_VISIBLE_DEVICES" in env:
        return _listed(env["CUDA_VISIBLE_DEVICES"], cuda=True)
    found = _from_nvidia_smi()
    return found if found is not None else _from_torch()


def check_gpus(specs: Sequence[object], env: Mapping[str, str] | None = None) -> None:
    """Refuse, before anything is submitted, a run that asks for more GPUs than the machine has:
    it would wait in the local queue forever."""
    need = max((int(getattr(getattr(s, "resources", None), "gpus_per_node", 0)) for s in specs), default=0)
    if need == 0:
        return
    have = discover_gpus(env)
    if need > len(have):
        raise ConfigError(
            f"a run asks for {need} GPU(s) but the local executor sees {len(have)} "
            f"({', '.join(have) or 'none'})",
            field="resources.gpus",
            value=need,
            fix=f"lower resources.gpus to at most {len(have)}, or set {GPU_ENV}=0,1,... to the GPUs "
            "this machine's runs may use",
        )


@dataclass
class GpuSet:
    """GPUs one run holds: ``ids`` (what its CUDA_VISIBLE_DEVICES names) and their locks."""

    ids: tuple[str, ...]
    locks: list[IO[str]] = field(default_factory=list, repr=False)

    def env(self) -> dict[str, str]:
        return {"CUDA_VISIBLE_DEVICES": ",".join(self.ids)}

    def release(self) -> None:
        for fh in self.locks:
            fh.close()
        self.locks.clear()


def _lock_name(gpu: str) -> str:
    return "gpu-" + re.sub(r"[^A-Za-z0-9_.-]", "_", gpu) + ".lock"


class GpuPool:
    """The GPUs of this machine, discovered on first need. Not thread-safe (one per scheduler)."""

    def __init__(self, env: Mapping[str, str] | None = None, lock_dir: Path | None = None) -> None:
        self._env = env
        self._lock_dir = lock_dir
        self._ids: tuple[str, ...] | None = None

    @property
    def ids(self) -> tuple[str, ...]:
        if self._ids is None:
            self._ids = discover_gpus(self._env)
            log.info("GPUs the local executor may hand out: %s", ", ".join(self._ids) or "none")
        return self._ids

    def take(self, n: int) -> GpuSet | None:
        """``n`` GPUs nobody holds, all or none: a set (its locks held) or None when too few are
        free. ``n`` larger than the machine's count is a ConfigError (it could never run)."""
        if n > len(self.ids):
            raise ConfigError(
                f"a run asks for {n} GPU(s); the local executor sees {len(self.ids)}",
                field="resources.gpus",
                value=n,
                fix=f"lower resources.gpus, or set {GPU_ENV} to the GPUs runs may use",
            )
        folder = self._lock_dir or slot_dir()
        got = GpuSet(())
        for gpu in self.ids:
            if len(got.ids) == n:
                break
            fh = try_lock(folder / _lock_name(gpu))
            if fh is not None:
                got.ids += (gpu,)
                got.locks.append(fh)
        if len(got.ids) < n:
            got.release()
            return None
        return got


def spec_gpus(path: Path) -> int:
    """The GPUs the queued spec file ``path`` asks for (0 when unreadable: the job reports that)."""
    import json

    try:
        data = json.loads(path.read_text())
        return int((data.get("resources") or {}).get("gpus_per_node") or 0)
    except (OSError, ValueError, TypeError, AttributeError):
        return 0
