"""``scalerl export``: put each run's fit, its variant's forecast and its knob's verdict back into the
MLflow or W&B run it was imported from (:mod:`scalerl.harness.export`)."""

from __future__ import annotations

import argparse

from scalerl.harness.argtypes import whole


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export",
        help="write fits, forecasts and verdicts back to the MLflow / W&B runs a sweep was imported from",
        description="Fit the sweep (as `scalerl fit`, nothing stored) and forecast it (as `scalerl "
        "forecast`), then write to each imported run's own tracker: MLflow metrics scalerl/A, "
        "scalerl/B, scalerl/C_mid, scalerl/forecast (+ _lo, _hi, _at), scalerl/d_a (+ _lo, _hi) and "
        "tags scalerl.verdict, scalerl.variant, scalerl.knob, scalerl.sweep; the same keys in a W&B "
        "run's summary (a project through the public API; an offline run as a new offline part of it "
        "that `wandb sync` uploads). Runs that were not imported from a tracker are listed and left "
        "alone. Opt-in: nothing is written back unless this command runs.",
    )
    p.add_argument("sweep", metavar="SWEEP", nargs="?", help="sweep name (default: $SCALERL_SWEEP)")
    p.add_argument(
        "--to",
        action="append",
        choices=("mlflow", "wandb", "wandb-offline"),
        help="only these trackers (repeat; default: every tracker the runs came from)",
    )
    p.add_argument(
        "--mlflow-uri",
        metavar="URI",
        help="the tracking URI to write to (default: the one the import read; needed where it held a "
        "password, which the store never keeps)",
    )
    p.add_argument("--boot", type=whole(10, 100_000), default=200, metavar="N", help="bootstrap replicates")
    p.add_argument("--dry-run", action="store_true", help="print what would be written, write nothing")
    p.add_argument(
        "--db", metavar="URL", help="store URL or path (default: $SCALERL_DB_URL, else ./scalerl.db)"
    )
    p.set_defaults(func=_export)


def _show(value: object) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _export(args: argparse.Namespace) -> int:
    from scalerl.harness.api import Sweep
    from scalerl.harness.cli.busy import activity
    from scalerl.harness.export import export, plan

    with Sweep.open(args.sweep, db=args.db) as sweep:
        with activity(f"fitting sweep {args.sweep}", as_json=args.json):
            found = plan(sweep, n_boot=args.boot, trackers=args.to)
        print(
            f"sweep {found.sweep}: metric {found.metric} on {found.axis}; "
            f"{len(found.targets)} run(s) to write"
        )
        for t in found.targets:
            shown = ", ".join(f"{k} {_show(v)}" for k, v in t.values.items() if k not in ("sweep",))
            print(f"  {t.run}: {t.where}: {shown}")
        for run_id, why in found.skipped:
            print(f"  left alone {run_id}: {why}")
        written: dict[str, int] = {}
        if not args.dry_run and found.targets:
            with activity("writing back", as_json=args.json):
                written = export(found, mlflow_uri=args.mlflow_uri)
            print("written: " + ", ".join(f"{n} {tracker} run(s)" for tracker, n in written.items()))
        elif args.dry_run:
            print("dry run: nothing written")
    if args.json:
        from scalerl.harness.cli.output import emit

        emit(
            {
                "sweep": found.sweep,
                "metric": found.metric,
                "axis": found.axis,
                "dry_run": bool(args.dry_run),
                "written": written,
                "runs": [
                    {
                        "run_id": t.run_id,
                        "run": t.run,
                        "tracker": t.tracker,
                        "where": t.where,
                        "values": dict(t.values),
                    }
                    for t in found.targets
                ],
                "left_alone": [{"run_id": r, "reason": why} for r, why in found.skipped],
            }
        )
    return 0
