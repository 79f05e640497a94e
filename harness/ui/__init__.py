"""``scalerl ui``: a read-only live view of a store, in a browser.

:func:`serve` opens the store read-only and serves :func:`scalerl.harness.ui.app.create_app` with
uvicorn: the sweeps, a sweep's answer as it forms (verdicts, knob map, curves with fitted and
forecast bands, runs), a run's curve, points, log and provenance, each updated without a reload
by polls that fetch only what changed (:mod:`scalerl.harness.ui.live`). Safe by default
(:mod:`scalerl.harness.ui.safety`): a loopback bind, a token for anything else, no secret on a
page, no write path.

Needs the ``ui`` extra (Starlette, uvicorn); importing this package imports neither.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from scalerl.harness.ui.safety import Access, check_bind

__all__ = ["Access", "check_bind", "serve"]

log = logging.getLogger(__name__)


def serve(
    url: str | None,
    access: Access,
    *,
    port: int = 8765,
    refresh_s: float = 2.0,
    fits: bool = True,
    n_boot: int = 200,
    verbose: bool = False,
    announce: Any = print,
) -> None:
    """Serve the live view of the store at ``url`` until interrupted (see the module docstring).
    ``announce`` gets the lines to show the user (the address, and the token once)."""
    import uvicorn

    from scalerl.harness.ui.app import Viewer, create_app

    viewer = Viewer(url, fits=fits, n_boot=n_boot, refresh_s=refresh_s)
    app = create_app(viewer, access)
    host = access.host
    shown = f"[{host}]" if ":" in host else host
    address = f"http://{shown}:{port}/"
    announce(f"scalerl ui: store {viewer.shown_url} (read-only)")
    if access.token is None:
        announce(f"scalerl ui: open {address}  (Ctrl-C stops)")
    elif access.generated:
        announce(f"scalerl ui: open {address}?token={access.token}  (the token is shown only this once)")
    else:
        announce(f"scalerl ui: open {address}?token=<$SCALERL_UI_TOKEN>  (Ctrl-C stops)")

    # No sweep is read ahead: a sweep's first open reads only what it draws (harness/ui/sample.py).
    # The modules that first open needs are imported meanwhile, so it does not wait for them.
    threading.Thread(target=_warm, name="scalerl-ui-warm", daemon=True).start()
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_config=None,
        access_log=verbose,
        lifespan="on",
        log_level="debug" if verbose else "warning",
        timeout_graceful_shutdown=2,
    )
    uvicorn.Server(config).run()


def _warm() -> None:
    """Import what a sweep's first open uses (pandas, plotly's JSON, the report's figures)."""
    try:
        import plotly.io  # noqa: F401

        import scalerl.db.queries
        import scalerl.harness.report.downsample
        import scalerl.harness.report.figures
        import scalerl.harness.ui.live
        import scalerl.harness.ui.sample  # noqa: F401
    except Exception as err:  # imported again, and reported, when a page needs them
        log.debug("warming imports: %s", err)
