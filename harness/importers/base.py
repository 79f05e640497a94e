"""The importer interface, its registry and format auto-detection.

An importer reads one file a lab exported from its own logging (W&B, TensorBoard, a parsed
console log) into :class:`ImportedCurve` objects, one per (run, metric). Malformed input raises
:class:`scalerl.harness.errors.ImportFormatError` naming the file, the line/column and the fix. What a
readable file loses (a corrupt record, a bad or repeated step, a repeated column, NaN/inf values)
is never dropped silently: it is counted per reason of :data:`LOSS_POLICY` in the file's
:class:`ImportLosses`, and :func:`read_curves` / ``scalerl import`` refuse it unless allowed.
"""

from __future__ import annotations

import fnmatch
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from scalerl.db.limits import STEP_MAX
from scalerl.harness.boundedio import MiB, check_regular
from scalerl.harness.errors import ImportFormatError

# Column / tag names that are an x axis, never a metric.
STEP_NAMES = (
    "step",
    "_step",
    "global_step",
    "global_steps",
    "train_global_steps",
    "iteration",
    "iter",
    "trainer/global_step",
)
SYSTEM_NAMES = (*STEP_NAMES, "_runtime", "_timestamp", "wall_time", "relative time (process)")


@dataclass(frozen=True)
class ImportedCurve:
    """One (run, metric) curve. ``steps`` are integers (unique, increasing, >= 0); ``x`` is the axis
    the user chose (the step itself by default); ``x_name`` names it as in the source file.
    ``values`` may hold NaN / ±inf (logged as such; counted as ``non-finite-value``). ``params``
    are the run's parameters where the source records them (MLflow params, a TensorBoard run's
    ``params.json`` or hparams), as strings; :mod:`scalerl.harness.importers.mapping` reads them."""

    source: str
    run: str
    metric: str
    x_name: str
    steps: NDArray[np.int64]
    x: NDArray[np.float64]
    values: NDArray[np.float64]
    params: Mapping[str, str] = field(default_factory=dict)
    # The source's own id of the run where it has one (``wandb:<id>``, ``mlflow:<id>``): the
    # store's run id derives from it, not from the display name, so a display name that another
    # run takes later (and the importer then suffixes) still finds the same stored run.
    run_key: str | None = None
    # The file or folder the run name was derived from (a parsed CSV, JSON lines, TensorBoard):
    # two origins giving one name are two runs (``a/run.csv``, ``b/run.csv``), never merged
    # (:func:`check_run_names`). None where the name is the run's own (a W&B panel export's
    # ``<run> - <metric>`` columns: several exported files hold one run).
    origin: str | None = None
    # The run's state in the store's words (``completed``, ``failed``, ``cancelled``, ``running``,
    # ``preempted``, ``unknown``), mapped from the source's own (MLflow ``FAILED``, W&B ``crashed``);
    # ``source_status`` keeps the source's word. Files that record no state say ``completed``.
    # :mod:`scalerl.harness.importers.selection` leaves failed and cancelled runs out by default.
    status: str = "completed"
    source_status: str | None = None
    # The run's tags where the source has them (MLflow tags; W&B tags, labels without a value
    # read as ``"true"``); a mapping or ``--only tag:K=V`` reads them, never the params.
    tags: Mapping[str, str] = field(default_factory=dict)
    # Steps logged again after a restart (a resumed run re-logging what it logged before it
    # stopped): the later value is kept, as the store keeps a later attempt's point; counted here
    # so the import can say so (never a loss: see :func:`make_curve`).
    relogged: tuple[int, ...] = ()
    # Whether ``x`` is the running total of a per-step count the run logs (``--axis-cumulative``:
    # verl's ``perf/total_num_tokens`` counts each step's tokens), not a value logged as such.
    x_cumulative: bool = False
    # Where the run lives in its source, so a stored run links back to it (and `scalerl export`
    # can write back): ``{"tracker": "mlflow", "tracking_uri", "experiment", "run_id"}``,
    # ``{"tracker": "wandb", "path": "ENTITY/PROJECT/ID", "run_id"}``, ``{"tracker":
    # "wandb-offline", "run_dir", "run_id", "project"}``, ``{"tracker": "file", "file"}`` or
    # ``{"tracker": "tensorboard", "dir"}``. No secret: a URI's password is scrubbed.
    link: Mapping[str, str] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.values.size)


# Everything an importer does not turn into a plain finite point, and what it does instead.
# The unit each reason counts is in brackets.
LOSS_POLICY: dict[str, str] = {
    "crc-failure": "dropped: a TensorBoard record whose checksum fails; reading resumes at the next "
    "sound record [records]",
    "truncated-tail": "dropped: an incomplete last record (the file was cut short) [records]",
    "duplicate-column": "dropped: a header column repeated; the first one is kept [columns]",
    "bad-step": "dropped: a row whose step is not a whole number >= 0 (NaN, ±inf, negative, "
    "fractional, too large: past 2**31 - 1, the store's step column) [rows]",
    "bad-axis": "dropped: a point whose x value (the chosen axis) is empty, NaN, ±inf or negative "
    "(compute and time are cumulative), or, on an axis the run logs as a metric, whose step has no "
    "value of it (a run that never logs it loses every point): it cannot be placed on that axis "
    "[points]",
    "duplicate-step": "dropped: a value logged again at the same step with no restart in between; "
    "the last one logged is kept. A step re-logged after a restart (the steps went back, or a "
    "later event file of a TensorBoard run) is no loss: the later value is kept, as the store "
    "keeps a resumed attempt's, and the import reports the count (ImportedCurve.relogged) [points]",
    "bad-value": "dropped: a value that is not a number (text, a bool, a list) in a metric whose "
    "other values are numbers; the metric's other points are kept [points]",
    "non-finite-value": "kept: a NaN or ±inf value, stored as a non-finite point (value NULL, "
    "nonfinite flag) as the trainer's own writer does [points]",
}
LOSS_REASONS = tuple(LOSS_POLICY)
_MAX_ANY = 4096 * MiB  # before the format is known: the largest any importer takes
_MAX_EXAMPLES = 3


@dataclass(frozen=True)
class ImportLosses:
    """What one file lost (or kept only with a warning), per reason of :data:`LOSS_POLICY`:
    ``counts`` maps reason -> count, ``examples`` reason -> the first few places (``line 12``,
    ``record 40 (byte 1234)``). Falsy when nothing was lost."""

    counts: Mapping[str, int] = field(default_factory=dict)
    examples: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # Every loss as (reason, where, run, n), ``run`` the run it belongs to where the importer
    # knows it: a run left out of the import (failed, filtered, unmapped) takes its losses with
    # it (:func:`losses_kept`), so a failed run that diverged to NaN does not fail the import.
    entries: tuple[tuple[str, str, str | None, int], ...] = ()

    def __bool__(self) -> bool:
        return any(self.counts.values())

    def describe(self) -> str:
        """``duplicate-step 3 (line 5, line 9, line 12, ...); crc-failure 1 (record 40)``."""
        parts = []
        for reason in LOSS_REASONS:
            n = self.counts.get(reason, 0)
            if n:
                ex = self.examples.get(reason, ())
                more = ", ..." if n > len(ex) else ""
                parts.append(f"{reason} {n} ({', '.join(ex)}{more})" if ex else f"{reason} {n}")
        return "; ".join(parts)


class LossLog:
    """The mutable collector an importer fills while reading; :meth:`freeze` gives the record.
    Each entry may name its metric so that a ``--metric`` filter drops the losses it filters out."""

    def __init__(self) -> None:
        self._entries: list[tuple[str, str, str | None, str | None, int]] = []

    def add(
        self, reason: str, where: str, *, metric: str | None = None, run: str | None = None, n: int = 1
    ) -> None:
        assert reason in LOSS_POLICY, reason
        self._entries.append((reason, where, metric, run, n))

    def freeze(self, keep: Callable[[str], bool] | None = None) -> ImportLosses:
        return summarise_losses(
            (reason, where, run, n)
            for reason, where, metric, run, n in self._entries
            if keep is None or metric is None or keep(metric)
        )


def summarise_losses(entries: Iterable[tuple[str, str, str | None, int]]) -> ImportLosses:
    """The record of ``entries`` (reason, where, run, n): counts per reason, the first places."""
    kept = tuple(entries)
    counts: dict[str, int] = {}
    examples: dict[str, list[str]] = {}
    for reason, where, _run, n in kept:
        counts[reason] = counts.get(reason, 0) + n
        ex = examples.setdefault(reason, [])
        if len(ex) < _MAX_EXAMPLES and where not in ex:
            ex.append(where)
    return ImportLosses(counts, {r: tuple(e) for r, e in examples.items()}, kept)


def losses_kept(result: ImportResult, dropped: Collection[str]) -> ImportLosses:
    """``result``'s losses without those of the runs in ``dropped`` (left out or unmapped: their
    points are not imported, so what they lost does not count). A loss the importer did not tie
    to a run belongs to the result's one run when it holds one (a W&B run's log, a TensorBoard
    run's directory), else it always counts."""
    if not dropped or not result.losses.entries:
        return result.losses
    names = {c.run for c in result.curves}
    sole = next(iter(names)) if len(names) == 1 else None
    return summarise_losses(e for e in result.losses.entries if (e[2] or sole) not in dropped)


@dataclass(frozen=True)
class ImportResult:
    """What one importer read from one file: its curves and what it lost doing so."""

    source: str
    format: str
    curves: tuple[ImportedCurve, ...]
    losses: ImportLosses

    @property
    def points(self) -> int:
        return sum(len(c) for c in self.curves)


def check_step(value: float, where: str, losses: LossLog, *, run: str | None = None) -> int | None:
    """The boundary check of every step: a whole number in [0, STEP_MAX] (the store's step column,
    :mod:`scalerl.db.limits`). Anything else (NaN, ±inf, negative, fractional, too large) drops its
    row as ``bad-step`` and returns None."""
    if math.isnan(value):
        why = "is not a number"
    elif math.isinf(value):
        why = "is infinite"
    elif value < 0:
        why = "is negative"
    elif value != math.floor(value):
        why = "is not a whole number"
    elif value > STEP_MAX:  # an exact comparison: 2**31 - 1 is a float without rounding
        why = "is too large"
    else:
        return int(value)
    losses.add("bad-step", f"{where}: step {value!r} {why}", run=run)
    return None


def make_curve(
    source: str | Path,
    run: str,
    metric: str,
    x_name: str,
    steps: Sequence[int],
    x: Sequence[float],
    values: Sequence[float],
    where: Sequence[str],
    losses: LossLog,
    *,
    segments: Sequence[int] | None = None,
) -> ImportedCurve:
    """Build a curve sorted by step from points whose steps passed :func:`check_step`, given in
    the order they were logged. A repeated step keeps the last value logged there. The earlier
    values are a resume's re-logs when a restart lies between them and the later one: the steps
    went back (``... 29, 30, 21, 22 ...``: the trainer restarted from an older checkpoint) or
    ``segments`` (the file each point came from, in order) changed; those steps are listed in the
    curve's ``relogged``. Any other repeat counts as ``duplicate-step``. NaN / ±inf values are kept
    (``non-finite-value`` counts them); a point with no finite x >= 0 is dropped (``bad-axis``).
    ``where`` locates each point."""
    st = np.asarray(steps, dtype=np.int64)
    xv = np.asarray(x, dtype=np.float64)
    vv = np.asarray(values, dtype=np.float64)
    # The restart count before each point, in logged order: a value logged in a later epoch than
    # an earlier one at its step is that step re-logged after a restart.
    epoch = np.zeros(st.size, dtype=np.int64)
    if st.size > 1:
        restart = st[1:] < st[:-1]
        if segments is not None:
            seg = np.asarray(segments, dtype=np.int64)
            restart |= seg[1:] != seg[:-1]
        epoch[1:] = np.cumsum(restart)
    order = np.argsort(st, kind="stable")
    st, xv, vv, epoch = st[order], xv[order], vv[order], epoch[order]
    placed = np.isfinite(xv) & (xv >= 0)  # a cumulative compute or time axis is never negative
    for i in np.flatnonzero(~placed).tolist():
        losses.add("bad-axis", f"{where[order[i]]}: {x_name} {float(xv[i])!r}", metric=metric, run=run)
    order, st, xv, vv, epoch = order[placed], st[placed], xv[placed], vv[placed], epoch[placed]
    last = np.ones(st.size, dtype=bool)
    relog = np.zeros(st.size, dtype=bool)
    if st.size > 1:
        last[:-1] = st[1:] != st[:-1]
        # The stable sort keeps logged order within a step: the next point is the next logging.
        relog[:-1] = ~last[:-1] & (epoch[1:] > epoch[:-1])
    for i in np.flatnonzero(~last & ~relog).tolist():
        losses.add("duplicate-step", f"{where[order[i]]}: step {int(st[i])}", metric=metric, run=run)
    relogged = tuple(sorted({int(s) for s in st[relog].tolist()}))
    st, xv, vv = st[last], xv[last], vv[last]
    for i in np.flatnonzero(~np.isfinite(vv)).tolist():
        kept = int(order[np.flatnonzero(last)[i]])
        losses.add("non-finite-value", f"{where[kept]}: {metric} {float(vv[i])!r}", metric=metric, run=run)
    return ImportedCurve(str(source), run, metric, x_name, st, xv, vv, relogged=relogged)


def parse_float(text: str, path: Path, line: int, column: str) -> float | None:
    """A numeric cell; empty means "not logged here" (None); ``nan`` / ``inf`` are values; anything
    else non-numeric is an error."""
    text = text.strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        raise ImportFormatError(
            f"{path}:{line}: column {column!r}: {text!r} is not a number "
            "(fix: export numeric values only, or drop that column before importing)"
        ) from None


def first_columns(header: Sequence[str], path: Path, losses: LossLog) -> dict[int, str]:
    """The header's columns by position, keeping the first of a repeated name and counting the
    others as ``duplicate-column`` (named with both 1-based positions)."""
    seen: dict[str, int] = {}
    kept: dict[int, str] = {}
    for j, name in enumerate(header):
        if name in seen:
            losses.add("duplicate-column", f"column {name!r} at {seen[name] + 1} and {j + 1}")
            continue
        seen[name] = j
        kept[j] = name
    return kept


def is_step_name(name: str) -> bool:
    return name.strip().lower() in STEP_NAMES


class CurveImporter(ABC):
    """One file format. Contract: :meth:`sniff` is cheap and never raises; :meth:`read` returns
    every curve in the file or raises ImportFormatError when the file cannot be read at all. What
    it skips or keeps only with a warning (:data:`LOSS_POLICY`) it records in ``losses``, never
    silently: every step goes through :func:`check_step`, every curve through :func:`make_curve`,
    every CSV header through :func:`first_columns`."""

    name: ClassVar[str]
    # Detection tries more specific formats first (lower first).
    priority: ClassVar[int] = 100
    # Whether the run name comes from the file's name (so two files may give one name by chance):
    # read_file then records the file as each curve's ``origin``.
    names_from_path: ClassVar[bool] = True
    # The largest file read_file hands to ``read`` (which may hold it whole in memory): far above
    # any run's metrics, far below what fills a machine.
    max_bytes: ClassVar[int] = 512 * MiB
    # The axis columns :meth:`read` places points on itself (None: any column of the file). Any
    # other, and any running total, is a metric the run logs: read_file reads on the step and
    # joins the curves to it (:func:`scalerl.harness.importers.axis.on_logged_axis`).
    native_axes: ClassVar[tuple[str, ...] | None] = None

    @abstractmethod
    def sniff(self, path: Path, head: bytes) -> bool: ...

    @abstractmethod
    def read(self, path: Path, *, axis_column: str | None, losses: LossLog) -> list[ImportedCurve]: ...


IMPORTERS: dict[str, type[CurveImporter]] = {}


def register(cls: type[CurveImporter]) -> type[CurveImporter]:
    IMPORTERS[cls.name] = cls
    return cls


def _registry() -> dict[str, type[CurveImporter]]:
    # The format modules register themselves when imported; importing them here (not at package
    # import) keeps ``import scalerl.harness.importers`` free of side effects beyond definitions.
    from scalerl.harness.importers import jsonl, parsed_csv, tensorboard, wandb_csv  # noqa: F401

    return IMPORTERS


def detect(path: Path) -> CurveImporter:
    """The first registered importer whose sniff accepts the file."""
    if not path.is_file():
        raise ImportFormatError(f"{path}: no such file (fix: check the path)")
    with path.open("rb") as fh:
        head = fh.read(4096)
    for cls in sorted(_registry().values(), key=lambda c: c.priority):
        importer = cls()
        if importer.sniff(path, head):
            return importer
    raise ImportFormatError(
        f"{path}: unrecognised curve file (fix: pass --format, one of {sorted(_registry())}; "
        "W&B panel CSV exports, TensorBoard event files, CSVs with a step column and verl JSON lines "
        "are supported)"
    )


def get_importer(name: str) -> CurveImporter:
    reg = _registry()
    if name not in reg:
        raise ImportFormatError(f"unknown import format {name!r} (fix: use one of {sorted(reg)})")
    return reg[name]()


def read_file(
    path: str | Path,
    *,
    fmt: str | None = None,
    metric: str | None = None,
    axis_column: str | None = None,
    axis_cumulative: bool = False,
) -> ImportResult:
    """Read every curve of one file (format auto-detected unless ``fmt``), optionally keeping only
    metrics equal to / matching the glob ``metric``, with what was lost reading it (losses of
    metrics the filter drops are not counted). Empty curves are left out. ``axis_column`` the
    format does not take itself (``CurveImporter.native_axes``), or its running total
    (``axis_cumulative``), is a metric of the file the curves are placed on by step
    (:func:`scalerl.harness.importers.axis.on_logged_axis`)."""
    p = Path(path)

    def error(reason: str, fix: str) -> ImportFormatError:
        return ImportFormatError(f"{p}: {reason} (fix: {fix})")

    # A device or FIFO (``/dev/zero``) would be read forever; a huge file would fill memory.
    check_regular(
        p, _MAX_ANY, "curve file", error, fix="split the file, or check that this is the file you meant"
    )
    log = LossLog()
    try:
        importer = get_importer(fmt) if fmt else detect(p)
        check_regular(
            p, importer.max_bytes, f"{importer.name} file", error, fix="split the file by run or by metric"
        )
        native = importer.native_axes
        foreign = native is not None and axis_column not in native
        logged = axis_column if axis_cumulative or foreign else None
        curves = importer.read(p, axis_column=None if logged else axis_column, losses=log)
    except RecursionError:
        # json / yaml parsers recurse once per nesting level: ``[[[[...]]]]`` in any format.
        raise error(
            "nested too deeply to read (a value inside thousands of brackets)", "repair or re-export it"
        ) from None
    keep: Callable[[str], bool] | None = None
    if metric is not None:
        pattern = metric

        def keep(name: str) -> bool:
            # A logged axis stays whatever the filter: the curves are placed on it below.
            return name in (pattern, logged) or fnmatch.fnmatchcase(name, pattern)

        kept = [c for c in curves if keep(c.metric)]
        if not any(c.metric != logged for c in kept):
            found = sorted({c.metric for c in curves})
            shown = ", ".join(found[:12]) + (" ..." if len(found) > 12 else "")
            raise ImportFormatError(f"{p}: no metric matches {metric!r} (fix: use one of: {shown})")
        curves = kept
    if not any(len(c) for c in curves) and not log.freeze(keep):
        raise ImportFormatError(
            f"{p}: no points: the file holds no logged values (a header only?) "
            "(fix: export the file again once the run has logged, or leave it out)"
        )
    origin = str(p.resolve()) if importer.names_from_path else None
    # A file named after its run may have the run's params beside it (``params.json``, as a
    # TensorBoard run directory does): a mapping then reads them like MLflow's or W&B's.
    params = params_beside(p) if importer.names_from_path else {}
    link = {"tracker": "file", "file": str(p.resolve())}
    result = ImportResult(
        str(p),
        importer.name,
        tuple(replace(c, origin=origin, link=link, params={**params, **c.params}) for c in curves if len(c)),
        log.freeze(keep),
    )
    if logged is None:
        return result
    from scalerl.harness.importers.axis import on_logged_axis

    return on_logged_axis([result], logged, cumulative=axis_cumulative)[0]


def params_beside(path: Path) -> dict[str, str]:
    """The flat JSON object in ``params.json`` beside ``path`` (its folder), values as strings
    (non-strings as JSON); empty when there is none."""
    import json

    found = path.parent / "params.json"
    if not found.is_file():
        return {}
    try:
        data = json.loads(found.read_text())
    except (OSError, ValueError) as err:
        raise ImportFormatError(
            f"{found}: cannot read params: {err} (fix: write a flat JSON object)"
        ) from None
    if not isinstance(data, dict):
        raise ImportFormatError(f'{found}: params must be a JSON object (fix: write {{"name": value, ...}})')
    return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in data.items()}


def read_curves(
    path: str | Path,
    *,
    fmt: str | None = None,
    metric: str | None = None,
    axis_column: str | None = None,
    axis_cumulative: bool = False,
    allow_partial: bool = False,
) -> list[ImportedCurve]:
    """The curves of :func:`read_file`. Raises ImportFormatError naming every loss (reason, count,
    where) when the file lost anything, unless ``allow_partial`` (then what is sound is returned)."""
    result = read_file(path, fmt=fmt, metric=metric, axis_column=axis_column, axis_cumulative=axis_cumulative)
    if result.losses and not allow_partial:
        raise ImportFormatError(partial_message([result]))
    return [c for c in result.curves if len(c)]


def check_run_names(curves: Sequence[ImportedCurve]) -> None:
    """Refuse curves of different runs that share a run name (two ``run.csv`` files in different
    folders, two TensorBoard directories called ``r``, two W&B runs of one display name read from
    different places): stored under one name they would merge, the second overwriting the first."""
    seen: dict[str, dict[str | None, str]] = {}
    for c in curves:
        ident = c.run_key or c.origin
        seen.setdefault(c.run, {}).setdefault(ident, c.source)
    clashes = {run: ids for run, ids in seen.items() if len(ids) > 1}
    if not clashes:
        return
    parts = []
    for run, ids in sorted(clashes.items())[:5]:
        shown = ", ".join(sorted(f"{i} ({src})" if i and i != src else src for i, src in ids.items()))
        parts.append(f"run name {run!r} comes from {len(ids)} different runs: {shown}")
    more = f"; and {len(clashes) - 5} more" if len(clashes) > 5 else ""
    raise ImportFormatError(
        f"{'; '.join(parts)}{more}; importing them together would merge them into one run "
        "(fix: rename the files or folders so each run has its own name, or import them into "
        "separate sweeps)"
    )


def partial_message(results: Sequence[ImportResult]) -> str:
    """The error for files that lost data: each file, each reason with its count and places."""
    lost = "; ".join(f"{r.source}: {r.losses.describe()}" for r in results if r.losses)
    return (
        f"{lost} (fix: repair or re-export the file, or pass --allow-partial to import what is "
        "sound; reasons: scalerl.harness.importers.base.LOSS_POLICY)"
    )
