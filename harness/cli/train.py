"""``scalerl train CONFIG.yaml``: one run of the reference trainer, outside any sweep.

Points stream to the results store (the run is registered under sweep ``adhoc`` with variant =
the recipe's name, an attempt is started, and the store's fenced writer is the sink), or with
``--no-db`` they are printed as JSON lines. Re-running with the same ``--workdir`` resumes from
its checkpoint; Ctrl-C checkpoints after the step in progress.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import threading
from collections.abc import Mapping
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from scalerl.harness.argtypes import non_negative_int, whole

if TYPE_CHECKING:
    from scalerl.harness.rl.trainer import TrainResult


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="run the reference trainer on one recipe (no sweep)")
    p.add_argument("config", help="recipe YAML (e.g. recipes/tiny.yaml)")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="dotted overrides, YAML-typed")
    p.add_argument("--seed", type=non_negative_int, default=0, help="run seed (default 0)")
    p.add_argument("--workdir", default=None, help="checkpoint dir (default ./runs/<run id>)")
    p.add_argument(
        "--db", default=None, metavar="URL", help="store URL (default $SCALERL_DB_URL or ./scalerl.db)"
    )
    p.add_argument("--no-db", action="store_true", help="print points as JSON lines instead of storing them")
    p.add_argument(
        "--threads",
        type=whole(1, 4096),
        default=None,
        help="torch CPU threads (default $SCALERL_TORCH_THREADS, else 1)",
    )
    p.set_defaults(func=cmd_train)


class _PrintSink:
    def add(
        self,
        step: int,
        metrics: Mapping[str, float],
        compute: Mapping[str, float],
        n: Mapping[str, int] | None = None,
    ) -> None:
        print(json.dumps({"step": step, **metrics, **compute, **({"n": dict(n)} if n else {})}), flush=True)

    def flush(self) -> None:
        return None


def cmd_train(args: argparse.Namespace) -> int:
    from scalerl.harness.recipe.hashing import config_hash, run_id
    from scalerl.harness.recipe.loader import load_recipe
    from scalerl.harness.rl import train  # without the trainer extra: an ExecutionError naming it

    recipe = load_recipe(args.config, args.overrides)
    rid = run_id(recipe, args.seed)
    workdir = Path(args.workdir) if args.workdir else Path("runs") / rid
    if args.threads:
        # The trainer pins its threads from this (scalerl.harness.rl.numerics); a flag beats the environment.
        os.environ["SCALERL_TORCH_THREADS"] = str(args.threads)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()  # checkpoint after the step in progress, then exit

    previous = signal.signal(signal.SIGINT, on_signal)
    try:
        if args.no_db:
            result = train(recipe, args.seed, sink=_PrintSink(), workdir=workdir, stop=stop)
        else:
            result = _train_into_store(args, recipe, rid, config_hash(recipe), workdir, stop)
    finally:
        signal.signal(signal.SIGINT, previous)
    print(f"run {rid}: {result.steps} steps, {result.reason}; checkpoint in {workdir}")
    if args.json:
        from scalerl.harness.cli.output import emit

        emit({"run_id": rid, "steps": result.steps, "reason": result.reason, "stopped": result.stopped,
              "workdir": str(workdir), "stored": not args.no_db})  # fmt: skip
    return 130 if result.stopped else 0


def _train_into_store(
    args: argparse.Namespace, recipe: object, rid: str, chash: str, workdir: Path, stop: threading.Event
) -> TrainResult:
    from scalerl import db
    from scalerl.harness.recipe.schema import Recipe
    from scalerl.harness.rl import train

    assert isinstance(recipe, Recipe)
    store = db.open_store(args.db)
    try:
        store.ensure_sweep("adhoc", {"kind": "adhoc", "note": "runs started with scalerl train"})
        store.register_run(
            db.RunRecord(
                run_id=rid,
                sweep="adhoc",
                variant=recipe.name,
                seed=args.seed,
                config=recipe.resolved(),
                config_hash=chash,
            )
        )
        from scalerl.harness.execution.provenance import for_runners

        code = for_runners(["reference"])["reference"]  # the reference trainer: this package's code
        attempt = store.start_attempt(
            rid, executor="cli", job_id=None, host=socket.gethostname(), provenance=code
        )
        writer = store.writer(rid, attempt)
        try:
            result: TrainResult = train(recipe, args.seed, sink=writer, workdir=workdir, stop=stop)
        except BaseException as err:
            writer.close()
            store.finish_run(rid, attempt, "failed", error=str(err)[:500])
            raise
        writer.close()
        from scalerl.harness.execution.job import fail_if_points_left

        fail_if_points_left(store, writer, rid, attempt)
        store.finish_run(rid, attempt, "preempted" if result.stopped else "completed")
        return result
    finally:
        store.close()
