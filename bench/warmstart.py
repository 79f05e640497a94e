"""Warm start under other kernels: the tiny preset's step-0 pass rate, before and after issue 22.

For each kernel setting (ATen's instruction set, MKL's reproducibility branch, and which CPU
vendor MKL believes it runs on: tests/fixtures/mkl_vendor.py answers its vendor check) and for a
few warm-start seeds, a fresh process builds the tiny policy through the product's own path
(``Trainer``: pin the numerics, warm-start into an empty cache) and evaluates it at step 0 on all
160 validation prompts x 16 samples (2,560 Bernoulli draws: SE ~0.01). Two presets:

- ``before``: the warm start as it was (constant rate, batch 32, trace_noise 0.2);
- ``after``: recipes/tiny.yaml now (cosine decay to 0, batch 64, trace_noise 0.3).

A warm start that converges gives the same quality whatever the last bit of a matmul; one that
stops mid-flight does not. Also reports each setting's weights digest (the same digest means the
same bits) and its warm-start wall time (single thread; noisy on a shared machine).

    .venv/bin/python -m bench.warmstart            # ~10 minutes on 2 cores
    .venv/bin/python -m bench.warmstart --quick    # the two pinned-numerics rows only
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tests.fixtures.mkl_vendor import build_intel_shim

ROOT = Path(__file__).resolve().parents[1]

WORK = ROOT / "bench" / ".work"

PROBE = r"""
import json, sys, time
from scalerl.harness.recipe.loader import load_recipe
from scalerl.harness.rl.numerics import state_digest
from scalerl.harness.rl.trainer import Trainer

t0 = time.perf_counter()
recipe = load_recipe("recipes/tiny.yaml", sys.argv[2:] + ["eval.n_val=160", "eval.k=16"])
trainer = Trainer(recipe, 0)
t1 = time.perf_counter()
rate = trainer.evaluate()
num = trainer.numerics
print(json.dumps({"pass_rate": rate, "samples": trainer.eval_samples(), "warm_s": t1 - t0,
                  "weights": state_digest(trainer.policy.model.state_dict()),
                  "aten": num.cpu_capability, "mkl": num.mkl_cbwr}))
"""

PRESETS: dict[str, list[str]] = {
    "before": [
        "model.tiny.warmstart_batch=32",
        "model.tiny.warmstart_schedule=constant",
        "task.params.trace_noise=0.2",
    ],
    "after": [],
}


def settings(intel_shim: Path) -> list[tuple[str, dict[str, str], int]]:
    """(label, environment, warm-start seed) rows; the first two are the pinned numerics."""
    intel = str(intel_shim)
    return [
        ("pinned (ATen avx2, MKL COMPATIBLE)", {}, 0),
        ("pinned, MKL told Intel", {"LD_PRELOAD": intel}, 0),
        (
            "MKL AVX2,STRICT, told Intel (the old pins' path)",
            {"MKL_CBWR": "AVX2,STRICT", "LD_PRELOAD": intel},
            0,
        ),
        ("MKL AVX2,STRICT, this CPU", {"MKL_CBWR": "AVX2,STRICT"}, 0),
        ("MKL SSE4_2, told Intel", {"MKL_CBWR": "SSE4_2", "LD_PRELOAD": intel}, 0),
        ("ATen default kernels, MKL COMPATIBLE", {"ATEN_CPU_CAPABILITY": "default"}, 0),
        ("pinned, warm-start seed 1", {}, 1),
        ("pinned, warm-start seed 2", {}, 2),
        ("pinned, warm-start seed 3", {}, 3),
    ]


def probe(preset: str, env_extra: dict[str, str], seed: int) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ATEN_", "MKL_", "ONEDNN_"))}
    env.pop("LD_PRELOAD", None)
    # Numerics checks that this leaves the kernels alone; unset, numpy would not matter here anyway.
    env.pop("OPENBLAS_CORETYPE", None)
    env.update(env_extra)
    with tempfile.TemporaryDirectory() as cache:
        env.update(SCALERL_CACHE_DIR=cache, SCALERL_TORCH_THREADS="1")
        args = [*PRESETS[preset], f"model.tiny.warmstart_seed={seed}"]
        out = subprocess.run(
            [sys.executable, "-c", PROBE, "--", *args], cwd=ROOT, env=env, capture_output=True, text=True
        )
    if out.returncode != 0:
        raise SystemExit(f"probe failed ({preset}, {env_extra}, seed {seed}):\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="only the two pinned-numerics rows")
    ap.add_argument("--jobs", type=int, default=2, help="probes at once (default 2)")
    opts = ap.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    rows = settings(build_intel_shim(WORK / "mkl-shim"))
    if opts.quick:
        rows = rows[:2]
    jobs = [(preset, row) for row in rows for preset in PRESETS]
    with ThreadPoolExecutor(opts.jobs) as pool:
        results = list(pool.map(lambda j: probe(j[0], j[1][1], j[1][2]), jobs))
    table: dict[str, dict[str, dict[str, Any]]] = {}
    for (preset, (label, _, _)), res in zip(jobs, results, strict=True):
        table.setdefault(label, {})[preset] = res
    print(
        "| kernels | before: step-0 pass rate | weights | after: step-0 pass rate | weights "
        "| warm start s (before / after) |"
    )
    print("|---|---|---|---|---|---|")
    for label, by in table.items():
        b, a = by["before"], by["after"]
        print(
            f"| {label} | {b['pass_rate']:.3f} | `{b['weights'][:8]}` | {a['pass_rate']:.3f} | "
            f"`{a['weights'][:8]}` | {b['warm_s']:.0f} / {a['warm_s']:.0f} |"
        )
    for preset in PRESETS:
        rates = [by[preset]["pass_rate"] for by in table.values()]
        print(
            f"{preset}: step-0 pass rate {min(rates):.3f}-{max(rates):.3f} "
            f"(spread {max(rates) - min(rates):.3f})"
        )
    (WORK / "warmstart.json").write_text(json.dumps(table, indent=1))
    print(f"wrote {WORK / 'warmstart.json'}")


if __name__ == "__main__":
    main()
