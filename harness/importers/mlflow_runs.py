"""MLflow tracking stores: every run of one experiment, its params and full metric histories.

Read with the real client (``MlflowClient.search_runs``, ``get_metric_history``), imported lazily:
install the ``mlflow`` or ``dev`` extra (``pip install 'scalerl-harness[mlflow]'``). Any tracking
URI the client accepts works (``sqlite:///mlflow.db``, ``file:./mlruns``, ``http://host:5000``);
MLflow 3 refuses a ``file:`` store unless ``MLFLOW_ALLOW_FILE_STORE=true`` is set, and the error
says so. A run is named by its run name, or ``<name>-<first 8 chars of its id>`` where two runs of
the experiment share a name; its params become the curves' ``params``. The x axis is the logged
step, or with ``axis_column="timestamp"`` the seconds since the run's first logged metric. Steps go
through :func:`check_step` and curves through :func:`make_curve`, so losses count as for files.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any

from scalerl.harness.errors import ImportFormatError
from scalerl.harness.importers.base import ImportedCurve, ImportResult, LossLog, check_step, make_curve

PREFIX = "mlflow:"
_AXES = ("step", "timestamp")


def _client_class(uri: str) -> Any:
    try:
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise ImportFormatError(
            f"{PREFIX}{uri}: reading MLflow needs the mlflow package "
            "(fix: pip install 'scalerl-harness[mlflow]')"
        ) from None
    return MlflowClient


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
) -> ImportResult:
    """Every curve of every run of ``experiment`` at tracking ``uri`` (``metric``: exact name or
    glob), with what was lost. Raises ImportFormatError when the store cannot be opened, the
    experiment does not exist, or no metric matches."""
    import fnmatch

    source = f"{PREFIX}{uri}#{experiment}"
    axis = axis_column or "step"
    if axis not in _AXES:
        raise ImportFormatError(
            f"{source}: axis column {axis!r} is not an MLflow axis (fix: use one of {_AXES})"
        )
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
            for key in sorted(r.data.metrics):
                found.add(key)
                if metric is not None and key != metric and not fnmatch.fnmatchcase(key, metric):
                    continue
                history = client.get_metric_history(r.info.run_id, key)
                t0 = min((m.timestamp for m in history), default=0)
                steps: list[int] = []
                xs: list[float] = []
                values: list[float] = []
                where: list[str] = []
                for i, m in enumerate(sorted(history, key=lambda m: (m.step, m.timestamp))):
                    place = f"run {name!r} metric {key!r} point {i + 1}"
                    step = check_step(float(m.step), place, losses)
                    if step is None:
                        continue
                    steps.append(step)
                    xs.append(float(step) if axis == "step" else (m.timestamp - t0) / 1000.0)
                    values.append(float(m.value))
                    where.append(place)
                curve = make_curve(source, name, key, axis, steps, xs, values, where, losses)
                curves.append(replace(curve, params=params))
    except MlflowException as err:
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        fix = (
            "set MLFLOW_ALLOW_FILE_STORE=true to read a file store"
            if "MLFLOW_ALLOW_FILE_STORE" in str(err)
            else "check the tracking URI and that the store is reachable"
        )
        raise ImportFormatError(f"{source}: MLflow: {first} (fix: {fix})") from None
    if metric is not None and not curves:
        shown = ", ".join(sorted(found)[:12]) or "none"
        raise ImportFormatError(f"{source}: no metric matches {metric!r} (fix: use one of: {shown})")
    if not curves:
        raise ImportFormatError(f"{source}: the experiment's runs logged no metrics (fix: pick another)")
    return ImportResult(source, "mlflow", tuple(c for c in curves if len(c)), losses.freeze())
