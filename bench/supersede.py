"""How long a superseded attempt keeps training after a newer attempt of its run started.

One run of the ``command`` runner (``recipes/examples/my_trainer.py``, ``--steps`` steps of
``--step-seconds``, a checkpoint every 5 steps) on a real SQLite store, executed in-process as the
debug executor does; once it stored 2 points a second attempt starts (``store.start_attempt``, what
a requeue or a racing search trial does). Measured: seconds from that start until the first
attempt's ``execute()`` returned, and the step of the checkpoint it left. Three ways a trainer
reports: the metrics file at two evaluation intervals, and the client (its own writer, so only the
job's periodic read of the store's attempt counter can see the fence).

There is no other tool to run side by side: before this harness stopped superseded attempts, the
answer was "until the budget ends"; ``--repo`` runs the same measurement against another checkout
(e.g. a worktree of an older commit), in the same process layout, for the comparison: this file
runs again in a child process with that checkout's ``scalerl`` first on ``PYTHONPATH``.

    .venv/bin/python -m bench.supersede [--steps 6000] [--repeats 2] [--repo PATH]
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(os.environ.get("SCALERL_SUPERSEDE_REPO") or Path(__file__).resolve().parents[1])


def measure(tmp: Path, steps: int, step_s: float, report: str, eval_every: int) -> tuple[float, str, int]:
    import json

    from scalerl import db
    from scalerl.db import queries
    from scalerl.harness.execution.job import execute
    from scalerl.harness.execution.spec import RunSpec
    from scalerl.harness.recipe.schema import Recipe

    url = f"sqlite:///{tmp / 's.db'}"
    trainer = REPO / "recipes" / "examples" / "my_trainer.py"
    argv = [
        sys.executable, str(trainer), "--steps", str(steps), "--step-seconds", str(step_s),
        "--eval-every", str(eval_every), "--checkpoint-every", "5", "--report", report,
    ]  # fmt: skip
    recipe = Recipe.model_validate(
        {
            "name": "supersede",
            "runner": {"type": "command", "argv": argv, "metrics_file": "metrics.jsonl"},
            "budget": {"value": steps, "unit": "steps"},
        }
    )
    spec = RunSpec(
        sweep="supersede", variant="baseline", knob=None, alternative=None, seed=0, run_id="r-s0",
        recipe=recipe.model_dump(mode="json"), workdir=str(tmp / "work"), db_url=url,
    )  # fmt: skip
    store = db.open_store(url)
    store.ensure_sweep("supersede", {})
    store.register_run(db.RunRecord("r-s0", "supersede", "baseline", 0, spec.recipe, "h"))
    out: list[str] = []
    first = threading.Thread(
        target=lambda: out.append(execute(spec, executor="debug", stop=threading.Event()))
    )
    first.start()
    while queries.point_count(store, "r-s0") < 2:
        time.sleep(0.05)
    store.start_attempt("r-s0")
    t0 = time.monotonic()
    first.join()
    seconds = time.monotonic() - t0
    saved = json.loads((tmp / "work" / "checkpoint" / "state.json").read_text())["step"]
    return seconds, out[0] if out else "raised", int(saved)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=6000)
    ap.add_argument("--step-seconds", type=float, default=0.02)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--repo", type=Path, default=None, help="measure this checkout's code instead")
    args = ap.parse_args(argv)
    if args.repo is not None:
        # Its `scalerl` package (symlinks to its harness/ and db/) ahead of ours: run as a file, this
        # module imports nothing of bench, so the child's path holds our bench/ and that checkout.
        repo = str(args.repo.resolve())
        env = {**os.environ, "PYTHONPATH": repo, "SCALERL_SUPERSEDE_REPO": repo}
        raw = list(sys.argv[1:] if argv is None else argv)
        rest = [
            a
            for i, a in enumerate(raw)
            if not a.startswith("--repo") and not (i > 0 and raw[i - 1] == "--repo")
        ]
        return subprocess.run([sys.executable, __file__, *rest], env=env, check=False).returncode
    import scalerl

    print(f"code: {Path(scalerl.__file__).parent.parent}; {platform.processor() or platform.machine()}")
    print(f"budget: {args.steps} steps x {args.step_seconds} s = {args.steps * args.step_seconds:.0f} s")
    print("| trainer reports | seconds after the newer attempt started | outcome | checkpoint step |")
    print("|---|---|---|---|")
    for report, every in (("file", 5), ("file", 100), ("client", 5)):
        for _ in range(args.repeats):
            with tempfile.TemporaryDirectory() as d:
                seconds, outcome, saved = measure(Path(d), args.steps, args.step_seconds, report, every)
            what = f"{report}, a point every {every * args.step_seconds:g} s"
            print(f"| {what} | {seconds:.1f} | {outcome} | {saved} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
