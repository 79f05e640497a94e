"""What ``pip install scalerl-harness`` adds to a trainer's environment, and what its client loads.

Builds this checkout into two fresh venvs, the light install (no extras) and the same with the
``analysis`` extra (what the base install held before issue 22), and reports for each: the
site-packages growth (MB on disk) and the packages added, then, in a fresh process per try, what a
trainer that only reports points costs: ``from scalerl.harness import client``, the first
``client.log`` (the lazy imports, opening a SQLite store and its schema check), 99 more logs and
a flush; the modules in ``sys.modules`` after, the heavy ones among them, and the peak RSS.
Needs the package index (as ``make setup`` does)::

    .venv/bin/python -m bench.light_install [--tries 5]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("numpy", "pandas", "scipy", "plotly", "pyarrow", "adbc_driver_sqlite", "optuna", "cmaes", "submitit",
         "torch", "transformers", "pydantic", "yaml", "sqlalchemy", "alembic", "psycopg")  # fmt: skip

SETUP_STORE = """
import sys
from scalerl import db
store = db.open_store(sys.argv[1])
store.ensure_sweep("s", {})
store.register_run(db.RunRecord("r1", "s", "baseline", 0, {}, "h"))
print(store.start_attempt("r1"))
store.close()
"""

TRAINER = """
import json, resource, sys, time
t0 = time.perf_counter()
from scalerl.harness import client
t1 = time.perf_counter()
client.log(0, {"val/pass_rate": 0.3}, compute={"samples": 64}, n={"val/pass_rate": 256})
t2 = time.perf_counter()
for step in range(1, 100):
    client.log(step, {"val/pass_rate": 0.3 + step / 1000}, compute={"samples": 64 * (step + 1)})
client.flush()
t3 = time.perf_counter()
heavy = sorted(m for m in json.loads(sys.argv[1]) if m in sys.modules)
print(json.dumps({"import_ms": 1e3 * (t1 - t0), "first_log_ms": 1e3 * (t2 - t1), "rest_ms": 1e3 * (t3 - t2),
                  "modules": len(sys.modules), "heavy": heavy,
                  "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
client.close()
"""


def _run(cmd: list[str], env: dict[str, str], cwd: Path) -> str:
    done = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:4])} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return done.stdout


def _site_mb(venv: Path) -> float:
    site = next((venv / "lib").glob("python3*/site-packages"))
    return sum(f.stat().st_size for f in site.rglob("*") if f.is_file() and not f.is_symlink()) / 2**20


def _packages(py: Path, env: dict[str, str], cwd: Path) -> list[str]:
    listed = json.loads(_run([str(py), "-m", "pip", "list", "--format", "json"], env, cwd))
    return sorted(p["name"] for p in listed)


def measure(
    name: str, extra: str, src: Path, work: Path, env: dict[str, str], tries: int
) -> dict[str, object]:
    venv = work / name
    _run([sys.executable, "-m", "venv", str(venv)], env, work)
    py = venv / "bin" / "python"
    before_mb, before = _site_mb(venv), _packages(py, env, work)
    start = time.perf_counter()
    _run([str(py), "-m", "pip", "install", "-q", f"{src}{extra}"], env, work)
    install_s = time.perf_counter() - start
    after = _packages(py, env, work)
    runs = []
    for i in range(tries):
        url = f"sqlite:///{work / f'{name}-{i}.db'}"
        attempt = _run([str(py), "-c", SETUP_STORE, url], env, work).strip()
        run_env = {**env, "SCALERL_RUN_ID": "r1", "SCALERL_ATTEMPT": attempt, "SCALERL_DB_URL": url,
                   "SCALERL_SPOOL_DIR": str(work / "spool")}  # fmt: skip
        runs.append(json.loads(_run([str(py), "-c", TRAINER, json.dumps(HEAVY)], run_env, work)))
    keys = ("import_ms", "first_log_ms", "rest_ms", "modules", "maxrss_mb")
    med = {k: statistics.median(float(r[k]) for r in runs) for k in keys}
    added = sorted(set(after) - set(before) - {"scalerl-harness"})
    return {"install": name, "install_s": install_s, "site_mb_added": _site_mb(venv) - before_mb,
            "packages_added": added, **med, "heavy": runs[0]["heavy"]}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tries", type=int, default=5, help="trainer processes per install (median)")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    with tempfile.TemporaryDirectory(prefix="scalerl-light-") as tmp:
        work = Path(tmp)
        src = work / "src"
        src.mkdir()
        for name in ("pyproject.toml", "README.md"):
            shutil.copy2(ROOT / name, src / name)
        for pkg in ("scalerl", "harness", "db"):
            shutil.copytree(
                ROOT / pkg, src / pkg, symlinks=True, ignore=shutil.ignore_patterns("__pycache__")
            )
        rows = [
            measure(n, e, src, work, env, args.tries) for n, e in (("light", ""), ("analysis", "[analysis]"))
        ]
    print(
        "| install | MB added | packages added | import client | first log | 99 logs + flush | modules "
        "| peak RSS | heavy modules loaded |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        added = r["packages_added"]
        assert isinstance(added, list)
        heavy = r["heavy"]
        assert isinstance(heavy, list)
        print(f"| {r['install']} | {r['site_mb_added']:.0f} | {len(added)} | {r['import_ms']:.0f} ms "
              f"| {r['first_log_ms']:.0f} ms | {r['rest_ms']:.0f} ms | {r['modules']:.0f} "
              f"| {r['maxrss_mb']:.0f} MB | {', '.join(heavy)} |")  # fmt: skip
    for r in rows:
        names = r["packages_added"]
        assert isinstance(names, list)
        print(f"{r['install']}: pip install {r['install_s']:.0f} s; added: {' '.join(names)}")


if __name__ == "__main__":
    main()
