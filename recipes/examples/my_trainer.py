#!/usr/bin/env python3
"""A stand-in for a lab's own trainer, launched by the ``command`` runner (command-sweep.yaml).

It "trains" for ``--steps`` steps, producing a sigmoid-shaped pass rate whose ceiling depends on
``--loss`` (so a sweep over it has something to classify), and reports points one of two ways:

* ``--report file``: append JSON lines to ``$SCALERL_METRICS_FILE``, which the harness tails;
* ``--report client``: ``from scalerl.harness import client; client.log(...)``.

It checkpoints its step to ``$SCALERL_CHECKPOINT_DIR/state.json`` every ``--checkpoint-every``
steps and on SIGTERM (what the harness sends on preemption), and resumes from it. ``--fail-at``
makes it exit non-zero at that step (to see a failed run and its stderr in ``scalerl status``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import tempfile
import time
from pathlib import Path

CEILING = {"cispo": 0.62, "dapo": 0.55, "gspo": 0.60, "grpo": 0.50}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--loss", default="cispo")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--eval-every", type=int, default=5)
    ap.add_argument("--checkpoint-every", type=int, default=10)
    ap.add_argument("--step-seconds", type=float, default=0.02)
    ap.add_argument("--report", choices=["file", "client"], default="file")
    ap.add_argument("--fail-at", type=int, default=-1)
    ap.add_argument("--fail-loss", default=None, help="only fail (at --fail-at, default 7) for this loss")
    args = ap.parse_args()
    if args.fail_loss is not None:
        args.fail_at = (args.fail_at if args.fail_at > 0 else 7) if args.fail_loss == args.loss else -1

    ckpt_dir = Path(os.environ.get("SCALERL_CHECKPOINT_DIR", "checkpoint"))
    ckpt = ckpt_dir / "state.json"
    step = json.loads(ckpt.read_text())["step"] if ckpt.exists() else 0

    def save() -> None:
        ckpt_dir.mkdir(parents=True, exist_ok=True)
        # A temporary name of its own: an attempt being superseded may still be saving here, and a
        # shared "state.tmp" would let one writer rename the other's file away mid-save.
        fd, tmp = tempfile.mkstemp(dir=ckpt_dir, prefix=".state.", suffix=".tmp")
        with os.fdopen(fd, "w") as fh:
            fh.write(json.dumps({"step": step}))
        os.replace(tmp, ckpt)

    stopping = False

    def on_term(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_term)

    metrics_file = os.environ.get("SCALERL_METRICS_FILE", "metrics.jsonl")
    ceiling = CEILING.get(args.loss, 0.5)
    while step < args.steps and not stopping:
        step += 1
        time.sleep(args.step_seconds)
        if step == args.fail_at:
            print(f"my_trainer: simulated failure at step {step} (loss={args.loss})", file=sys.stderr)
            return 3
        if step % args.eval_every == 0:
            compute = step * 1e12  # FLOPs, deterministic
            noise = random.Random(args.seed * 100_003 + step).gauss(0.0, 0.005)
            value = 0.1 + (ceiling - 0.1) / (1 + (15e12 / compute) ** 1.5) + noise
            metrics = {"val/pass_rate": round(value, 6)}
            cost = {"flops": compute, "samples": step * 64.0}
            if args.report == "client":
                from scalerl.harness import client

                client.log(step, metrics, compute=cost)
            else:
                with open(metrics_file, "a") as fh:
                    fh.write(json.dumps({"step": step, "metrics": metrics, "compute": cost}) + "\n")
        if step % args.checkpoint_every == 0:
            save()
    save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
