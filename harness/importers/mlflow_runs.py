"""MLflow tracking stores: every run of one experiment, its params and full metric histories.

Read with the real client (``MlflowClient.search_runs``, ``get_metric_history``), imported lazily:
install the ``mlflow`` or ``dev`` extra (``pip install 'scalerl-harness[mlflow]'``). Any tracking
URI the client accepts works (``sqlite:///mlflow.db``, ``file:./mlruns``, ``http://host:5000``);
MLflow 3 refuses a ``file:`` store unless ``MLFLOW_ALLOW_FILE_STORE=true`` is set, and the error
says so. A run is named by its run name, or ``<name>-<first 8 chars of its id>`` where two runs of
the experiment share a name; its params become the curves' ``params``, its tags (but MLflow's own
``mlflow.*``) their ``tags``, its state (``FINISHED``, ``FAILED``, ``KILLED``, ``RUNNING``) their
``status`` (:data:`STATUS`). The x axis is the logged
step, or with ``axis_column="timestamp"`` the seconds since the run's first logged metric, or any
metric the runs log (:mod:`scalerl.harness.importers.axis`). Steps go
through :func:`check_step` and curves through :func:`make_curve`, so losses count as for files.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from scalerl.harness.errors import ImportFormatError
from scalerl.harness.importers.base import ImportedCurve, ImportResult, LossLog, check_step, make_curve

PREFIX = "mlflow:"
_AXES = ("step", "timestamp")
# MLflow's run states (mlflow.entities.RunStatus) in the store's words.
STATUS = {
    "FINISHED": "completed",
    "FAILED": "failed",
    "KILLED": "cancelled",
    "RUNNING": "running",
    "SCHEDULED": "pending",
}


def run_status(state: str | None) -> str:
    """The store status of an MLflow run state; ``unknown`` for a state this code does not know."""
    return STATUS.get(str(state or "").upper(), "unknown")


def run_tags(tags: Mapping[str, Any]) -> dict[str, str]:
    """A run's own tags. MLflow's system tags (``mlflow.runName``, ``mlflow.user``,
    ``mlflow.log-model.history``, ...) are left out: they describe the client, not the run."""
    return {str(k): str(v) for k, v in tags.items() if not str(k).startswith("mlflow.")}


def _client_class(uri: str) -> Any:
    try:
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise ImportFormatError(
            f"{PREFIX}{uri}: reading MLflow needs the mlflow package "
            "(fix: pip install 'scalerl-harness[mlflow]')"
        ) from None
    return MlflowClient


# Tables every MLflow SQL tracking store has (mlflow/store/tracking/dbmodels, MLflow 1.x-3.x).
_MLFLOW_TABLES = frozenset({"experiments", "runs", "metrics", "params"})


def _check_existing_store(uri: str, source: str) -> None:
    """A source is read, never created or changed: MLflow's client creates a missing SQLite file
    or ``file:`` folder (and its tables, by running its own migrations, in any database it opens:
    our own store included). So a local store must already exist and look like MLflow's before the
    client sees it. Remote URIs (http, postgresql, ...) are the server's business."""
    import sqlite3
    import urllib.parse

    scheme = uri.split(":", 1)[0].lower() if ":" in uri else ""
    if scheme.startswith("sqlite"):
        raw = uri.split("://", 1)[1] if "://" in uri else ""
        path = raw[1:] if raw.startswith("/") else raw  # sqlite:///rel.db, sqlite:////abs.db
        path = urllib.parse.unquote(path.split("?", 1)[0])
        if path in ("", ":memory:"):
            raise ImportFormatError(f"{source}: an in-memory MLflow store holds nothing (fix: name the file)")
        db = Path(path)
        if not db.is_file():
            raise ImportFormatError(
                f"{source}: no MLflow database at {db} (fix: check the path; sqlite:///REL.db is "
                "relative to the current folder, sqlite:////ABS.db absolute)"
            )
        try:
            # Read-only: looking must not create or change the file.
            con = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
            try:
                tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            finally:
                con.close()
        except sqlite3.DatabaseError as err:
            raise ImportFormatError(
                f"{source}: {db} is not a SQLite database ({err}) (fix: name the MLflow tracking database)"
            ) from None
        missing = _MLFLOW_TABLES - tables
        if missing:
            ours = " (it is a scalerl store)" if "scalerl_version" in tables or "point" in tables else ""
            raise ImportFormatError(
                f"{source}: {db} is not an MLflow tracking store{ours}: no "
                f"{', '.join(sorted(missing))} table(s) (fix: name the database MLflow writes, "
                "e.g. the --backend-store-uri of its server)"
            )
    elif scheme in ("", "file") or len(scheme) == 1:  # a path, file:PATH, or a Windows drive
        raw = uri[len("file:") :] if scheme == "file" else uri
        folder = Path(urllib.parse.unquote(raw.removeprefix("//")))
        if not folder.is_dir():
            raise ImportFormatError(f"{source}: no MLflow file store at {folder} (fix: check the path)")
        if not (folder / ".trash").is_dir() and not any(folder.glob("*/meta.yaml")):
            raise ImportFormatError(
                f"{source}: {folder} is not an MLflow file store (no experiment folders with "
                "meta.yaml) (fix: name the mlruns folder)"
            )
    elif scheme.split("+", 1)[0] in _SQL_SERVERS:
        _check_sql_server(uri, source)


# Database servers MLflow's SQL store runs on. Checked once here, with a connect timeout: MLflow
# itself retries an unreachable server for minutes and then raises SQLAlchemy's error raw, and on
# a reachable database without its tables it runs its migrations (a source must stay read-only).
_SQL_SERVERS = frozenset({"postgresql", "postgres", "mysql", "mssql"})


def _check_sql_server(uri: str, source: str) -> None:
    import sqlalchemy

    from scalerl.db.redaction import scrub

    def fail(err: BaseException) -> ImportFormatError:
        text = str(getattr(err, "orig", None) or err) or type(err).__name__
        return ImportFormatError(
            f"{source}: cannot open the MLflow tracking database: {scrub(text.splitlines()[0])} "
            "(fix: check the URI, the driver and that the server is up and reachable)"
        )

    base = uri.split(":", 1)[0].lower().split("+", 1)[0]
    args = {"connect_timeout": 10} if base in ("postgresql", "postgres") else {}
    try:
        engine = sqlalchemy.create_engine(uri.replace("postgres://", "postgresql://", 1), connect_args=args)
    except Exception as err:  # a bad URL, a driver that is not installed
        raise fail(err) from None
    try:
        with engine.connect() as con:
            tables = set(sqlalchemy.inspect(con).get_table_names())
    except sqlalchemy.exc.SQLAlchemyError as err:
        raise fail(err) from None
    finally:
        engine.dispose()
    missing = _MLFLOW_TABLES - tables
    if missing:
        ours = " (it is a scalerl store)" if "scalerl_version" in tables or "point" in tables else ""
        raise ImportFormatError(
            f"{source}: not an MLflow tracking store{ours}: no {', '.join(sorted(missing))} table(s) "
            "(fix: name the database MLflow writes, e.g. the --backend-store-uri of its server)"
        )


def _search_all(client: Any, experiment_id: str) -> list[Any]:
    runs: list[Any] = []
    token: str | None = None
    while True:
        page = client.search_runs([experiment_id], max_results=1000, page_token=token)
        runs.extend(page)
        token = getattr(page, "token", None)
        if not token:
            return runs


def read_mlflow(
    uri: str,
    experiment: str,
    *,
    metric: str | None = None,
    axis_column: str | None = None,
    axis_cumulative: bool = False,
) -> ImportResult:
    """Every curve of every run of ``experiment`` at tracking ``uri`` (``metric``: exact name or
    glob), with what was lost. Raises ImportFormatError when the store cannot be opened, the
    experiment does not exist, or no metric matches. An ``axis_column`` other than ``step`` /
    ``timestamp`` (or its running total, ``axis_cumulative``) is a metric the runs log
    (``perf/gpu_hours``): the curves are placed on it by step
    (:func:`scalerl.harness.importers.axis.on_logged_axis`)."""
    import fnmatch

    from scalerl.db.redaction import scrub
    from scalerl.harness.importers.axis import on_logged_axis

    source = f"{PREFIX}{uri}#{experiment}"
    axis = axis_column or "step"
    logged = axis_column if axis_column and (axis_cumulative or axis not in _AXES) else None
    if logged is not None:
        axis = "step"  # read on the step; placed on the logged axis at the end
    _check_existing_store(uri, source)  # before MLflow: its client creates what it cannot find
    client_class = _client_class(uri)  # raises the install hint when mlflow is missing
    from mlflow.exceptions import MlflowException

    try:
        client = client_class(tracking_uri=uri)
        exp = client.get_experiment_by_name(experiment)
        if exp is None:
            names = sorted(e.name for e in client.search_experiments())
            have = ", ".join(names) or "none"
            raise ImportFormatError(f"{source}: no experiment named {experiment!r} (fix: use one of: {have})")
        runs = _search_all(client, exp.experiment_id)
        counts = Counter(r.info.run_name or r.info.run_id for r in runs)
        losses = LossLog()
        curves: list[ImportedCurve] = []
        found: set[str] = set()
        for r in sorted(runs, key=lambda r: (r.info.run_name or "", r.info.run_id)):
            name = r.info.run_name or r.info.run_id
            if counts[name] > 1:
                name = f"{name}-{r.info.run_id[:8]}"
            params = {str(k): str(v) for k, v in r.data.params.items()}
            state = str(r.info.status)
            tags = run_tags(r.data.tags)
            link = {"tracker": "mlflow", "tracking_uri": scrub(uri), "experiment": experiment,
                    "run_id": str(r.info.run_id)}  # fmt: skip
            for key in sorted(r.data.metrics):
                found.add(key)
                if (
                    metric is not None
                    and key not in (metric, logged)
                    and not fnmatch.fnmatchcase(key, metric)
                ):
                    continue
                history = client.get_metric_history(r.info.run_id, key)
                t0 = min((m.timestamp for m in history), default=0)
                steps: list[int] = []
                xs: list[float] = []
                values: list[float] = []
                where: list[str] = []
                # Logged order (time, then step): a resumed run's re-logged steps come after a
                # step that went back, which make_curve tells from a plain duplicate.
                for i, m in enumerate(sorted(history, key=lambda m: (m.timestamp, m.step))):
                    place = f"run {name!r} metric {key!r} point {i + 1}"
                    step = check_step(float(m.step), place, losses, run=name)
                    if step is None:
                        continue
                    steps.append(step)
                    xs.append(float(step) if axis == "step" else (m.timestamp - t0) / 1000.0)
                    values.append(float(m.value))
                    where.append(place)
                curve = make_curve(source, name, key, axis, steps, xs, values, where, losses)
                curves.append(
                    replace(
                        curve,
                        params=params,
                        link=link,
                        run_key=f"mlflow:{r.info.run_id}",
                        status=run_status(state),
                        source_status=state,
                        tags=tags,
                    )
                )
    except MlflowException as err:
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        fix = (
            "set MLFLOW_ALLOW_FILE_STORE=true to read a file store"
            if "MLFLOW_ALLOW_FILE_STORE" in str(err)
            else "check the tracking URI and that the store is reachable"
        )
        raise ImportFormatError(f"{source}: MLflow: {first} (fix: {fix})") from None
    kept = [c for c in curves if len(c)]
    if logged is not None and kept:
        placed = ImportResult(source, "mlflow", tuple(kept), losses.freeze())
        placed = on_logged_axis([placed], logged, cumulative=axis_cumulative)[0]
        # Empty curves stay here: a run that logs no axis must still reach the selection.
        kept, lost = list(placed.curves), placed.losses
    else:
        lost = losses.freeze()
    if metric is not None and not curves:
        shown = ", ".join(sorted(found)[:12]) or "none"
        raise ImportFormatError(f"{source}: no metric matches {metric!r} (fix: use one of: {shown})")
    if not curves:
        raise ImportFormatError(f"{source}: the experiment's runs logged no metrics (fix: pick another)")
    return ImportResult(source, "mlflow", tuple(kept), lost)
