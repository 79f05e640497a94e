"""The live view's web app: a Starlette application of read-only JSON endpoints and static files.

Pages (one shell, ``static/index.html``; ``static/ui.js`` builds every element with
``textContent``, so no name from the store is ever parsed as markup):

- ``/``: the store's sweeps, their runs by status and when each last moved;
- ``/sweep?name=S``: the answer first (verdicts with intervals, the knob map), then the curves
  per variant with their fitted and forecast bands, then the runs;
- ``/run?id=R``: a run's curve, its points, the tail of its job log and its provenance.

Endpoints (GET only; there is no write path): ``/api/info``, ``/api/sweeps``,
``/api/sweep?name=S&since=SEQ`` (``since=0``: everything to draw; later: only what changed,
:meth:`scalerl.harness.ui.live.SweepLive.changes`), ``/api/run?id=R&after=STEP&log_size=N``
(points past ``STEP``; the log only when its size moved). plotly.js comes from the installed
plotly package (``/static/plotly.min.js``): the page needs no internet.

Access (:mod:`scalerl.harness.ui.safety`): with a token every request must carry it; without
one (a loopback bind) the ``Host`` header must name this machine, which stops a web page
elsewhere from reading the view through DNS rebinding. Every answer carries a
Content-Security-Policy that allows only this server's scripts.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode

from scalerl.db.redaction import redact_url, scrub
from scalerl.harness.errors import HarnessError
from scalerl.harness.ui.safety import COOKIE, Access, is_local, redact_config, token_matches

log = logging.getLogger(__name__)
STATIC = Path(__file__).resolve().parent / "static"
LOG_LINES = 200
RUN_TABLE_ROWS = 500
RUN_DRAW = 4000
MAX_VIEWS = 8  # sweeps held in memory at once (least recently used dropped)
# A sweep first opened from a sample reads every point to draw it when a page first polls it (the
# page has drawn: on 2 busy cores the read would slow its drawing), or this many seconds after it
# was opened when no page polls.
FULL_LOAD_DELAY_S = 10.0
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
    "connect-src 'self'; font-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


class Viewer:
    """The app's state: the read-only store, the sweeps' live views, the fit worker."""

    def __init__(
        self, url: str | None, *, fits: bool = True, n_boot: int = 200, refresh_s: float = 2.0
    ) -> None:
        from scalerl import db
        from scalerl.db.engine import resolve_url

        resolved = resolve_url(url)
        self.url = url
        self.shown_url = redact_url(resolved)
        self.backend = resolved.get_backend_name()
        self.store = db.open_store(url, create=False, readonly=True)  # never writes, never creates
        self.refresh_s = refresh_s
        self.n_boot = n_boot
        self._views: OrderedDict[tuple[str, str | None, str | None], Any] = OrderedDict()
        self._lock = threading.Lock()
        self._building: dict[tuple[str, str | None, str | None], threading.Lock] = {}
        self.worker: Any = None
        if fits:
            from scalerl.harness.ui.fitting import FitWorker

            # The worker reads the points it fits from the store itself (the password travels
            # to it over the process pipe, never to a page or a log).
            self.worker = FitWorker(resolved.render_as_string(hide_password=False))

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()
        self.store.close()

    def sweeps(self) -> list[dict[str, Any]]:
        from scalerl.harness.api import list_sweeps

        frame = list_sweeps(store=self.store)  # the view's own store: no connection per poll
        out = []
        for r in frame.to_dict("records"):
            out.append(
                {
                    "name": r["name"],
                    "source": r["source"],
                    "design": r["design"],
                    "metric": r["metric"],
                    "axis": r["axis"],
                    "runs": int(r["n_runs"]),
                    **{g: int(r[g]) for g in ("completed", "running", "waiting", "failed", "stopped")},
                    "created_at": _iso(r["created_at"]),
                    "last_event": _iso(r["last_event"]),
                }
            )
        return out

    def view(self, name: str, metric: str | None, axis: str | None) -> Any:
        """The sweep's :class:`~scalerl.harness.ui.live.SweepLive` (built on first use)."""
        from scalerl.harness.ui.live import SweepLive

        key = (name, metric or None, axis or None)
        with self._lock:
            if key in self._views:
                self._views.move_to_end(key)
                return self._views[key]
            building = self._building.setdefault(key, threading.Lock())
        with building:  # two pages opening one sweep read it once
            with self._lock:
                if key in self._views:
                    return self._views[key]
            from scalerl.harness.api import list_sweeps

            known = list_sweeps(store=self.store)
            match = known[known["name"] == name]
            if match.empty:
                raise LookupError(f"no sweep {name!r} in this store")
            row = match.iloc[0]
            made = SweepLive(
                self.store,
                name,
                metric=metric or str(row["metric"]),
                axis=axis or str(row["axis"]),
                spec=dict(row["spec"] or {}),
                fitter=self.worker.submit if self.worker else None,
                n_boot=self.n_boot,
                min_refresh_s=min(1.0, self.refresh_s / 2),
            )
            with self._lock:
                self._views[key] = made
                while len(self._views) > MAX_VIEWS:
                    self._views.popitem(last=False)
                self._building.pop(key, None)
            made.refresh(force=True)  # starts the first live fit
            if made.sampled:  # drawn from a sample: every point follows (see FULL_LOAD_DELAY_S)
                load_full_soon(made, FULL_LOAD_DELAY_S)
            return made


def load_full_soon(view: Any, delay_s: float) -> None:
    """Run ``view.load_full()`` in a thread after ``delay_s``, unless one already claimed it."""
    if not view.full_load_pending():
        return
    loader = threading.Timer(delay_s, _load_full, args=(view,))
    loader.name, loader.daemon = f"scalerl-ui-full-{view.name[:40]}", True
    loader.start()


def _load_full(view: Any) -> None:
    if not view.claim_full_load():  # another thread has it
        return
    try:
        view.load_full()
    except Exception as err:  # the sample stays drawn; the page says so ("sampled")
        log.warning("reading every point of sweep %r to draw it: %s", scrub(view.name), scrub(str(err)))


def _iso(value: Any) -> str | None:
    from scalerl.harness.ui.live import iso

    return iso(value)


def run_payload(
    viewer: Viewer, run_id: str, metric: str | None, after: int, log_size: int | None
) -> dict[str, Any]:
    """A run page's data: the run, its points past ``after`` (``-1``: from the start, drawn at
    most :data:`RUN_DRAW`, tabled at most the last :data:`RUN_TABLE_ROWS`), and its log tail
    when the log's size is not ``log_size``."""
    import numpy as np

    from scalerl.db import live as store_live
    from scalerl.harness.execution.provenance import short
    from scalerl.harness.ui.live import floats, iso

    row = store_live.run_row(viewer.store, run_id)
    if row is None:
        raise LookupError(f"no run {run_id!r} in this store")
    # A poll names its metric; only the first load lists the run's metrics (a scan of its points).
    metrics = store_live.run_metrics(viewer.store, run_id) if after < 0 or not metric else []
    if not metric:
        metric = "val/pass_rate" if "val/pass_rate" in metrics or not metrics else metrics[0]
    pts = store_live.points_after(viewer.store, metric, {run_id: after})
    columns = store_live.POINT_ROW_COLUMNS[1:]
    table = [[_cell(v) for v in r[1:]] for r in pts[-RUN_TABLE_ROWS:]]
    draw = pts
    if after < 0 and len(pts) > RUN_DRAW:
        from scalerl.harness.report.downsample import display_indices

        steps = np.array([r[1] for r in pts], dtype=float)
        values = np.array([np.nan if r[2] is None else r[2] for r in pts], dtype=float)
        draw = [pts[i] for i in display_indices(steps, values, RUN_DRAW)]
    prov = row.get("provenance")
    out: dict[str, Any] = {
        "run_id": row["run_id"],
        "sweeps": row["sweeps"],
        "variant": row["variant"],
        "knob": row["knob"],
        "alternative": row["alternative"],
        "seed": row["seed"],
        "status": row["status"],
        "attempts": row["attempts"],
        "executor": row["executor"],
        "job_id": row["job_id"],
        "host": row["host"],
        "created_at": iso(row["created_at"]),
        "started_at": iso(row["started_at"]),
        "ended_at": iso(row["ended_at"]),
        "error": scrub(str(row["error"])) if row["error"] else None,
        "code": short(prov if isinstance(prov, dict) else None),
        "provenance": finite(redact_config(prov)),
        "config": finite(redact_config(row["config"])),
        "metric": metric,
        "metrics": metrics,
        "columns": list(columns),
        "table": table,
        "draw": {
            "step": [int(r[1]) for r in draw],
            "value": floats([np.nan if r[2] is None else r[2] for r in draw]),
        }
        if draw
        else {"step": [], "value": []},
        "last_step": int(pts[-1][1]) if pts else after,
    }
    out.update(_log_tail(viewer, run_id, log_size))
    return out


def finite(value: Any) -> Any:
    """``value`` with every non-finite float as None: JSON has no NaN (a config may hold one)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def _cell(value: Any) -> Any:
    if isinstance(value, float):
        from scalerl.harness.ui.live import floats

        return floats([value])[0]
    return value


def _log_tail(viewer: Viewer, run_id: str, known_size: int | None) -> dict[str, Any]:
    from scalerl.harness.execution.logs import read_from, run_logs, size, tail_start

    try:
        logs = run_logs(viewer.store, run_id)
    except HarnessError as err:
        return {"log": None, "log_note": scrub(str(err)), "log_size": 0}
    total = sum(size(p) for p in logs.files)
    if known_size is not None and known_size == total:
        return {"log_size": total}  # unchanged: the page keeps what it has
    parts = []
    for p in logs.files:
        with contextlib.suppress(OSError):
            text = b"".join(read_from(p, tail_start(p, LOG_LINES))).decode(errors="replace")
            parts.append({"file": p.name, "text": scrub(text)})
    return {"log": parts, "log_note": None, "log_size": total}


def create_app(viewer: Viewer, access: Access) -> Any:
    """The Starlette app over ``viewer`` (see the module docstring)."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import FileResponse, JSONResponse, Response
    from starlette.routing import Route

    def page(request: Request) -> Response:
        return FileResponse(STATIC / "index.html", media_type="text/html")

    def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name == "plotly.min.js":
            return FileResponse(
                plotly_js(), media_type="text/javascript", headers={"Cache-Control": "max-age=86400"}
            )
        if name not in ("ui.js", "ui.css"):
            return JSONResponse({"error": "not found"}, status_code=404)
        kind = "text/javascript" if name.endswith(".js") else "text/css"
        return FileResponse(STATIC / name, media_type=kind, headers={"Cache-Control": "no-cache"})

    def info(request: Request) -> Response:
        return JSONResponse(
            {
                "store": viewer.shown_url,
                "backend": viewer.backend,
                "refresh_s": viewer.refresh_s,
                "fits": viewer.worker is not None,
            }
        )

    def sweeps(request: Request) -> Response:
        return JSONResponse({"sweeps": viewer.sweeps(), "store": viewer.shown_url})

    def sweep(request: Request) -> Response:
        q = request.query_params
        name = q.get("name") or ""
        try:
            since = int(q.get("since") or 0)
            view = viewer.view(name, q.get("metric"), q.get("axis"))
        except ValueError:
            return JSONResponse({"error": "since must be a whole number"}, status_code=400)
        except LookupError as err:
            return JSONResponse({"error": str(err.args[0])}, status_code=404)
        view.refresh()  # at most once per interval, whoever asks
        if since > 0:  # a page that has drawn polls: time to read every point, if still to do
            load_full_soon(view, 0.0)
        if since <= 0:
            return Response(view.snapshot_json(), media_type="application/json")
        return JSONResponse(view.changes(since))

    def run(request: Request) -> Response:
        q = request.query_params
        try:
            after = int(q.get("after") or -1)
            size = int(q["log_size"]) if q.get("log_size") else None
            got = run_payload(viewer, q.get("id") or "", q.get("metric"), after, size)
        except ValueError:
            return JSONResponse({"error": "after and log_size must be whole numbers"}, status_code=400)
        except LookupError as err:
            return JSONResponse({"error": str(err.args[0])}, status_code=404)
        return JSONResponse(got)

    routes = [
        Route("/", page),
        Route("/sweep", page),
        Route("/run", page),
        Route("/static/{name}", static),
        Route("/api/info", info),
        Route("/api/sweeps", sweeps),
        Route("/api/sweep", sweep),
        Route("/api/run", run),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        try:
            yield
        finally:
            viewer.close()

    app = Starlette(routes=routes, lifespan=lifespan)
    return Guard(app, access)


def plotly_js() -> Path:
    """plotly.min.js as the installed plotly package ships it (the page needs no internet)."""
    import plotly

    path = Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js"
    if not path.is_file():
        raise HarnessError(
            f"the plotly package at {path.parent} ships no plotly.min.js (fix: pip install -U plotly)"
        )
    return path


class Guard:
    """ASGI middleware: the token (or, without one, a local ``Host``), GET/HEAD only, and the
    security headers on every answer (see the module docstring)."""

    def __init__(self, app: Any, access: Access) -> None:
        self.app, self.access = app, access

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        if scope["method"] not in ("GET", "HEAD"):
            await _plain(send, 405, "the live view is read-only: only GET", {"allow": "GET, HEAD"})
            return
        token = self.access.token
        if token is None:
            host = headers.get("host", "")
            name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
            if not is_local(name):
                await _plain(send, 421, "this view answers only to a local address (http://127.0.0.1:PORT/)")
                return
        else:
            given = query.get("token")
            if given is not None and token_matches(given, token):
                # A page address with the token: keep it in a cookie, drop it from the address.
                rest = urlencode([(k, v) for k, v in query.items() if k != "token"])
                where = scope["path"] + (f"?{rest}" if rest else "")
                cookie = f"{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/"
                await _plain(send, 303, "see other", {"location": where, "set-cookie": cookie})
                return
            bearer = headers.get("authorization", "")
            cookies = dict(
                part.strip().split("=", 1) for part in headers.get("cookie", "").split(";") if "=" in part
            )
            ok = token_matches(bearer.removeprefix("Bearer ").strip() or None, token) or token_matches(
                cookies.get(COOKIE), token
            )
            if not ok:
                await _plain(
                    send,
                    401,
                    "this view needs its token: open the address `scalerl ui` printed "
                    "(it ends in ?token=...), or send Authorization: Bearer TOKEN",
                )
                return

        async def with_headers(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                extra = [
                    (b"content-security-policy", CSP.encode()),
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"no-referrer"),
                    (b"x-frame-options", b"DENY"),
                ]
                message["headers"] = list(message.get("headers", [])) + extra
            await send(message)

        started = time.perf_counter()
        await self.app(scope, receive, with_headers)
        log.debug("%s %s %.0f ms", scope["method"], scope["path"], 1000 * (time.perf_counter() - started))


async def _plain(send: Send, status: int, text: str, headers: dict[str, str] | None = None) -> None:
    body = text.encode()
    raw = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]
    raw += [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})
