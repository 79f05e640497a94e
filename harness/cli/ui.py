"""CLI: ``scalerl ui [--db URL] [--host 127.0.0.1] [--port N]``: the store's live view in a browser."""

from __future__ import annotations

import argparse

from scalerl.harness.argtypes import positive_int, real, whole


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "ui",
        help="serve a read-only live view of the store in a browser (sweeps, verdicts, curves, runs)",
        description=(
            "Serve a web page over the store that updates as runs report: the sweeps, a sweep's "
            "verdicts with their intervals and knob map, its curves with fitted and forecast bands, "
            "its runs, and each run's curve, points, log and provenance. Read-only: it opens the "
            "store read-only and has no write path. It listens on 127.0.0.1 only, unless --host "
            "names another address; then it needs a token ($SCALERL_UI_TOKEN, or --new-token to "
            "have one generated and printed once) and every request must carry it. Needs the `ui` "
            "extra (pip install 'scalerl-harness[ui]')."
        ),
    )
    p.add_argument(
        "--db",
        default=None,
        metavar="URL",
        help="store URL (default: $SCALERL_DB_URL, else sqlite:///./scalerl.db)",
    )
    p.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default: %(default)s, this machine only)"
    )
    p.add_argument("--port", type=whole(1, 65535), default=8765, help="port (default: %(default)s)")
    p.add_argument(
        "--new-token",
        action="store_true",
        help="generate a token, print it once, and require it on every request",
    )
    p.add_argument(
        "--refresh",
        type=real(0.2, 3600.0),
        default=2.0,
        metavar="S",
        help="seconds between a page's updates (default: %(default)s)",
    )
    p.add_argument(
        "--no-fit", action="store_true", help="show the fits `scalerl fit` stored, never fit in the view"
    )
    p.add_argument(
        "--boot",
        type=positive_int,
        default=200,
        metavar="N",
        help="bootstrap replicates of the view's fits (default: %(default)s, as `scalerl fit`)",
    )
    p.set_defaults(func=run_ui)


def run_ui(args: argparse.Namespace) -> int:
    from scalerl.harness.errors import ExecutionError
    from scalerl.harness.extras import UI_PACKAGES, needs_ui

    for package in UI_PACKAGES:
        try:
            __import__(package)
        except ModuleNotFoundError:
            raise ExecutionError(needs_ui("scalerl ui", package)) from None
    from scalerl.harness.ui import check_bind, serve

    access = check_bind(args.host, new_token=args.new_token)  # before the store is opened
    serve(
        args.db,
        access,
        port=args.port,
        refresh_s=args.refresh,
        fits=not args.no_fit,
        n_boot=args.boot,
        verbose=args.verbose,
        announce=lambda line: print(line, flush=True),
    )
    return 0
