"""The Python API for notebooks: :class:`Sweep`, a thin facade over what the ``scalerl`` commands do.

::

    from scalerl.harness import Sweep

    sweep = Sweep.from_yaml("recipes/tiny-loo.yaml", ["seeds=[0]"], db="sqlite:///demo.db")
    sweep.plan().runs                 # the PlannedRuns `scalerl plan` lists
    sweep.launch(executor="local")    # `scalerl sweep`: submits only what is missing
    sweep.wait(timeout_s=3600)        # `--wait`, quiet unless given a stream
    sweep.status()                    # `scalerl status` as a DataFrame
    sweep.curves()                    # scalerl.db.queries.curves of the sweep's fit metric
    sweep.fit().verdicts              # `scalerl fit`, as DataFrames, nothing printed
    sweep.runs_dataframe()            # one row per run: status, params.*, final value, fitted A
    sweep.forecast(at=[1e15]).frame   # `scalerl forecast`, one row per variant and compute
    sweep.report("loo.html")          # `scalerl report`; .figures() gives its Plotly figures
    sweep.cancel()                    # `scalerl cancel`

    list_sweeps(db="sqlite:///demo.db")  # every sweep in a store, its runs counted by status

Every method calls the functions the CLI handlers call (``scalerl.harness.recipe``,
``scalerl.harness.execution``, ``scalerl.harness.search``, ``scalerl.harness.analysis.verdicts.service``,
``scalerl.harness.report``), so a notebook and the command line plan the same run ids and write the
same rows. Nothing here prints.

The store (``db=URL``; default ``$SCALERL_DB_URL``, else ``sqlite:///./scalerl.db``) is opened on
first use, in the mode the matching command uses: :meth:`Sweep.launch` may create it, the other
methods need it to exist (:meth:`Sweep.report` and :meth:`Sweep.figures` only read). A
:class:`Sweep` is not thread-safe; :meth:`Sweep.close` (or ``with``) closes its stores.
"""

from __future__ import annotations

import io
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TextIO

from scalerl.harness.errors import ConfigError, ExecutionError

if TYPE_CHECKING:
    import pandas as pd
    import plotly.graph_objects as go

    from scalerl.db import Store
    from scalerl.harness.execution.progress import Snapshot
    from scalerl.harness.recipe import Plan, SweepSpec
    from scalerl.harness.report.document import ReportData

__all__ = ["CancelResult", "FitResult", "ForecastResult", "LaunchResult", "Sweep", "list_sweeps"]

_Mode = Literal["create", "existing", "readonly"]
DEFAULT_METRIC = "val/pass_rate"


@dataclass(frozen=True)
class LaunchResult:
    """What :meth:`Sweep.launch` did. ``decisions`` has one row per planned run (the columns of
    ``scalerl sweep --json``: run_id, variant, seed, action, reason, job_id); a search's has none,
    its trials become runs as its workers start them (``job_ids``: the workers)."""

    sweep: str
    executor: str
    state_dir: Path
    decisions: pd.DataFrame
    job_ids: tuple[str, ...] = ()

    def count(self, *actions: str) -> int:
        """How many runs got one of ``actions`` (``submit``, ``retry``, ``skip-completed`` ...)."""
        return 0 if self.decisions.empty else int(self.decisions["action"].isin(actions).sum())


@dataclass(frozen=True)
class FitResult:
    """:meth:`Sweep.fit`: the rows ``scalerl fit`` stores, as frames with the store's columns
    (``scalerl.db.models.FIT_COLUMNS`` / ``VERDICT_COLUMNS``), and whether they were saved."""

    sweep: str
    metric: str
    axis: str
    fits: pd.DataFrame
    verdicts: pd.DataFrame
    notes: tuple[str, ...] = ()
    saved: bool = False
    # scalerl.harness.analysis.verdicts.types.SweepAnalysis | None
    analysis: Any = field(default=None, repr=False)


@dataclass(frozen=True)
class ForecastResult:
    """:meth:`Sweep.forecast`: ``scalerl forecast``'s numbers. ``frame`` has one row per variant
    and forecast compute (``FORECAST_COLUMNS``: variant, knob, runs, points, last_compute, status,
    reason, method (``sweep``: borrowed strength from the sibling variants; ``single``: its own
    points only), phase (``past`` / ``before`` the curve's inflection: before it the interval is
    the wide kind / ``no rise``), compute, value, lo, hi; with ``reach``, also reach_fraction,
    reach_a, reach_compute, reach_lo, reach_hi); ``rows`` are the variants as ``scalerl forecast
    --json`` prints them; ``bounds`` the (lo, hi) every value and interval was clipped to (None:
    not clipped)."""

    sweep: str
    metric: str
    axis: str
    level: float
    frame: pd.DataFrame
    rows: tuple[dict[str, Any], ...] = ()
    bounds: tuple[float, float] | None = None


FORECAST_COLUMNS: tuple[str, ...] = (
    "variant", "knob", "runs", "points", "last_compute", "status", "reason", "method", "phase",
    "compute", "value", "lo", "hi",
)  # fmt: skip
_REACH_COLUMNS = ("reach_fraction", "reach_a", "reach_compute", "reach_lo", "reach_hi")


@dataclass(frozen=True)
class CancelResult:
    """:meth:`Sweep.cancel`: run_id -> outcome (``cancelled``, ``already completed``, ``never
    submitted`` ...) and, for a search, the study's outcome."""

    sweep: str
    outcomes: dict[str, str]
    search: str | None = None

    @property
    def cancelled(self) -> int:
        """How many runs this call marked cancelled."""
        return sum(v == "cancelled" for v in self.outcomes.values())


class Sweep:
    """One sweep: from its YAML file (plan and launch), or by name from a store (the rest).

    Build with :meth:`from_yaml`, :meth:`from_dict` or :meth:`open`, not the constructor.
    """

    def __init__(
        self,
        name: str,
        *,
        spec: SweepSpec | None = None,
        path: Path | None = None,
        overrides: Sequence[str] = (),
        db: str | None = None,
        from_dict: bool = False,
    ) -> None:
        self.name = name
        self.spec = spec
        self.path = path
        self.overrides = tuple(overrides)
        self.db = db
        self._from_dict = from_dict
        self._stores: dict[_Mode, Store] = {}
        self._launched: Any = None  # scalerl.harness.search.launch.Launched of this object's search
        self._stored_spec: dict[str, Any] | None = None
        self._poll_s: float | None = None  # how often wait() asks the scheduler: set by launch()

    # ----------------------------------------------------------------- building

    @classmethod
    def from_yaml(cls, path: str | Path, overrides: Sequence[str] = (), *, db: str | None = None) -> Sweep:
        """``scalerl plan PATH key=value ...``'s sweep: read, extend, override and validate it.

        Raises :class:`~scalerl.harness.errors.ConfigError` naming the file, line, field, value and fix."""
        from scalerl.harness.recipe import load_sweep
        from scalerl.harness.recipe.loader import as_overrides, as_path

        as_overrides(overrides)  # a bare string or None is a ConfigError, not a TypeError
        spec = load_sweep(path, list(overrides))
        return cls(spec.sweep, spec=spec, path=as_path(path, "sweep file"), overrides=overrides, db=db)

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any],
        overrides: Sequence[str] = (),
        *,
        base_dir: str | Path = ".",
        db: str | None = None,
    ) -> Sweep:
        """A sweep written as a dict (the YAML file's content). Relative ``base:`` and ``extends:``
        paths are read from ``base_dir``. The dict goes through the same loader as a file (it is
        written to a temporary YAML file, left in place: a search's local workers read it); its
        errors name the field, value and fix, without a file or line (a dict has none)."""
        import yaml

        if not isinstance(data, Mapping):
            raise ConfigError(
                f"a sweep dict must be a mapping (the YAML file's content), not {type(data).__name__}",
                field="data",
                value=data if data is None or isinstance(data, str | int | float) else None,
                fix="pass e.g. {'sweep': 'demo', 'base': 'tiny.yaml', ...}, or use from_yaml",
            )
        folder = Path(tempfile.mkdtemp(prefix="scalerl-sweep-"))
        content = dict(data)
        for key in ("base", "extends"):
            if isinstance(content.get(key), str):
                content[key] = str((Path(base_dir) / content[key]).resolve())
        path = folder / "sweep.yaml"
        path.write_text(yaml.safe_dump(content, sort_keys=False), encoding="utf-8")
        try:
            made = cls.from_yaml(path, overrides, db=db)
        except ConfigError as err:
            if err.file != str(path):
                raise
            raise ConfigError(err.reason, field=err.field, value=err.value, fix=err.fix) from None
        made._from_dict = True
        return made

    @classmethod
    def open(cls, name: str, *, db: str | None = None) -> Sweep:
        """A sweep already in the store, by name: status, wait, curves, fit and report work; plan
        and launch need its file (:meth:`from_yaml`). The store must exist."""
        if not isinstance(name, str) or not name:
            raise ConfigError(
                f"a sweep name must be a non-empty string, not {name!r}",
                field="name",
                fix="pass the name `scalerl status` lists, e.g. Sweep.open('tiny-loo')",
            )
        made = cls(name, db=db)
        made._spec_in_store()  # an unknown name fails here, listing the known ones
        return made

    # ------------------------------------------------------------- the store

    def store(self, mode: _Mode = "existing") -> Store:
        """The ``db`` store opened as the commands open it: ``create`` (``scalerl sweep``),
        ``existing`` (``status``, ``fit``: never creates one) or ``readonly`` (``report``)."""
        if mode not in self._stores:
            from scalerl import db

            opened = db.open_store(self.db, create=mode == "create", readonly=mode == "readonly")
            self._stores[mode] = opened
        return self._stores[mode]

    def close(self) -> None:
        """Close the stores this object opened (it opens them again when used)."""
        for store in self._stores.values():
            store.close()
        self._stores.clear()

    def __enter__(self) -> Sweep:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        where = f" from {self.path}" if self.path and not self._from_dict else ""
        return f"Sweep({self.name!r}{where})"

    def _spec_in_store(self) -> dict[str, Any]:
        if self._stored_spec is None:
            from scalerl.harness.lookup import require_sweep

            # An unknown name: NotFoundError (a ConfigError), listing the known ones.
            self._stored_spec = require_sweep(self.store(), self.name, how="db=URL, or launch it first")
        return self._stored_spec

    def _require_metric(self, metric: str) -> None:
        """A metric no run logged fails naming this API's argument, not the CLI's flag."""
        from scalerl.harness.lookup import require_metric

        require_metric(self.store("readonly"), self.name, metric, how="metric=NAME")

    def _metric(self, metric: str | None) -> str:
        if metric:
            return metric
        if self.spec is not None:
            return str(self.spec.fit.metric)
        return str((self._spec_in_store().get("fit") or {}).get("metric") or DEFAULT_METRIC)

    def _metric_axis(self, metric: str | None, axis: str | None) -> tuple[str, str]:
        """The metric and axis ``scalerl fit`` / ``forecast`` use when not given: the stored
        sweep's defaults (:func:`scalerl.harness.analysis.verdicts.service.resolve_request`)."""
        from scalerl.harness.analysis.verdicts.service import FitRequest, resolve_request

        m, x, _, _ = resolve_request(FitRequest(metric=metric, axis=axis), self._spec_in_store())
        return m, x

    def _need_file(self, what: str) -> SweepSpec:
        if self.spec is None or self.path is None:
            raise ConfigError(
                f"{what} needs the sweep's file; this Sweep was opened from the store",
                field="sweep",
                value=self.name,
                fix="use Sweep.from_yaml(PATH) (or from_dict) to plan or launch",
            )
        return self.spec

    # ------------------------------------------------------------- planning

    def plan(self) -> Plan:
        """``scalerl plan``: the runs (``.runs``: variant, seed, run id, resolved recipe, budget)
        and the variants planned once because they resolve to another's config (``.duplicates``)."""
        from scalerl.harness.recipe import plan

        return plan(self._need_file("plan()"))

    # ------------------------------------------------------------- launching

    def launch(
        self,
        executor: str | None = None,
        *,
        profile: str | None = None,
        state_dir: str | Path | None = None,
        max_parallel: int | None = None,
        workers: int | None = None,
        on_code_change: Literal["refuse", "reuse", "rerun"] | None = None,
    ) -> LaunchResult:
        """``scalerl sweep``: record the sweep and submit only its missing runs (completed ones are
        skipped, failed ones retried up to ``max_retries``). ``executor``: local, slurm or debug
        (default: the sweep's). The ``debug`` executor runs everything in this process before
        returning; ``local`` and ``slurm`` return once submitted (see :meth:`wait`).
        A ``design: optuna`` sweep starts its search's ``workers`` instead. ``on_code_change``
        (``refuse`` | ``reuse`` | ``rerun``; default: the sweep file's, ``refuse``): what to do with
        runs that other code made (:mod:`scalerl.harness.execution.codechange`)."""
        import pandas as pd

        spec = self._need_file("launch()")
        assert self.path is not None
        state = Path(state_dir).resolve() if state_dir is not None else None
        if spec.design == "optuna":
            return self._launch_search(spec, executor, profile, state, workers)
        from scalerl.harness.execution.sweep import launch, prepare

        prepared = prepare(
            self.path,
            list(self.overrides),
            executor=executor,
            profile=profile,
            db_url=self.db,
            state_dir=state,
            max_parallel=max_parallel,
            loaded=spec,
        )
        report = launch(self.store("create"), prepared, on_code_change=on_code_change)
        on_slurm = prepared.executor.name == "slurm"
        self._poll_s = float(prepared.executor.ctx.profile.poll_s) if on_slurm else 2.0
        jobs = {h.run_id: h.job_id for h in report.handles}
        rows = [
            {"run_id": d.spec.run_id, "variant": d.spec.variant, "seed": d.spec.seed, "action": d.action,
             "reason": d.reason, "job_id": jobs.get(d.spec.run_id)}
            for d in report.decisions
        ]  # fmt: skip
        columns = ["run_id", "variant", "seed", "action", "reason", "job_id"]
        return LaunchResult(
            report.sweep,
            report.executor,
            prepared.executor.ctx.state_dir,
            pd.DataFrame(rows, columns=columns),
            tuple(str(h.job_id) for h in report.handles),
        )

    def _launch_search(
        self,
        spec: SweepSpec,
        executor: str | None,
        profile: str | None,
        state: Path | None,
        workers: int | None,
    ) -> LaunchResult:
        """As ``scalerl sweep`` does for ``design: optuna`` (scalerl.harness.cli.sweep._search)."""
        import pandas as pd

        from scalerl.harness.execution.profile import SlurmProfile
        from scalerl.harness.execution.submit import default_state_dir
        from scalerl.harness.execution.sweep import (
            check_store_for,
            job_db_url,
            resolve_profile,
            resolve_resources,
        )
        from scalerl.harness.search import launch_search
        from scalerl.harness.search.space import check_space

        assert self.path is not None
        name = executor or spec.executor
        prof = resolve_profile(spec, profile) if (name == "slurm" or profile) else SlurmProfile()
        check_store_for(name, self.db, prof)
        job_url = job_db_url(self.db)  # a URL with a secret is refused before the store is touched
        check_space(spec)  # so is a bad corner of the space or a bad pruner option
        state = state or default_state_dir(spec.sweep)
        self._poll_s = float(prof.poll_s) if name == "slurm" else 2.0
        self.store("create").ensure_sweep(spec.sweep, spec.model_dump(mode="json", by_alias=True))
        sweep_file = self.path
        if self._from_dict:  # workers read the file: keep a copy where the jobs can see it
            sweep_file = state / "search" / "sweep.yaml"
            sweep_file.parent.mkdir(parents=True, exist_ok=True)
            sweep_file.write_text(self.path.read_text(encoding="utf-8"), encoding="utf-8")
        self._launched = launch_search(
            spec,
            sweep_file,
            list(self.overrides),
            executor=name,
            resources=resolve_resources(spec, prof),
            profile=prof,
            db_url=job_url,
            state_dir=state,
            workers=workers,
        )
        return LaunchResult(spec.sweep, name, state, pd.DataFrame(), self._launched.job_ids)

    # ------------------------------------------------------------- following

    def status(self, *, sync: bool = True) -> pd.DataFrame:
        """``scalerl status``: one row per run (run_id, variant, seed, status, attempts, job,
        job_state, error). ``sync`` first records jobs that ended without finishing their run as
        failed (skipped, with the scheduler's states still shown, on a read-only store)."""
        import dataclasses

        import pandas as pd

        from scalerl import db
        from scalerl.harness.execution.status import RunView, latest_handles, poll_jobs, views
        from scalerl.harness.execution.status import sync as sync_states

        store = self.store()
        self._spec_in_store()
        if sync:
            try:
                states = sync_states(store, self.name)
            except db.StoreReadOnlyError:
                states = poll_jobs(latest_handles(store, self.name))
        else:
            states = {}
        rows = [dataclasses.asdict(r) for r in views(store, self.name, states)]
        return pd.DataFrame(rows, columns=[f.name for f in dataclasses.fields(RunView)])

    def progress(self, metric: str | None = None) -> Snapshot:
        """The counts ``scalerl sweep --wait`` shows (``.done``, ``.completed``, ``.failed``,
        ``.headline()``), read from the store without syncing job states."""
        from scalerl.harness.execution.progress import snapshot

        return snapshot(self.store(), self.name, self._metric(metric))

    def wait(
        self,
        *,
        timeout_s: float | None = None,
        interval_s: float = 2.0,
        poll_s: float | None = None,
        out: TextIO | None = None,
    ) -> Snapshot:
        """``scalerl sweep --wait``: sync job states (at most every ``poll_s``: default 2 s, the
        profile's ``poll_s`` on Slurm) and read progress every ``interval_s`` until every run ended.
        Progress lines go to ``out`` (default: nowhere). With ``fit.stop_when: decided`` (or
        ``settled``), stops decided (and futile) variants as the CLI does. A search launched by
        this object is followed until its workers exit. Returns the last snapshot (check ``.failed``); raises
        :class:`~scalerl.harness.errors.ExecutionError` after ``timeout_s`` with runs still unfinished."""
        from scalerl.harness.execution.progress import follow, wait_tick

        stream = out if out is not None else io.StringIO()
        start = time.monotonic()
        if self._launched is not None and self.spec is not None:
            from scalerl.harness.execution.sweep import job_db_url
            from scalerl.harness.search import wait_search

            wait_search(
                self.spec,
                self._launched,
                job_db_url(self.db),
                interval_s=interval_s,
                timeout_s=timeout_s,
                out=stream,
            )
            # As `scalerl sweep` for a search: done when its workers exit (trials are its runs).
            return self._done_or_raise(self.progress(), timeout_s)
        store = self.store()
        self._spec_in_store()
        every = poll_s or self._poll_s or self._default_poll_s()
        fit = self.spec.fit if self.spec is not None else None
        tick = wait_tick(
            store,
            self.name,
            every_s=every,
            stop_when=fit.stop_when if fit is not None else "never",
            confidence=fit.confidence if fit is not None else 0.95,
            say=lambda line: stream.write(line + "\n"),
        )
        left = None if timeout_s is None else max(0.0, timeout_s - (time.monotonic() - start))
        snap = follow(
            store,
            self.name,
            metric=self._metric(None),
            interval_s=interval_s,
            timeout_s=left,
            out=stream,
            before_tick=tick,
        )
        return self._done_or_raise(snap, timeout_s)

    def _done_or_raise(self, snap: Snapshot, timeout_s: float | None) -> Snapshot:
        if not snap.done:
            waited = "its workers exited" if timeout_s is None else f"{timeout_s:g} s"
            raise ExecutionError(
                f"sweep {self.name!r} not done after {waited}: {snap.headline()} "
                "(fix: call wait() again, or look at status())"
            )
        return snap

    def _default_poll_s(self) -> float:
        """Not launched by this object: the default profile's poll_s for a Slurm sweep, else 2 s."""
        from scalerl.harness.execution.profile import SlurmProfile

        executor = self.spec.executor if self.spec is not None else self._spec_in_store().get("executor")
        return float(SlurmProfile().poll_s) if executor == "slurm" else 2.0

    # ------------------------------------------------------------- results

    def runs(self) -> pd.DataFrame:
        """``scalerl.db.queries.runs``: the sweep's runs with status, attempts and point counts."""
        from scalerl.db import queries

        return queries.runs(self.store(), self.name)

    def runs_dataframe(self, *, metric: str | None = None, axis: str | None = None) -> pd.DataFrame:
        """One row per run, in the spirit of Optuna's ``trials_dataframe()``.

        Columns: ``run_id, sweep, variant, knob, alternative, seed, status, attempts``; the run's
        last point of ``metric`` (default: the sweep's, as ``scalerl fit`` picks it): ``value``,
        its ``step``, its ``compute`` on ``axis`` and ``n_points`` (NaN / 0 for a run that logged
        none); the stored per-run fit of that metric and axis (``a``, ``b``, ``c_mid``,
        ``fit_status``; NaN / None before ``scalerl fit`` or :meth:`fit`); where an imported run
        came from, ``source`` (``mlflow:<tracking URI>#<experiment>``, ``wandb:ENTITY/PROJECT/ID``,
        ``wandb-offline:<run dir>``, ``file:<path>``; no password) and ``source_run_id`` (the
        MLflow or W&B run id; None for a file, or a run the harness trained); then ``params.<key>``,
        one column per leaf of the run's config flattened to dotted keys (``params.optimizer.lr``,
        ``params.knobs.loss.choice``; an imported run's source params: ``params.lr``, and its tags
        ``tags.<key>``). ``frame.attrs`` holds the ``metric`` and ``axis``. Four reads, none per run."""
        import pandas as pd

        from scalerl.db import queries

        m, x = self._metric_axis(metric, axis)
        store = self.store()
        base = ["run_id", "sweep", "variant", "knob", "alternative", "seed", "status", "attempts"]
        frame = queries.runs(store, self.name)[base].reset_index(drop=True)
        final = queries.final_points(store, self.name, m)
        final["compute"] = final["step"].astype("float64") if x == "step" else final[x]
        frame = frame.merge(
            final[["run_id", "value", "step", "compute", "n_points"]], on="run_id", how="left"
        )
        frame["n_points"] = frame["n_points"].fillna(0).astype("int64")
        fits = queries.fits(store, self.name, metric=m, axis=x)
        per_run = fits[fits["run_id"].notna()][["run_id", "a", "b", "c_mid", "status"]]
        per_run = per_run.drop_duplicates("run_id", keep="last").rename(columns={"status": "fit_status"})
        frame = frame.merge(per_run, on="run_id", how="left")
        for col in ("value", "compute", "a", "b", "c_mid"):
            frame[col] = frame[col].astype("float64")
        configs = queries.run_configs(store, self.name)
        links = [source_link(configs.get(str(rid)) or {}) for rid in frame["run_id"]]
        frame["source"] = [link[0] for link in links]
        frame["source_run_id"] = [link[1] for link in links]
        flat = [_run_params(configs.get(str(rid)) or {}) for rid in frame["run_id"]]
        keys = sorted({k for row in flat for k in row})
        if keys:
            params = pd.DataFrame([[row.get(k) for k in keys] for row in flat], columns=keys)
            frame = pd.concat([frame, params], axis=1)
        frame.attrs.update(metric=m, axis=x)
        return frame

    def curves(self, metric: str | None = None, *, all_metrics: bool = False) -> pd.DataFrame:
        """``scalerl.db.queries.curves`` of the sweep: every point of ``metric`` (default: the sweep's
        ``fit.metric``), or of every metric with ``all_metrics``; columns ``CURVE_COLUMNS``."""
        from scalerl.db import queries

        return queries.curves(self.store(), self.name, None if all_metrics else self._metric(metric))

    def fit(
        self,
        *,
        metric: str | None = None,
        axis: str | None = None,
        window_start: float | None = None,
        window_fraction: float | None = None,
        margin: float | None = None,
        method: str = "fast",
        n_boot: int = 200,
        save: bool = True,
    ) -> FitResult:
        """``scalerl fit``: fit every run and variant, classify each knob; with ``save`` (and a
        writable store), replace the stored fits and verdicts of this metric and axis. Defaults
        come from the sweep's ``fit`` section. Raises AnalysisError when nothing can be fitted."""
        import pandas as pd

        from scalerl import db
        from scalerl.db.models import FIT_COLUMNS, VERDICT_COLUMNS
        from scalerl.harness.analysis.fit.fitters import get_fitter
        from scalerl.harness.analysis.verdicts.service import FitRequest, fit_sweep, save_fits

        get_fitter(method)  # an unknown name fails before the store is read
        self._require_metric(self._metric_axis(metric, axis)[0])
        req = FitRequest(
            metric=metric,
            axis=axis,
            window_start=window_start,
            window_fraction=window_fraction,
            margin=margin,
            method=method,
            n_boot=n_boot,
        )
        store = self.store()
        result = fit_sweep(store, self.name, req, write=False)
        saved = False
        if save:
            try:
                save_fits(store, result)
                saved = True
            except db.StoreReadOnlyError:
                pass
        return FitResult(
            sweep=result.sweep,
            metric=result.metric,
            axis=result.axis,
            fits=pd.DataFrame(result.fit_rows, columns=list(FIT_COLUMNS)),
            verdicts=pd.DataFrame(result.verdict_rows, columns=list(VERDICT_COLUMNS)),
            notes=tuple(result.notes),
            saved=saved,
            analysis=result.analysis,
        )

    def forecast(
        self,
        at: Sequence[float] | None = None,
        *,
        level: float = 0.9,
        reach: float | None = None,
        metric: str | None = None,
        axis: str | None = None,
        siblings: bool = True,
        bounds: tuple[float, float] | Literal["auto"] | None = "auto",
    ) -> ForecastResult:
        """``scalerl forecast``: each variant's metric (seeds pooled) at the computes ``at``
        (default: 2x its largest compute) with ``level`` prediction intervals; ``reach`` (a
        fraction of the fitted A, e.g. 0.95) adds the compute at which it gets there. With
        ``siblings`` (the default) a variant borrows strength from the sweep's other variants
        when at least 2 of them have a fitted ceiling (the frame's ``method`` column says
        ``sweep``); ``siblings=False`` forecasts each from its own points (``--no-siblings``).
        Metric and axis default to the sweep's, as in :meth:`fit`. ``bounds`` (``--bounds``):
        ``"auto"`` clips a rate (``val/pass_rate``, an accuracy; scalerl.harness.analysis.forecast.bounds) to
        [0, 1], ``(lo, hi)`` clips to those, None never clips. Reads only; raises
        AnalysisError when the sweep has no point of the metric on the axis."""
        import math

        import pandas as pd

        from scalerl.harness.analysis.forecast.bounds import check_bounds
        from scalerl.harness.analysis.forecast.calibrations import DEFAULT_CALIBRATION
        from scalerl.harness.analysis.forecast.service import forecast_rows, metric_bounds
        from scalerl.harness.analysis.groups import load_groups

        where = None if at is None else [float(c) for c in ([at] if isinstance(at, int | float) else at)]
        if where is not None and (not where or not all(math.isfinite(c) and c > 0 for c in where)):
            raise ConfigError(
                "forecast computes must be finite and > 0",
                field="at",
                value=str(at),
                fix="pass e.g. at=[2e15], or leave it out for 2x each variant's largest compute",
            )
        if reach is not None and not 0.0 < float(reach) < 1.0:
            raise ConfigError(
                "reach must lie strictly between 0 and 1", field="reach", value=reach, fix="pass e.g. 0.95"
            )
        DEFAULT_CALIBRATION.quantile(level)  # a level outside the calibrated range fails here
        if bounds != "auto":
            check_bounds(bounds, field="bounds")  # before the store is read
        m, x = self._metric_axis(metric, axis)
        self._require_metric(m)
        groups = load_groups(self.store("readonly"), self.name, m, x)
        clip = metric_bounds(m, groups, bounds, field="bounds")
        rows = forecast_rows(groups, where, level=level, reach=reach, siblings=siblings, bounds=clip.bounds)
        records = []
        for row in rows:
            head = [row[k] for k in FORECAST_COLUMNS[: FORECAST_COLUMNS.index("compute")]]
            got = row.get("reach")
            tail = [] if got is None else [got[k] for k in ("fraction", "a", "compute", "lo", "hi")]
            for f in row["forecasts"]:
                records.append([*head, f["compute"], f["value"], f["lo"], f["hi"], *tail])
        columns = [*FORECAST_COLUMNS, *(_REACH_COLUMNS if reach is not None else ())]
        frame = pd.DataFrame(records, columns=columns)
        for col in ("last_compute", "compute", "value", "lo", "hi", *_REACH_COLUMNS[1:]):
            if col in frame:
                frame[col] = frame[col].astype("float64")  # None (not finite) -> NaN
        return ForecastResult(self.name, m, x, float(level), frame, tuple(rows), clip.bounds)

    def cancel(self, run_id: str | None = None) -> CancelResult:
        """``scalerl cancel``: stop every unfinished run of the sweep (or only ``run_id``) through
        its executor and mark it cancelled; a search is cancelled through its study. A later
        :meth:`launch` submits cancelled runs again, from their checkpoints."""
        from scalerl.harness.execution.cancel import cancel

        self._spec_in_store()  # an unknown sweep fails here, listing the known ones
        done = cancel(self.store(), self.name, run_id=run_id, db_url=self.db)
        search = done.pop("search", None)
        return CancelResult(self.name, done, search)

    def report_data(
        self, *, metric: str | None = None, axis: str | None = None, max_points: int = 400
    ) -> ReportData:
        """What the HTML report shows (runs, curves, fits, verdicts, diagnostics), read-only: the
        stored fits, else fits computed for the page (``.fits_source`` says which)."""
        from scalerl.db.engine import resolve_url
        from scalerl.harness.report.build import load_report_data

        self._require_metric(self._metric(metric))
        return load_report_data(
            self.store("readonly"),
            self.name,
            metric=self._metric(metric),
            axis=axis,
            store_kind=resolve_url(self.db).get_backend_name(),
            max_points_per_run=max_points,
        )

    def report(
        self,
        path: str | Path = "report.html",
        *,
        metric: str | None = None,
        axis: str | None = None,
        max_points: int = 400,
    ) -> Path:
        """``scalerl report``: write the sweep's self-contained, offline HTML report to ``path``
        (written beside it, then renamed) and return its resolved path. Raises AnalysisError,
        writing nothing, when the sweep has points but no fits can be had (as ``scalerl report``)."""
        from scalerl.harness.errors import AnalysisError
        from scalerl.harness.report.build import missing_fits
        from scalerl.harness.report.document import render_html

        out = Path(path)
        if not out.parent.is_dir():
            raise ConfigError(
                "the output folder does not exist",
                field="path",
                value=str(out),
                fix=f"create {out.parent} first or pick another path",
            )
        data = self.report_data(metric=metric, axis=axis, max_points=max_points)
        missing = missing_fits(data)
        if missing is not None:  # as `scalerl report`: no page of curves on an empty axis
            raise AnalysisError(missing)
        page = render_html(data)
        from scalerl.harness.atomicio import write_atomic

        write_atomic(out, page)  # a reader never opens a half-written report
        return out.resolve()

    def figures(self, *, metric: str | None = None, axis: str | None = None) -> dict[str, go.Figure]:
        """The report's Plotly figures (``scalerl.harness.report.figures``), by name: ``overview``,
        ``curves``, ``knob_map``, ``panels`` (a row per knob) and ``verdicts``."""
        from scalerl.harness.report import figures as f

        data = self.report_data(metric=metric, axis=axis)
        m, x = data.metric, data.axis
        return {
            "overview": f.overview_figure(data.runs, data.curves, metric=m, axis=x),
            "curves": f.curves_figure(data.curves, data.fits, metric=m, axis=x),
            "knob_map": f.knob_map_figure(data.verdicts),
            "panels": f.knob_panels_figure(
                data.curves, data.fits, data.verdicts, data.diagnostics, metric=m, axis=x
            ),
            "verdicts": f.verdict_table_figure(data.verdicts),
        }


def source_link(config: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(where a stored run came from, its id there) from its config's ``source``
    (:attr:`scalerl.harness.importers.base.ImportedCurve.link`); (None, None) for a run the
    harness trained or one imported before links were kept."""
    link = config.get("source")
    if not isinstance(link, Mapping):
        return None, None
    tracker, run_id = link.get("tracker"), link.get("run_id")
    where = {
        "mlflow": lambda: f"mlflow:{link.get('tracking_uri')}#{link.get('experiment')}",
        "wandb": lambda: f"wandb:{link.get('path')}",
        "wandb-offline": lambda: f"wandb-offline:{link.get('run_dir')}",
        "file": lambda: f"file:{link.get('file')}",
        "tensorboard": lambda: f"tensorboard:{link.get('dir')}",
    }.get(str(tracker))
    return (None if where is None else where()), (None if run_id is None else str(run_id))


def _run_params(config: Mapping[str, Any]) -> dict[str, Any]:
    """A run's config as ``params.<dotted key>`` columns (empty sections dropped). An imported run
    (its config names ``imported_from``) shows its source's params and tags, as MLflow's
    ``search_runs`` frame does (``params.lr``, ``tags.<key>``), not the import's bookkeeping."""
    from scalerl.harness.execution.runners.template import flatten

    def leaves(data: Any, prefix: str) -> dict[str, Any]:
        if not isinstance(data, Mapping):
            return {}
        return {f"{prefix}{k}": v for k, v in flatten(data).items() if v != {}}

    if "imported_from" in config:
        return leaves(config.get("params"), "params.") | leaves(config.get("tags"), "tags.")
    return leaves(config, "params.")


def list_sweeps(db: str | None = None, *, store: Store | None = None) -> pd.DataFrame:
    """Every sweep in the store ``db`` (default ``$SCALERL_DB_URL``, else ``sqlite:///./scalerl.db``;
    it must exist), one row each: ``name, source`` (recipe, import, attach or train: where its runs
    came from), ``design, executor, metric, axis`` (the defaults ``scalerl fit`` would use),
    ``n_runs`` and the runs counted by status group (``completed, running, waiting, failed,
    stopped``: :data:`scalerl.db.queries.STATUS_GROUPS`), ``created_at``, ``last_event`` and the
    stored ``spec``. Reads :func:`scalerl.db.queries.sweep_summaries`, as
    ``scalerl ls`` does. ``store``: an open store to read instead of opening ``db`` (left open;
    the live view polls this with its own)."""
    from scalerl import db as store_api
    from scalerl.db import queries
    from scalerl.harness.analysis.groups import fit_defaults

    if store is not None:
        frame = queries.sweep_summaries(store)
    else:
        opened = store_api.open_store(db, readonly=True)
        try:
            frame = queries.sweep_summaries(opened)
        finally:
            opened.close()
    defaults = [fit_defaults(spec) for spec in frame["spec"]]
    metrics, axes = [d[0] for d in defaults], [d[1] for d in defaults]
    frame.insert(1, "source", [queries.sweep_source(spec) for spec in frame["spec"]])
    frame.insert(2, "design", [spec.get("design") for spec in frame["spec"]])
    frame.insert(3, "executor", [spec.get("executor") for spec in frame["spec"]])
    frame.insert(4, "metric", metrics)
    frame.insert(5, "axis", axes)
    order = ["name", "source", "design", "executor", "metric", "axis", "n_runs", *queries.STATUS_GROUPS]
    return frame[[*order, "created_at", "last_event", "spec"]]
