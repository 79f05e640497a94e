"""Write a sweep's answer back into the trackers its runs were imported from (``scalerl export``).

A lab that lives in MLflow or W&B sees the harness's numbers where it already looks. For each
stored run that links back to a tracker (the ``source`` an import keeps in the run's config:
:attr:`scalerl.harness.importers.base.ImportedCurve.link`), the values of :func:`run_values`:

- the run's own sigmoid fit: ``scalerl/A``, ``scalerl/B``, ``scalerl/C_mid`` (what ``scalerl fit``
  stores per run, on the sweep's metric and axis);
- its variant's forecast (seeds pooled, as ``scalerl forecast`` gives it): ``scalerl/forecast``,
  ``scalerl/forecast_lo``, ``scalerl/forecast_hi`` at ``scalerl/forecast_at`` (compute);
- its knob's verdict: ``scalerl/verdict`` (text), ``scalerl/d_a`` with ``scalerl/d_a_lo`` /
  ``scalerl/d_a_hi``; and ``scalerl/sweep``, ``scalerl/variant``, ``scalerl/knob``.

Where they go (one :class:`Writer` per tracker, :data:`WRITERS`):

- MLflow: numbers as metrics (step 0) and text as tags (``scalerl.verdict``, ...) on the source
  run, through ``MlflowClient.log_batch``; the tracking URI is the one the import read (its
  password was never stored: pass ``mlflow_uri`` where it had one).
- W&B (a project): the public API, ``Api().run(ENTITY/PROJECT/ID).summary``, then
  ``summary.update()`` (W&B's documented way to change a finished run's summary).
- W&B offline runs: ``wandb.init(id=ID, resume="allow", mode="offline")`` into the folder the run
  was logged in, ``run.summary.update(...)``, ``finish()``: a new ``offline-run-*`` part of the
  same run that ``wandb sync`` uploads with the rest; it logs no history row, so a later import
  reads the run as before (:func:`scalerl.harness.importers.wandb_runs._join_parts`).

Numbers come from :meth:`scalerl.harness.api.Sweep.fit` and :meth:`~scalerl.harness.api.Sweep.forecast`
(the same as ``scalerl fit`` / ``forecast``); nothing in the store changes. Exporting again
overwrites the same keys.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scalerl.harness.errors import ConfigError, ExecutionError

PREFIX = "scalerl/"
Value = float | str


@dataclass(frozen=True)
class Target:
    """One stored run and where its values go."""

    run_id: str  # the store's
    run: str  # the source's run name
    tracker: str  # "mlflow", "wandb", "wandb-offline"
    link: Mapping[str, str]
    values: Mapping[str, Value] = field(default_factory=dict)

    @property
    def where(self) -> str:
        link = self.link
        if self.tracker == "mlflow":
            return f"mlflow run {link.get('run_id')} ({link.get('tracking_uri')})"
        if self.tracker == "wandb":
            return f"wandb run {link.get('path')}"
        return f"wandb offline run {link.get('run_id')} ({link.get('run_dir')})"


@dataclass(frozen=True)
class ExportPlan:
    """What :func:`plan` found: the runs to write and the runs left alone, with why."""

    sweep: str
    metric: str
    axis: str
    targets: tuple[Target, ...]
    skipped: tuple[tuple[str, str], ...]  # (run id, reason)


def _finite(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def run_values(
    fit_row: Mapping[str, Any] | None,
    forecast_row: Mapping[str, Any] | None,
    verdict_row: Mapping[str, Any] | None,
    *,
    sweep: str,
    variant: str,
    knob: str | None,
) -> dict[str, Value]:
    """The values one run gets (module docstring); a number that is not finite is left out."""
    out: dict[str, Value] = {"sweep": sweep, "variant": variant}
    if knob:
        out["knob"] = knob
    pairs: list[tuple[str, Any]] = []
    if fit_row is not None:
        pairs += [("A", fit_row.get("a")), ("B", fit_row.get("b")), ("C_mid", fit_row.get("c_mid"))]
    if forecast_row is not None:
        pairs += [
            ("forecast", forecast_row.get("value")),
            ("forecast_lo", forecast_row.get("lo")),
            ("forecast_hi", forecast_row.get("hi")),
            ("forecast_at", forecast_row.get("compute")),
        ]
    if verdict_row is not None:
        out["verdict"] = str(verdict_row.get("verdict"))
        pairs += [("d_a", verdict_row.get("d_a")), ("d_a_lo", verdict_row.get("d_a_lo")),
                  ("d_a_hi", verdict_row.get("d_a_hi"))]  # fmt: skip
    for key, raw in pairs:
        number = _finite(raw)
        if number is not None:
            out[key] = number
    return out


def plan(sweep: Any, *, n_boot: int = 200, trackers: Sequence[str] | None = None) -> ExportPlan:
    """The values of every run of ``sweep`` (a :class:`scalerl.harness.api.Sweep`) that links to a
    tracker (``trackers``: only those; default all of :data:`WRITERS`)."""
    from scalerl.db import queries

    wanted = tuple(trackers) if trackers else tuple(WRITERS)
    fitted = sweep.fit(n_boot=n_boot, save=False)
    forecast = sweep.forecast(metric=fitted.metric, axis=fitted.axis)
    runs = sweep.runs_dataframe(metric=fitted.metric, axis=fitted.axis)
    configs = queries.run_configs(sweep.store(), sweep.name)
    per_run = fitted.fits[fitted.fits["run_id"].notna()].set_index("run_id")
    per_variant = {str(r["variant"]): r for r in forecast.frame.to_dict("records")}
    verdicts = {str(r["variant"]): r for r in fitted.verdicts.to_dict("records")}
    targets: list[Target] = []
    skipped: list[tuple[str, str]] = []
    for row in runs.to_dict("records"):
        rid = str(row["run_id"])
        config = configs.get(rid) or {}
        link = config.get("source")
        if not isinstance(link, Mapping) or link.get("tracker") not in WRITERS:
            skipped.append((rid, "not imported from MLflow or W&B (no link to write back to)"))
            continue
        if link["tracker"] not in wanted:
            skipped.append((rid, f"a {link['tracker']} run, not asked for"))
            continue
        variant = str(row["variant"])
        fit_row = per_run.loc[rid].to_dict() if rid in per_run.index else None
        values = run_values(
            fit_row,
            per_variant.get(variant),
            verdicts.get(variant),
            sweep=sweep.name,
            variant=variant,
            knob=None if row["knob"] is None or row["knob"] != row["knob"] else str(row["knob"]),
        )
        targets.append(Target(rid, str(config.get("run") or rid), str(link["tracker"]), dict(link), values))
    return ExportPlan(sweep.name, fitted.metric, fitted.axis, tuple(targets), tuple(skipped))


# --- writers -----------------------------------------------------------------------------------

Writer = Callable[[Sequence[Target], Mapping[str, Any]], None]


def _need(package: str, extra: str) -> None:
    import importlib.util

    if importlib.util.find_spec(package) is None:
        raise ExecutionError(
            f"writing back to {extra} needs the {package} package "
            f"(fix: pip install 'scalerl-harness[{extra}]' from the wheel or checkout you installed)"
        )


def write_mlflow(targets: Sequence[Target], options: Mapping[str, Any]) -> None:
    """Metrics and tags on each target's MLflow run (``options["mlflow_uri"]`` overrides the
    stored tracking URI, which never holds a password)."""
    _need("mlflow", "mlflow")
    import time

    from mlflow.entities import Metric, RunTag
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    override = options.get("mlflow_uri")
    clients: dict[str, Any] = {}
    now = int(time.time() * 1000)
    for t in targets:
        uri = override or str(t.link.get("tracking_uri"))
        if "***" in uri:
            raise ConfigError(
                "the tracking URI the import read held a password, which the store never keeps",
                field="--mlflow-uri",
                value=uri,
                fix="pass --mlflow-uri with the full URI (or set MLflow's own credentials variables)",
            )
        client = clients.setdefault(uri, MlflowClient(tracking_uri=uri))
        metrics = [Metric(PREFIX + k, float(v), now, 0) for k, v in t.values.items() if isinstance(v, float)]
        tags = [RunTag("scalerl." + k, str(v)) for k, v in t.values.items() if isinstance(v, str)]
        try:
            client.log_batch(str(t.link["run_id"]), metrics=metrics, tags=tags)
        except MlflowException as err:
            first = str(err).splitlines()[0] if str(err) else type(err).__name__
            raise ExecutionError(f"{t.where}: MLflow refused the write: {first}") from None


def _summary(values: Mapping[str, Value]) -> dict[str, Value]:
    return {PREFIX + k: v for k, v in values.items()}


def write_wandb(targets: Sequence[Target], options: Mapping[str, Any]) -> None:
    """Each target's run summary through the public API (network and credentials needed);
    ``options["wandb_api"]``: an ``Api`` to use instead (tests pass a fake)."""
    api = options.get("wandb_api")
    if api is None:
        _need("wandb", "wandb")
        import wandb

        api = wandb.Api()
    for t in targets:
        run = api.run(str(t.link["path"]))
        for key, value in _summary(t.values).items():
            run.summary[key] = value
        run.summary.update()


def write_wandb_offline(targets: Sequence[Target], options: Mapping[str, Any]) -> None:
    """Each target's summary as a new offline part of its run (module docstring)."""
    _need("wandb", "wandb")
    import wandb

    for t in targets:
        run_dir = Path(str(t.link["run_dir"]))
        # run_dir is <dir>/wandb/offline-run-<time>-<id>: wandb.init(dir=<dir>) writes beside it.
        root = run_dir.parent.parent if run_dir.parent.name == "wandb" else run_dir.parent
        settings = wandb.Settings(mode="offline", silent=True, console="off")
        run = wandb.init(
            id=str(t.link["run_id"]),
            project=t.link.get("project") or None,
            entity=t.link.get("entity") or None,
            name=t.run,
            dir=str(root),
            resume="allow",
            settings=settings,
        )
        try:
            run.summary.update(_summary(t.values))
        finally:
            run.finish()


WRITERS: dict[str, Writer] = {
    "mlflow": write_mlflow,
    "wandb": write_wandb,
    "wandb-offline": write_wandb_offline,
}


def export(export_plan: ExportPlan, **options: Any) -> dict[str, int]:
    """Write every target of ``export_plan`` through its tracker's writer; tracker -> runs written."""
    by_tracker: dict[str, list[Target]] = {}
    for t in export_plan.targets:
        by_tracker.setdefault(t.tracker, []).append(t)
    for tracker, targets in by_tracker.items():
        WRITERS[tracker](targets, options)
    return {tracker: len(targets) for tracker, targets in by_tracker.items()}
