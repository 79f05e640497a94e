"""Where a benchmark result came from: date, machine, command, commit; printed above every table."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def command() -> str:
    """The command line that is running, as a user would type it (``python -m bench.x ...``)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    name = spec.name.removesuffix(".__main__") if spec is not None and spec.name else None
    prog = f"-m {name}" if name else sys.argv[0]
    env = f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '')} "
    return env + " ".join(["python", prog, *sys.argv[1:]])


def machine() -> str:
    """The OS, the CPU model (``/proc/cpuinfo``'s model name, family and model where there is one:
    results are reproducible per CPU model) and the core count."""
    return f"{platform.platform()}, {_cpu()}, {os.cpu_count()} cores"


def _cpu() -> str:
    info: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            info.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    if "model name" in info:
        return f"{info['model name']} (family {info.get('cpu family', '?')} model {info.get('model', '?')})"
    return platform.processor() or platform.machine()


def now() -> str:
    return f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC"


def commit(*, ignore: tuple[str, ...] = ()) -> str:
    """The checkout's commit (with ``+dirty`` when a tracked file differs, the paths in ``ignore``
    aside: e.g. the files the running benchmark itself writes); ``unknown`` outside git."""
    try:
        head = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            [
                "git",
                "-C",
                str(ROOT),
                "status",
                "--porcelain",
                "--untracked-files=no",
                "--",
                ".",
                *(f":!{p}" for p in ignore),
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def header() -> str:
    """The three lines every benchmark prints first: date, machine, command."""
    return f"date: {now()}\nmachine: {machine()}\ncommand: {command()}"
