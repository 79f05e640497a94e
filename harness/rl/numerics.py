"""Bit-reproducible CPU numerics for the reference trainer: threads, kernels, seeds, digests.

Why each setting (measured on the tiny preset, torch 2.13.0 CPU; bench/README.md, "Warm start"):

- **CPU instruction set.** ATen (elementwise ops, softmax, reductions), MKL (matmul) and oneDNN
  each pick their kernels at their first use, and the kernels round differently. ATen and oneDNN
  pick by instruction set alone; MKL also picks by CPU *vendor*: asked for ``MKL_CBWR=AVX2,STRICT``
  on an AMD EPYC it runs the same code path as ``SSE4_2`` (weights ``03d03218...``), while an Intel
  Xeon runs its AVX2 path (``28475842...``), so the old pins held only on Intel (issue 22). MKL's
  ``COMPATIBLE`` branch is its documented mode for the same results on Intel and non-Intel CPUs,
  and it gave the same bits on a real AMD EPYC and on the same machine with MKL's vendor check
  answered "Intel" (tests/fixtures/mkl_vendor.py: a preloaded shim for ``mkl_serv_intel_cpu_true``;
  that emulation reproduces the Xeon pins of the AVX2 branch bit for bit, which is what makes it a
  stand-in). A real Xeon (family 6 model 207, 2026-11-26) then computed *other* bits under
  COMPATIBLE (``0d9dd6af...`` against the EPYC's ``bc944bfb...``), and under SSE4_2 and with ATen's
  default kernels too; only AVX2,STRICT agreed with the EPYC told "Intel". :func:`pin` fixes
  ``ATEN_CPU_CAPABILITY=avx2`` (any x86-64 CPU since ~2013, Intel Haswell or AMD Zen),
  ``MKL_CBWR=COMPATIBLE`` and ``ONEDNN_MAX_CPU_ISA=AVX2``.
  All three are read once, at each library's first kernel call, so they only take effect when
  :func:`pin` runs before the process computes anything with torch; :func:`pin` reports what is
  actually in effect (:class:`Numerics`), and that enters the warm-start cache key, so a policy
  computed with other kernels is never reused as if it were the pinned one. ``SCALERL_CPU_ISA=native``
  opts out (the machine's fastest kernels, reproducible only on the same CPU model).
- **Threads.** A float reduction split over N threads sums in a different order than over M, so
  intra-op parallelism can change the bits. The default is 1 thread per run, whatever the core
  count (``SCALERL_TORCH_THREADS`` overrides): the tiny model's matmuls are too small to gain from
  more, and the local executor already runs one process per core. Inter-op threads are pinned to 1
  too. MKL's AVX2,STRICT mode gave the same bits at 1 and 2 threads; its COMPATIBLE branch does not
  (measured on the tiny preset), so the thread count is part of the warm-start cache key and of
  the promise: same bits at the same thread count.
- **Algorithms and seeds.** ``torch.use_deterministic_algorithms(True)`` makes torch raise instead
  of silently picking a non-deterministic kernel; python ``random``, numpy and torch are seeded
  from the run seed (the trainer's own streams are explicit generators, this covers anything else).

Guaranteed: the same recipe and seed give bit-identical warm-start weights and curves on one CPU
model with AVX2, with the same torch build (and transformers version) and the same thread count
(1 by default), whatever the core count, load, number of concurrent runs or cache state. Not
guaranteed: another CPU vendor (measured: an Intel Xeon and an AMD EPYC differ; the verdicts
agree), another thread count, another torch or MKL build, a CPU without AVX2,
``SCALERL_CPU_ISA=native``, or a GPU.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import random
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch

from scalerl.harness.errors import ConfigError

log = logging.getLogger(__name__)

# The kernel families pinned per library; see the module docstring for why AVX2 and COMPATIBLE.
PINNED_ISA_ENV: dict[str, str] = {
    "ATEN_CPU_CAPABILITY": "avx2",
    "MKL_CBWR": "COMPATIBLE",
    "ONEDNN_MAX_CPU_ISA": "AVX2",
}
DEFAULT_THREADS = 1
_WARNED: set[str] = set()


@dataclass(frozen=True)
class Numerics:
    """What the process computes with; part of the warm-start cache key and the run's log."""

    torch_version: str
    cpu_capability: str  # ATen's kernel family actually in effect (e.g. "AVX2")
    mkl_cbwr: str  # MKL's reproducibility branch ("" = MKL chooses per CPU)
    onednn_isa: str
    threads: int
    pinned: bool  # True when the capability in effect is the pinned one

    def key(self) -> dict[str, str]:
        """The fields that change the bits, the thread count included (MKL's COMPATIBLE branch
        splits a matmul differently over 2 threads than over 1)."""
        return {
            "torch": self.torch_version,
            "cpu_capability": self.cpu_capability,
            "mkl_cbwr": self.mkl_cbwr,
            "onednn_isa": self.onednn_isa,
            "threads": str(self.threads),
        }


def threads_from_env(env: Mapping[str, str] | None = None) -> int:
    """``SCALERL_TORCH_THREADS`` (default :data:`DEFAULT_THREADS`), validated."""
    raw = (os.environ if env is None else env).get("SCALERL_TORCH_THREADS", str(DEFAULT_THREADS))
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n < 1:
        raise ConfigError(
            "must be a positive integer",
            field="SCALERL_TORCH_THREADS",
            value=raw,
            fix="unset it (1 thread, the reproducible default) or set e.g. SCALERL_TORCH_THREADS=1",
        )
    return n


def pin(threads: int | None = None) -> Numerics:
    """Pin this process's CPU numerics (threads, kernel families, deterministic algorithms).

    Idempotent; process-wide by nature (torch's thread pools and kernel dispatch are per process).
    ``threads`` None reads ``SCALERL_TORCH_THREADS`` (default 1).
    """
    n = threads_from_env() if threads is None else threads
    native = os.environ.get("SCALERL_CPU_ISA", "avx2").lower() == "native"
    if not native:
        for name, value in PINNED_ISA_ENV.items():
            os.environ.setdefault(name, value)  # read lazily by each library at its first kernel
    torch.set_num_threads(n)
    # Raises once inter-op work has started or it was set before: it cannot change any more.
    with contextlib.suppress(RuntimeError):
        torch.set_num_interop_threads(1)
    if torch.cuda.is_available():
        # cuBLAS needs a fixed workspace to be deterministic; GPU runs are not claimed bit-exact.
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True, warn_only=True)
    else:
        torch.use_deterministic_algorithms(True)
    capability = str(torch.backends.cpu.get_cpu_capability())
    pinned = not native and capability.lower() == os.environ.get("ATEN_CPU_CAPABILITY", "").lower()
    if not native and not pinned and capability not in _WARNED:
        _WARNED.add(capability)  # once per process: every Trainer in it has the same kernels
        log.warning(
            "CPU kernels are %s, not the pinned %s: torch computed something before the trainer "
            "pinned its numerics, so this run is reproducible only on this CPU model "
            "(start training in a fresh process, or set ATEN_CPU_CAPABILITY=avx2 MKL_CBWR=COMPATIBLE "
            "ONEDNN_MAX_CPU_ISA=AVX2 in its environment)",
            capability,
            PINNED_ISA_ENV["ATEN_CPU_CAPABILITY"],
        )
    return Numerics(
        torch_version=torch.__version__,
        cpu_capability=capability,
        mkl_cbwr=os.environ.get("MKL_CBWR", ""),
        onednn_isa=os.environ.get("ONEDNN_MAX_CPU_ISA", ""),
        threads=torch.get_num_threads(),
        pinned=pinned,
    )


def seed_everything(seed: int) -> None:
    """Seed python ``random``, numpy's global RNG and torch's (CPU and CUDA) from ``seed``."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def state_digest(state: Mapping[str, torch.Tensor]) -> str:
    """SHA-256 of a state_dict: names in sorted order, each with dtype, shape and raw bytes."""
    h = hashlib.sha256()
    for name in sorted(state):
        t = state[name].detach().cpu().contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()
