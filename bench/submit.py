"""Submission benchmark: a 1,000-variant sweep to Slurm, scalerl vs Hydra's submitit launcher.

Both sides submit the same 1,000-point ``grid`` over one config value to the single-node testbed
(``sudo slurm/testbed/up``), from a fresh process, with a trivial job body; only submission is
measured and the jobs are cancelled right after. An ``sbatch`` shim first on PATH counts the
``sbatch`` calls and timestamps them.

* scalerl: wall time of ``scalerl sweep SWEEP.yaml --executor slurm`` (plan 1,000 variants, record
  the sweep and runs in a SQLite store, one ``sbatch --array`` per resource shape, return).
* Hydra (hydra-core + hydra-submitit-launcher, ``[bench]`` extra): ``app.py -m lr=range(1000)
  hydra/launcher=submitit_slurm``. Its launcher blocks until every job has finished, so its
  submission time is measured from process start to the end of its (last) ``sbatch`` call; the
  process is then stopped and its jobs cancelled.

    .venv/bin/python -m bench.submit [--variants 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]

SHIM = """#!/bin/bash
# Counts and times sbatch calls for bench/submit.py, then runs the real sbatch.
echo "start $(date +%s.%N)" >> "{log}"
out="$("{real}" "$@")"; rc=$?
echo "end $(date +%s.%N) $out" >> "{log}"
echo "$out"
exit $rc
"""

HYDRA_APP = """
import hydra
from omegaconf import DictConfig


@hydra.main(version_base=None, config_path=".", config_name="config")
def main(cfg: DictConfig) -> float:
    return float(cfg.lr)


if __name__ == "__main__":
    main()
"""


def make_shim(folder: Path) -> tuple[Path, Path]:
    real = shutil.which("sbatch")
    if real is None:
        sys.exit("bench/submit.py: sbatch not found; bring up the testbed first: sudo slurm/testbed/up")
    log = folder / "sbatch.log"
    shim_dir = folder / "shim"
    shim_dir.mkdir()
    shim = shim_dir / "sbatch"
    shim.write_text(SHIM.format(log=log, real=real))
    shim.chmod(0o755)
    return shim_dir, log


def sbatch_calls(log: Path) -> tuple[int, list[str], float | None]:
    """(calls, job ids, time the last call ended)."""
    if not log.exists():
        return 0, [], None
    lines = log.read_text().splitlines()
    ends = [line for line in lines if line.startswith("end ")]
    ids = [m.group(1) for line in ends for m in [re.search(r"(\d+)\s*$", line)] if m]
    last = float(ends[-1].split()[1]) if ends else None
    return sum(line.startswith("start ") for line in lines), ids, last


def cancel(ids: list[str]) -> None:
    if ids:
        subprocess.run(["scancel", *ids], check=False, timeout=60)


def bench_scalerl(folder: Path, n: int, env: dict[str, str]) -> dict[str, float | int]:
    recipe = {"extends": str(REPO / "recipes" / "tiny.yaml"), "name": "bench",
              "runner": {"type": "command", "argv": ["true"]}}  # fmt: skip
    (folder / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    values = [round(1e-4 * (1 + i), 8) for i in range(n)]
    sweep = {"sweep": "bench-submit", "base": "recipe.yaml", "design": "grid",
             "grid": {"optimizer.lr": values}, "seeds": [0],
             "resources": {"cpus": 1, "gpus": 0, "mem_gb": 1, "time_min": 5},
             "executor": "slurm", "max_retries": 0}  # fmt: skip
    (folder / "sweep.yaml").write_text(yaml.safe_dump(sweep))
    argv = [str(REPO / ".venv" / "bin" / "scalerl"), "sweep", str(folder / "sweep.yaml"),
            "--executor", "slurm", "--profile", str(REPO / "slurm" / "profiles" / "testbed.yaml"),
            "--db", f"sqlite:///{folder / 'bench.db'}", "--state-dir", str(folder / "state")]  # fmt: skip
    t0 = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=folder, timeout=600)
    wall = time.perf_counter() - t0
    calls, ids, _ = sbatch_calls(folder / "sbatch.log")
    cancel(ids)
    if done.returncode != 0:
        sys.exit(f"scalerl sweep failed:\n{done.stderr[-3000:]}")
    submitted = int(re.search(r"submitted (\d+) to slurm", done.stdout).group(1))  # type: ignore[union-attr]
    return {"wall_s": wall, "sbatch_calls": calls, "submitted": submitted}


def bench_hydra(folder: Path, n: int, env: dict[str, str]) -> dict[str, float | int]:
    (folder / "app.py").write_text(HYDRA_APP)
    (folder / "config.yaml").write_text("lr: 0.001\n")
    argv = [sys.executable, str(folder / "app.py"), "-m", f"lr=range(0,{n})",
            "hydra/launcher=submitit_slurm", "hydra.launcher.partition=debug", "hydra.launcher.timeout_min=5",
            "hydra.launcher.cpus_per_task=1", "hydra.launcher.mem_gb=1", "hydra.launcher.array_parallelism=2",
            f"hydra.sweep.dir={folder / 'multirun'}"]  # fmt: skip
    log = folder / "sbatch.log"
    t0_wall = time.time()
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=folder,
                            start_new_session=True)  # fmt: skip
    # Hydra submits one array and then waits for every job; stop once sbatch returned and the
    # process is visibly waiting (no new sbatch call for 5 s).
    last_end: float | None = None
    while proc.poll() is None and time.perf_counter() - t0 < 600:
        calls, ids, last_end = sbatch_calls(log)
        if last_end is not None and time.time() - last_end > 5:
            break
        time.sleep(0.2)
    blocked = proc.poll() is None
    if blocked:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
    calls, ids, last_end = sbatch_calls(log)
    cancel(ids)
    if last_end is None:
        out = proc.stdout.read().decode() if proc.stdout else ""
        sys.exit(f"Hydra never called sbatch:\n{out[-3000:]}")
    return {"wall_s": last_end - t0_wall, "sbatch_calls": calls, "blocked_after_submit": int(blocked)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", type=int, default=1000)
    args = ap.parse_args()
    results = {}
    for name, fn in (("scalerl", bench_scalerl), ("hydra-submitit", bench_hydra)):
        with tempfile.TemporaryDirectory(prefix=f"bench-submit-{name}-", ignore_cleanup_errors=True) as tmp:
            folder = Path(tmp)
            shim_dir, _ = make_shim(folder)
            env = {**os.environ, "PATH": f"{shim_dir}:{os.environ['PATH']}"}
            results[name] = fn(folder, args.variants, env)
            print(f"{name}: {json.dumps(results[name])}", flush=True)
    ours, hydra = results["scalerl"], results["hydra-submitit"]
    print(
        f"\n{args.variants} variants on {platform.node()} ({os.cpu_count()} cores), "
        f"{time.strftime('%Y-%m-%d')}:\n"
        f"  scalerl sweep --executor slurm : {ours['wall_s']:.2f} s, {ours['sbatch_calls']} sbatch call(s)\n"
        f"  hydra submitit launcher        : {hydra['wall_s']:.2f} s to its last sbatch, "
        f"{hydra['sbatch_calls']} sbatch call(s); "
        f"blocked until jobs end: {bool(hydra['blocked_after_submit'])}\n"
        f"  ratio (hydra / scalerl wall)   : {hydra['wall_s'] / ours['wall_s']:.2f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
