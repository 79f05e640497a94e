"""W&B runs: offline run directories (``wandb-offline:DIR``) and projects (``wandb:ENTITY/PROJECT``).

Offline: each ``offline-run-<time>-<id>/`` directory holds one run's transaction log
``run-<id>.wandb``: LevelDB-log framing (a 7-byte ``:W&B`` header, 32 KiB blocks, records with a
CRC-32 seeded by the record type) around protobuf ``Record`` messages, parsed with wandb's own
``wandb_internal_pb2`` (wandb >= 0.2x ships no Python reader of the file; the framing is read here,
as :mod:`scalerl.harness.importers.tensorboard` does for event files). The run record gives the run's id,
display name and initial config; config records update it; each history record is one logged row
(``_step``, ``_runtime``, ``_timestamp`` and the metrics). A record that fails its checksum is
counted (``crc-failure``; reading resumes at the next block) and a cut-short last record too
(``truncated-tail``). ``DIR`` is a run directory, or any directory holding them (``./wandb``).

Project: ``wandb.Api().runs("ENTITY/PROJECT")``; ``run.config`` gives the params and
``run.scan_history()`` every logged row (not the down-sampled ``run.history()``). Needs network and
credentials (``WANDB_API_KEY`` or ``wandb login``); tested here only against a fake ``Api``.

Both need the ``wandb`` package, imported lazily (``pip install 'scalerl-harness[wandb]'``). A run is
named by its display name, or ``<name>-<id>`` where two runs share one; config values become the
curves' ``params`` (strings as-is, other values as JSON; nested dicts flattened to ``a.b``; keys
starting with ``_`` skipped). W&B tags become the curves' ``tags`` (:func:`run_tags`); the run's state
becomes their ``status`` (:data:`STATUS`): a project run's ``state``, an offline run's exit record
(exit code 0: finished, else failed; no exit record: ``unknown``, a run still going or killed
before it could write one). The x axis is ``_step``, or ``_runtime`` (seconds since the run
started), or ``_timestamp`` (seconds since the run's first logged row), or any metric the runs
log (``perf/gpu_hours``; its running total with ``axis_cumulative``:
:mod:`scalerl.harness.importers.axis`).
"""

from __future__ import annotations

import fnmatch
import json
import math
import struct
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from scalerl.harness.errors import ImportFormatError
from scalerl.harness.importers.axis import on_logged_axis
from scalerl.harness.importers.base import (
    SYSTEM_NAMES,
    ImportedCurve,
    ImportResult,
    LossLog,
    check_step,
    make_curve,
)

OFFLINE_PREFIX = "wandb-offline:"
API_PREFIX = "wandb:"
_AXES = ("step", "_step", "_runtime", "_timestamp")
_INSTALL = "pip install 'scalerl-harness[wandb]'"
_BLOCK = 32768
_HEADER = 7
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4
_TYPE_CRC = [zlib.crc32(bytes([t])) for t in range(_LAST + 1)]


class WandbRun(Protocol):
    """What is read of one ``wandb.apis.public.Run``."""

    id: str
    name: str | None
    config: Mapping[str, Any]

    def scan_history(self) -> Iterable[Mapping[str, Any]]: ...


class WandbApi(Protocol):
    """What is read of ``wandb.Api``: the runs of a project path ``ENTITY/PROJECT``."""

    def runs(self, path: str) -> Iterable[WandbRun]: ...


@dataclass(frozen=True)
class _Run:
    id: str
    name: str
    params: dict[str, str]
    rows: list[Mapping[str, Any]]
    source: str
    status: str = "completed"
    source_status: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    # The part (offline directory) each row came from, for a run resumed offline; empty: one part.
    parts: tuple[int, ...] = ()
    # Where the run lives (ImportedCurve.link).
    link: Mapping[str, str] = field(default_factory=dict)


# W&B run states (``Run.state`` of the public API) in the store's words. ``crashed`` is W&B's word
# for a run whose process stopped reporting (killed, out of memory): a failure.
STATUS = {
    "finished": "completed",
    "failed": "failed",
    "crashed": "failed",
    "killed": "cancelled",
    "running": "running",
    "pending": "pending",
    "preempting": "preempted",
    "preempted": "preempted",
}


def run_status(state: str | None) -> str:
    """The store status of a W&B run state; ``unknown`` for a state this code does not know."""
    return STATUS.get(str(state or "").lower(), "unknown")


def run_tags(labels: Iterable[str]) -> dict[str, str]:
    """W&B tags are labels: ``team=rl`` reads as tag ``team`` with value ``rl``, any other label
    ``L`` as tag ``L`` with value ``"true"`` (``--only tag:baseline``; in a mapping
    ``baseline: {tag:baseline: "true"}``)."""
    out: dict[str, str] = {}
    for label in labels:
        key, sep, value = str(label).partition("=")
        out[key.strip() if sep else str(label)] = value.strip() if sep else "true"
    return out


def _need_wandb(source: str) -> None:
    try:
        import wandb  # noqa: F401
    except ImportError:
        raise ImportFormatError(
            f"{source}: reading W&B runs needs the wandb package (fix: {_INSTALL})"
        ) from None


def _params(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in config.items():
        if str(key).startswith("_"):
            continue
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_params(value, name + "."))
        else:
            out[name] = value if isinstance(value, str) else json.dumps(value)
    return out


# --- offline run directories ------------------------------------------------------------------


def offline_run_dirs(root: str | Path) -> list[Path]:
    """The ``offline-run-*`` directories at or under ``root`` (empty when it holds none)."""
    base = Path(root)
    if base.name.startswith("offline-run-") and any(base.glob("run-*.wandb")):
        return [base]
    return sorted({f.parent for f in base.rglob("offline-run-*/run-*.wandb") if f.is_file()})


def _sound(data: bytes, pos: int) -> bool:
    """Whether a record starts at ``pos`` whose checksum holds (within its block)."""
    if pos + _HEADER > len(data) or _BLOCK - pos % _BLOCK < _HEADER:
        return False
    crc, n, kind = struct.unpack_from("<IHB", data, pos)
    end = pos + _HEADER + n
    if not _FULL <= kind <= _LAST or end > len(data) or (pos % _BLOCK) + _HEADER + n > _BLOCK:
        return False
    return zlib.crc32(data[pos + _HEADER : end], _TYPE_CRC[kind]) == crc


def _records(path: Path, losses: LossLog) -> Iterator[bytes]:
    """The payloads of ``path``'s records, fragments joined. A record whose checksum fails is
    counted once and reading resumes at the next sound record (a fragmented record it cut is
    dropped with it); a cut-short last record is counted as ``truncated-tail``."""
    if not path.is_file():  # a FIFO or device named run-*.wandb would block or never end
        raise ImportFormatError(f"{path}: not a regular file (fix: name the run's own .wandb file)")
    data = path.read_bytes()
    if data[:4] != b":W&B":
        raise ImportFormatError(
            f"{path}: not a W&B transaction log (no ':W&B' header) "
            "(fix: name an offline-run-* directory holding run-<id>.wandb)"
        )
    pos, parts = _HEADER, None
    while pos < len(data):
        room = _BLOCK - pos % _BLOCK
        if room < _HEADER or data[pos : pos + _HEADER] == bytes(_HEADER):  # block padding
            pos += room if room < _HEADER else _HEADER
            continue
        if not _sound(data, pos):
            n = struct.unpack_from("<H", data, pos + 4)[0] if pos + _HEADER <= len(data) else 0
            if pos + _HEADER + n > len(data) and not any(_sound(data, p) for p in range(pos + 1, len(data))):
                losses.add("truncated-tail", f"{path.name} record at byte {pos}")
                return
            losses.add("crc-failure", f"{path.name} record at byte {pos}")
            pos = next((p for p in range(pos + 1, len(data)) if _sound(data, p)), len(data))
            parts = None
            continue
        n, kind = struct.unpack_from("<HB", data, pos + 4)
        chunk = data[pos + _HEADER : pos + _HEADER + n]
        pos += _HEADER + n
        if kind == _FULL:
            yield chunk
        elif kind == _FIRST:
            parts = chunk
        elif parts is not None:  # a MIDDLE or LAST fragment whose FIRST was read
            parts += chunk
            if kind == _LAST:
                yield parts
                parts = None


def _item_key(item: Any) -> str:
    return ".".join(item.nested_key) if len(item.nested_key) else str(item.key)


def _read_offline_run(run_dir: Path, losses: LossLog) -> _Run:
    from wandb.proto import wandb_internal_pb2 as pb

    run_id = run_dir.name.rsplit("-", 1)[-1]
    name = ""
    config: dict[str, Any] = {}
    labels: list[str] = []
    # An offline run states how it ended in its exit record (the exit code wandb.finish got, 1
    # after an uncaught exception); without one the process is still running or died unwarned.
    state: str | None = None
    rows: list[Mapping[str, Any]] = []
    project = entity = ""
    files = sorted(run_dir.glob("run-*.wandb"))
    for f in files:
        for i, data in enumerate(_records(f, losses)):
            rec = pb.Record()  # type: ignore[attr-defined]  # generated code, no stubs
            try:
                rec.ParseFromString(data)
            except Exception:  # protobuf's DecodeError; its class differs between backends
                losses.add("crc-failure", f"{f.name} record {i + 1}: not a W&B record")
                continue
            kind = rec.WhichOneof("record_type")
            if kind == "run":
                run_id = rec.run.run_id or run_id
                name = rec.run.display_name or name
                project, entity = rec.run.project or project, rec.run.entity or entity
                labels = list(rec.run.tags) or labels
                for it in rec.run.config.update:
                    config[_item_key(it)] = json.loads(it.value_json)
            elif kind == "config":
                for it in rec.config.update:
                    config[_item_key(it)] = json.loads(it.value_json)
                for it in rec.config.remove:
                    config.pop(_item_key(it), None)
            elif kind == "exit":
                state = "finished" if rec.exit.exit_code == 0 else f"failed (exit code {rec.exit.exit_code})"
            elif kind == "preempting" and state is None:
                state = "preempting"
            elif kind == "history":
                row = {_item_key(it): json.loads(it.value_json) for it in rec.history.item}
                if rec.history.HasField("step"):
                    row.setdefault("_step", rec.history.step.num)
                rows.append(row)
    if state is None:
        status, state = "unknown", "no exit record"
    else:
        status = run_status(state.split(" ", 1)[0])
    source = str(files[0]) if files else str(run_dir)
    link = {"tracker": "wandb-offline", "run_dir": str(run_dir.resolve()), "run_id": run_id}
    link |= {k: v for k, v in (("project", project), ("entity", entity)) if v}
    return _Run(
        run_id, name or run_id, _params(config), rows, source, status, state, run_tags(labels), link=link
    )


def read_wandb_offline(
    root: str | Path,
    *,
    metric: str | None = None,
    axis_column: str | None = None,
    axis_cumulative: bool = False,
) -> list[ImportResult]:
    """Every curve of every offline run at or under ``root``, one result per run (its ``.wandb``
    file is the source). Raises ImportFormatError when there is no offline run, the axis is
    unknown, or no metric matches. ``axis_column`` may be a metric the runs log (:func:`_logged`)."""
    base = Path(root)
    source = f"{OFFLINE_PREFIX}{base}"
    logged = _logged(axis_column, axis_cumulative)
    axis = _axis(source, None if logged else axis_column)
    dirs = offline_run_dirs(base)
    if not dirs:
        raise ImportFormatError(
            f"{base}: no W&B offline runs (offline-run-*/run-*.wandb) here (fix: name a wandb/ directory)"
        )
    _need_wandb(source)
    # A run resumed offline (wandb.init(id=..., resume=...)) writes one offline-run-<time>-<id>
    # directory per process: its parts, joined here in time order (the names start with it).
    by_id: dict[str, list[Path]] = {}
    for d in dirs:
        by_id.setdefault(d.name.rsplit("-", 1)[-1], []).append(d)
    read: list[tuple[_Run, LossLog]] = []
    for parts in by_id.values():
        losses = LossLog()
        read.append((_join_parts([_read_offline_run(d, losses) for d in parts]), losses))
    named = _names([r for r, _ in read])
    found: set[str] = set()
    results = []
    for (run, losses), name in zip(read, named, strict=True):
        curves = _curves(run.source, name, run, axis, metric, losses, found, logged)
        results.append(ImportResult(run.source, "wandb-offline", curves, losses.freeze()))
    if logged is not None:
        results = on_logged_axis(results, logged, cumulative=axis_cumulative)
    if not any(r.losses for r in results):  # else the losses are the news: the caller reports them
        _check_found(source, results, metric, found)
    return results


def _join_parts(parts: list[_Run]) -> _Run:
    """One run from its offline parts, oldest first: rows in order, each marked with its part, so
    that a step the resumed part logs again is a re-log (the later value kept and reported,
    :func:`make_curve`), not a duplicate; config, tags and state are the last part's."""
    if len(parts) == 1:
        return parts[0]
    # A part that logged no row (`scalerl export` writing the summary back, a resume that died at
    # once) names and ends nothing: the run is as its last part with rows left it.
    trained = [p for p in parts if p.rows] or parts
    last = trained[-1]
    named = [p for p in parts if p.name != p.id] or [last]
    params = {k: v for p in parts for k, v in p.params.items()}
    rows = [row for p in parts for row in p.rows]
    index = tuple(k for k, p in enumerate(parts) for _ in p.rows)
    said = (
        f"{last.source_status} (after {len(trained) - 1} restart(s))"
        if len(trained) > 1
        else last.source_status
    )
    return replace(
        last,
        name=named[-1].name,
        params=params,
        rows=rows,
        source=parts[0].source,
        source_status=said,
        parts=index,
        link={**parts[0].link, **{k: v for p in parts for k, v in p.link.items() if k != "run_dir"}},
    )


# --- projects through the public API ----------------------------------------------------------


def read_wandb_project(
    path: str,
    *,
    metric: str | None = None,
    axis_column: str | None = None,
    axis_cumulative: bool = False,
    api: WandbApi | None = None,
) -> ImportResult:
    """Every curve of every run of project ``ENTITY/PROJECT`` read through ``wandb.Api`` (or the
    ``api`` given: tests pass a fake). Raises ImportFormatError when the project cannot be read,
    has no runs, or no metric matches. ``axis_column`` may be a metric the runs log (:func:`_logged`)."""
    source = f"{API_PREFIX}{path}"
    logged = _logged(axis_column, axis_cumulative)
    axis = _axis(source, None if logged else axis_column)
    if path.count("/") != 1 or not all(path.split("/")):
        raise ImportFormatError(f"{source}: expected ENTITY/PROJECT (fix: e.g. wandb:my-team/grpo-loo)")
    errors: tuple[type[Exception], ...] = (ValueError,)
    try:
        import wandb

        errors = (wandb.errors.Error, ValueError)
    except ImportError:
        if api is None:
            _need_wandb(source)  # raises the install hint
    try:
        api = api if api is not None else wandb.Api()
        runs = [
            _Run(
                r.id,
                r.name or r.id,
                _params(r.config),
                list(r.scan_history()),
                source,
                # A fake or older Api may not give them: then the run counts as finished, untagged.
                run_status(getattr(r, "state", None) or "finished"),
                getattr(r, "state", None),
                run_tags(getattr(r, "tags", None) or ()),
                link={"tracker": "wandb", "path": f"{path}/{r.id}", "run_id": str(r.id)},
            )
            for r in api.runs(path)
        ]
    except errors as err:
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ImportFormatError(
            f"{source}: W&B API: {first} "
            "(fix: check the path, the network, and WANDB_API_KEY or `wandb login`)"
        ) from None
    losses = LossLog()
    if not runs:
        raise ImportFormatError(f"{source}: the project has no runs (fix: check ENTITY/PROJECT)")
    found: set[str] = set()
    curves: list[ImportedCurve] = []
    for run, name in zip(runs, _names(runs), strict=True):
        curves.extend(_curves(source, name, run, axis, metric, losses, found, logged))
    result = ImportResult(source, "wandb", tuple(curves), losses.freeze())
    if logged is not None:
        (result,) = on_logged_axis([result], logged, cumulative=axis_cumulative)
    _check_found(source, [result], metric, found)
    return result


# --- shared: rows -> curves -------------------------------------------------------------------


def _logged(axis_column: str | None, cumulative: bool) -> str | None:
    """The metric the curves are placed on by step (``perf/gpu_hours``; its running total with
    ``cumulative``), or None for one of W&B's own axes (:func:`_axis`)."""
    if axis_column and (cumulative or axis_column not in _AXES):
        return axis_column
    return None


def _axis(source: str, axis_column: str | None) -> str:
    axis = axis_column or "step"
    if axis not in _AXES:
        raise ImportFormatError(f"{source}: axis column {axis!r} is not a W&B axis (fix: use one of {_AXES})")
    return "_step" if axis == "step" else axis


def _names(runs: list[_Run]) -> list[str]:
    # Distinct ids per name: a resumed run's second offline directory is the same run, not a twin.
    ids: dict[str, set[str]] = {}
    for r in runs:
        ids.setdefault(r.name, set()).add(r.id)
    return [f"{r.name}-{r.id}" if len(ids[r.name]) > 1 else r.name for r in runs]


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None  # media, tables, histograms, strings: not a scalar metric
    return float(value)


def _curves(
    source: str,
    name: str,
    run: _Run,
    axis: str,
    metric: str | None,
    losses: LossLog,
    found: set[str],
    axis_metric: str | None = None,
) -> tuple[ImportedCurve, ...]:
    # ``axis_metric`` (a logged axis) is kept whatever the metric filter: curves are placed on it.
    series: dict[str, tuple[list[int], list[float], list[float], list[str], list[int]]] = {}
    t0 = min((r["_timestamp"] for r in run.rows if _number(r.get("_timestamp")) is not None), default=0.0)
    for i, row in enumerate(run.rows):
        place = f"run {name!r} row {i + 1}"
        raw = _number(row.get("_step"))
        step = check_step(raw if raw is not None else math.nan, place, losses, run=name)
        if step is None:
            continue
        if axis == "_step":
            x = float(step)
        else:
            v = _number(row.get(axis))
            x = math.nan if v is None else (v - t0 if axis == "_timestamp" else v)
        for key, value in row.items():
            v = _number(value)
            if v is None or key in SYSTEM_NAMES or key.startswith("_"):
                continue
            found.add(key)
            wanted = key in (metric, axis_metric) or fnmatch.fnmatchcase(key, metric or key)
            if metric is not None and not wanted:
                continue
            s = series.setdefault(key, ([], [], [], [], []))
            s[0].append(step)
            s[1].append(x)
            s[2].append(v)
            s[3].append(place)
            s[4].append(run.parts[i] if run.parts else 0)
    curves = []
    for key in sorted(series):
        steps, xs, values, where, part = series[key]
        curve = make_curve(source, name, key, axis, steps, xs, values, where, losses, segments=part)
        if len(curve):
            # The W&B run id is the run: its display name may gain a twin (and a suffix) later.
            curves.append(
                replace(
                    curve,
                    params=run.params,
                    run_key=f"wandb:{run.id}",
                    link=run.link,
                    status=run.status,
                    source_status=run.source_status,
                    tags=run.tags,
                )
            )
    return tuple(curves)


def _check_found(source: str, results: list[ImportResult], metric: str | None, found: set[str]) -> None:
    if any(r.curves for r in results):
        return
    if metric is not None:
        shown = ", ".join(sorted(found)[:12]) or "none"
        raise ImportFormatError(f"{source}: no metric matches {metric!r} (fix: use one of: {shown})")
    raise ImportFormatError(f"{source}: the runs logged no numeric metrics (fix: pick another source)")
