"""TensorBoard event files (``*.tfevents*``): every scalar tag becomes a curve.

Records are framed and checksummed here (:func:`_records`) and parsed with the ``tensorboard``
package's ``Event`` proto and CRC-32C, imported lazily (install the ``tensorboard`` or ``dev``
extra: ``pip install 'scalerl-harness[tensorboard]'``). TensorBoard's own loader stops at the first
bad record and says so only at DEBUG; here a record that fails its checksum is skipped and counted
(``crc-failure``, reading resumes at the next sound record) and a cut-short last record is counted
(``truncated-tail``). Scalars come as
``simple_value`` (TF1-style) or as a 0-d ``tensor`` (TF2 / PyTorch writers); both are read. The run
is named after the file (the part before ``.tfevents``); :func:`read_logdir` reads a log directory
instead, one run per directory holding event files (standard ``events.out.tfevents.<time>.<host>``
names all start alike, so a directory, not a file name, is what tells runs apart). The x axis is
the event step, or with ``axis_column="wall_time"`` the seconds since the run's first event, or
any scalar tag the run logs (``perf/total_num_tokens``, its running total with ``axis_cumulative``:
:mod:`scalerl.harness.importers.axis`).
"""

from __future__ import annotations

import struct
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from scalerl.harness.boundedio import MiB
from scalerl.harness.errors import ImportFormatError
from scalerl.harness.importers.base import (
    CurveImporter,
    ImportedCurve,
    ImportResult,
    LossLog,
    check_step,
    make_curve,
    register,
)

_AXES = ("step", "wall_time")


def _scalar(value: Any) -> float | None:
    kind = value.WhichOneof("value")
    if kind == "simple_value":
        return float(value.simple_value)
    if kind == "tensor":
        t = value.tensor
        if t.tensor_shape.dim:
            return None  # not a scalar (histogram, image, text)
        for field in (t.float_val, t.double_val, t.int_val, t.int64_val):
            if len(field):
                return float(field[0])
    return None


@register
class TensorBoardImporter(CurveImporter):
    name = "tensorboard"
    priority = 20
    # Event files carry images and histograms beside the scalars; they are read whole.
    max_bytes = 4096 * MiB
    native_axes = _AXES  # any other axis is a scalar tag, joined by step (read_file)

    def sniff(self, path: Path, head: bytes) -> bool:
        return "tfevents" in path.name

    def read(self, path: Path, *, axis_column: str | None, losses: LossLog) -> list[ImportedCurve]:
        axis = axis_column or "step"
        if axis not in _AXES:
            raise ImportFormatError(
                f"{path}: axis column {axis!r} does not exist in event files (fix: use one of {_AXES})"
            )
        points, _ = _read_events(path, losses)
        if not points:
            raise ImportFormatError(
                f"{path}: no scalar summaries (fix: log scalars with SummaryWriter.add_scalar, or "
                "pick the events file that holds them)"
            )
        run = path.name.split(".tfevents")[0] or path.stem
        return _curves(path, run, points, axis, losses)


Points = dict[str, list[tuple[int, float, float, str]]]


def _proto(path: Path) -> tuple[Any, Callable[[bytes], int]]:
    try:
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c
    except ImportError:
        raise ImportFormatError(
            f"{path}: reading TensorBoard files needs the tensorboard package "
            "(fix: pip install 'scalerl-harness[tensorboard]')"
        ) from None
    return Event, masked_crc32c


def _hparams(value: Any) -> dict[str, str]:
    """The hparams a ``SessionStartInfo`` summary (``add_hparams`` / ``hparams.api``) records."""
    from tensorboard.plugins.hparams import plugin_data_pb2

    try:
        data = plugin_data_pb2.HParamsPluginData.FromString(value.metadata.plugin_data.content)
    except Exception:  # protobuf's DecodeError: not an hparams record after all
        return {}
    out: dict[str, str] = {}
    for name, v in data.session_start_info.hparams.items():
        kind = v.WhichOneof("kind")
        if kind == "number_value":
            num = float(v.number_value)
            out[name] = str(int(num)) if num.is_integer() else repr(num)
        elif kind == "bool_value":
            out[name] = str(bool(v.bool_value)).lower()
        elif kind == "string_value":
            out[name] = v.string_value
    return out


def _read_events(path: Path, losses: LossLog) -> tuple[Points, dict[str, str]]:
    """Tag -> [(step, absolute wall time, value, place)] of one events file, and its hparams."""
    event_cls, masked_crc32c = _proto(path)
    try:
        data = path.read_bytes()
    except OSError as err:
        raise ImportFormatError(f"{path}: cannot read: {err}") from None
    points: Points = defaultdict(list)
    hparams: dict[str, str] = {}
    _parse(path, _records(data, masked_crc32c, losses), event_cls, losses, points, hparams)
    return points, hparams


def _parse(
    path: Path,
    records: Iterator[tuple[int, bytes]],
    event_cls: Any,
    losses: LossLog,
    points: Points,
    hparams: dict[str, str],
) -> None:
    """Add the scalars of ``records`` (of the file ``path``) to ``points`` and its hparams to
    ``hparams``."""
    for index, record in records:
        try:
            event = event_cls.FromString(record)
        except Exception as err:  # protobuf's DecodeError: a sound checksum over a bad event
            raise ImportFormatError(
                f"{path}: record {index} is not a TensorBoard event: {err} "
                "(fix: pass an events file written by TensorBoard / tensorboardX / PyTorch)"
            ) from None
        step: int | None = None
        for value in event.summary.value:
            if value.metadata.plugin_data.plugin_name == "hparams":
                hparams.update(_hparams(value))
                continue
            v = _scalar(value)
            if v is None:
                continue
            if step is None:
                step = check_step(float(event.step), f"{path.name} record {index}", losses)
                if step is None:
                    break
            points[value.tag].append((step, float(event.wall_time), v, f"{path.name} record {index}"))


class LogdirTail:
    """Read one run's TensorBoard directory incrementally while its trainer is writing it.

    The event files directly in ``run_dir`` are read in file-name order (the standard names start
    with the creation time, so a resumed run's new file comes last), each from where the previous
    :meth:`poll` stopped: the end of its last whole record. A record still being written is left
    for a later poll, never read half and never counted as lost; the last poll (``final=True``,
    once the writer has exited) counts what is still incomplete as ``truncated-tail``. Records
    are framed, checksummed and parsed exactly as :func:`read_logdir` does, so the points polled
    over a run are the points importing the finished directory gives, in the same order (for a
    step logged twice the later one is last). Losses accumulate in :attr:`losses`. Not thread-safe:
    one caller polls."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.losses = LossLog()
        self._cursors: dict[Path, _Cursor] = {}

    def poll(self, *, final: bool = False) -> Points:
        """Tag -> [(step, absolute wall time, value, place)] of the records completed since the
        last poll; empty while the directory does not exist yet."""
        points: Points = defaultdict(list)
        files = sorted(f for f in self.run_dir.glob("*tfevents*") if f.is_file())
        if not files:
            return {}
        event_cls, masked_crc32c = _proto(self.run_dir)
        hparams: dict[str, str] = {}
        for f in files:
            cur = self._cursors.setdefault(f, _Cursor())
            try:
                with f.open("rb") as fh:
                    fh.seek(cur.base)
                    data = fh.read()
            except OSError as err:
                raise ImportFormatError(f"{f}: cannot read: {err}") from None
            cur.pos = 0
            records = _records(data, masked_crc32c, self.losses, cur, final=final)
            _parse(f, records, event_cls, self.losses, points, hparams)
            cur.base += len(data) if final else cur.pos  # after the final poll nothing is recounted
            cur.pos = 0
        return dict(points)


@dataclass
class _Cursor:
    """Where framing resumes in a file that is still growing: ``pos`` (bytes consumed, up to the
    end of the last whole record) and ``index`` (records numbered so far)."""

    pos: int = 0
    index: int = 0
    base: int = 0  # where ``data`` starts in the file, for the byte offsets losses name


def _records(
    data: bytes,
    masked_crc32c: Callable[[bytes], int],
    losses: LossLog,
    cursor: _Cursor | None = None,
    *,
    final: bool = True,
) -> Iterator[tuple[int, bytes]]:
    """The TFRecord framing: ``uint64 length, uint32 masked CRC-32C of the length, data, uint32
    masked CRC-32C of the data``, little-endian. Yields (1-based record number, data) for every
    sound record. A record whose data checksum fails is skipped (its length is sound); one whose
    header checksum fails is skipped by scanning forward to the next sound record. Both count as
    ``crc-failure``; an incomplete last record counts as ``truncated-tail``.

    ``cursor`` (read and advanced in place) starts the framing at ``cursor.pos`` of ``data``;
    with ``final=False`` (a file still being written) an incomplete last record, or bad bytes with
    no whole record after them yet, is left unread and uncounted: ``cursor.pos`` stops before it
    so the next read starts there."""
    cur = cursor if cursor is not None else _Cursor()
    pos, index, size = cur.pos, cur.index, len(data)
    while pos < size:
        index += 1
        at = cur.base + pos
        if size - pos < 12:
            if final:
                losses.add("truncated-tail", f"record {index} (byte {at}): {size - pos} byte(s) of header")
            return
        (length,) = struct.unpack_from("<Q", data, pos)
        (header_crc,) = struct.unpack_from("<I", data, pos + 8)
        if masked_crc32c(data[pos : pos + 8]) != header_crc:
            nxt = _resync(data, pos + 1, masked_crc32c)
            if nxt is None and not final:
                return
            losses.add("crc-failure", f"record {index} (byte {at}): header checksum")
            if nxt is None:
                cur.pos, cur.index = size, index
                return
            pos = cur.pos = nxt
            cur.index = index
            continue
        end = pos + 12 + length + 4
        if end > size:
            if final:
                losses.add(
                    "truncated-tail", f"record {index} (byte {at}): {size - pos} of {end - pos} byte(s)"
                )
            return
        body = data[pos + 12 : pos + 12 + length]
        (data_crc,) = struct.unpack_from("<I", data, end - 4)
        pos = cur.pos = end
        cur.index = index
        if masked_crc32c(body) != data_crc:
            losses.add("crc-failure", f"record {index} (byte {at}): data checksum")
        else:
            yield index, body


def _resync(data: bytes, start: int, masked_crc32c: Callable[[bytes], int]) -> int | None:
    """The first offset from ``start`` where a whole record with sound checksums begins."""
    size = len(data)
    for pos in range(start, size - 11):
        (header_crc,) = struct.unpack_from("<I", data, pos + 8)
        if masked_crc32c(data[pos : pos + 8]) != header_crc:
            continue
        (length,) = struct.unpack_from("<Q", data, pos)
        end = pos + 12 + length + 4
        if (
            end <= size
            and masked_crc32c(data[pos + 12 : end - 4]) == struct.unpack_from("<I", data, end - 4)[0]
        ):
            return pos
    return None


def read_logdir(
    root: str | Path,
    *,
    metric: str | None = None,
    axis_column: str | None = None,
    axis_cumulative: bool = False,
) -> list[ImportResult]:
    """A TensorBoard log directory: one run per directory holding event files, named by its path
    relative to ``root`` (``root``'s own name for files directly in it). Several event files in one
    directory (a resumed run) are one run, read in file-name order (the names start with the
    creation time); a step logged in two files keeps the later file's value and is listed in the
    curve's ``relogged`` (the resume rule: never a loss).
    Two directories never merge. Run params come from a ``params.json`` (a flat JSON object) in the
    run directory, else from the hparams the event files record. One result per run. An
    ``axis_column`` other than ``step`` / ``wall_time`` (or its running total, ``axis_cumulative``)
    is a scalar tag the runs log (``perf/total_num_tokens``): the curves are placed on it by step
    (:func:`scalerl.harness.importers.axis.on_logged_axis`)."""
    import fnmatch

    from scalerl.harness.importers.axis import on_logged_axis

    axis = axis_column or "step"
    logged = axis_column if axis_column and (axis_cumulative or axis not in _AXES) else None

    def keep(name: str) -> bool:
        # A logged axis stays whatever the filter: the curves are placed on it below.
        return metric is None or name in (metric, logged) or fnmatch.fnmatchcase(name, metric)

    base = Path(root)
    if logged is not None:
        axis = "step"
    by_dir: dict[Path, list[Path]] = defaultdict(list)
    for f in sorted(base.rglob("*tfevents*")):
        if f.is_file():
            by_dir[f.parent].append(f)
    if not by_dir:
        raise ImportFormatError(
            f"{base}: no TensorBoard event files (*tfevents*) under this directory (fix: check the path)"
        )
    results: list[ImportResult] = []
    tags: set[str] = set()
    for run_dir, files in sorted(by_dir.items()):
        run = base.name if run_dir == base else run_dir.relative_to(base).as_posix()
        losses = LossLog()
        points: Points = defaultdict(list)
        # Which file each point came from: a step a later file logs again is the resumed run
        # re-logging it (make_curve keeps the later value and reports it, never a loss).
        segments: dict[str, list[int]] = defaultdict(list)
        hparams: dict[str, str] = {}
        for k, f in enumerate(files):
            pts, hp = _read_events(f, losses)
            hparams.update(hp)
            for tag, p in pts.items():
                points[tag].extend(p)
                segments[tag].extend([k] * len(p))
        params = _params_json(run_dir) if (run_dir / "params.json").is_file() else hparams
        tags.update(points)
        if not points:
            raise ImportFormatError(
                f"{run_dir}: {len(files)} event file(s) but no scalar summaries (fix: log scalars with "
                "SummaryWriter.add_scalar, or move the directory out of the log directory)"
            )
        origin = min(p[1] for pts in points.values() for p in pts)  # over every tag, kept or not
        kept = dict(sorted((t, v) for t, v in points.items() if keep(t)))
        curves = _curves(run_dir, run, kept, axis, losses, origin, segments)
        where = str(run_dir.resolve())  # two directories of one name are two runs
        link = {"tracker": "tensorboard", "dir": where}
        curves = [replace(c, params=params, origin=where, link=link) for c in curves if len(c)]
        results.append(ImportResult(str(run_dir), "tensorboard", tuple(curves), losses.freeze(keep)))
    if logged is not None:
        results = on_logged_axis(results, logged, cumulative=axis_cumulative)
    if metric is not None and not any(r.curves for r in results):
        shown = ", ".join(sorted(tags)[:12]) + (" ..." if len(tags) > 12 else "")
        raise ImportFormatError(f"{base}: no metric matches {metric!r} (fix: use one of: {shown})")
    return results


def _params_json(run_dir: Path) -> dict[str, str]:
    import json

    path = run_dir / "params.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ImportFormatError(
            f"{path}: cannot read params: {err} (fix: write a flat JSON object)"
        ) from None
    if not isinstance(data, dict):
        raise ImportFormatError(f'{path}: params must be a JSON object (fix: write {{"name": value, ...}})')
    return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in data.items()}


def _curves(
    source: Any,
    run: str,
    points: dict[str, list[Any]],
    axis: str,
    losses: Any,
    origin: float | None = None,
    segments: dict[str, list[int]] | None = None,
) -> list[Any]:
    """One curve per tag from ``tag -> [(step, wall, value, where)]``; wall time is measured from
    ``origin`` (default: the run's first point over every tag), so a run's curves share it.
    ``segments``: tag -> the event file of each point (a resumed run's files, in order)."""
    if not points:
        return []
    first_wall = origin if origin is not None else min(p[1] for pts in points.values() for p in pts)
    return [
        make_curve(
            source,
            run,
            tag,
            axis,
            [p[0] for p in pts],
            [float(p[0]) if axis == "step" else p[1] - first_wall for p in pts],
            [p[2] for p in pts],
            [p[3] for p in pts],
            losses,
            segments=None if segments is None else segments[tag],
        )
        for tag, pts in points.items()
    ]
