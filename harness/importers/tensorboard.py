"""TensorBoard event files (``*.tfevents*``): every scalar tag becomes a curve.

Records are framed and checksummed here (:func:`_records`) and parsed with the ``tensorboard``
package's ``Event`` proto and CRC-32C, imported lazily (install the ``tensorboard`` or ``dev``
extra: ``pip install 'scalerl-harness[tensorboard]'``). TensorBoard's own loader stops at the first
bad record and says so only at DEBUG; here a record that fails its checksum is skipped and counted
(``crc-failure``, reading resumes at the next sound record) and a cut-short last record is counted
(``truncated-tail``). Scalars come as
``simple_value`` (TF1-style) or as a 0-d ``tensor`` (TF2 / PyTorch writers); both are read. The run
is named after the file (the part before ``.tfevents``). The x axis is the event step, or with
``axis_column="wall_time"`` the seconds since the file's first event.
"""

from __future__ import annotations

import struct
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from harness.errors import ImportFormatError
from harness.importers.base import (
    CurveImporter,
    ImportedCurve,
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

    def sniff(self, path: Path, head: bytes) -> bool:
        return "tfevents" in path.name

    def read(self, path: Path, *, axis_column: str | None, losses: LossLog) -> list[ImportedCurve]:
        axis = axis_column or "step"
        if axis not in _AXES:
            raise ImportFormatError(
                f"{path}: axis column {axis!r} does not exist in event files (fix: use one of {_AXES})"
            )
        try:
            from tensorboard.compat.proto.event_pb2 import Event
            from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c
        except ImportError:
            raise ImportFormatError(
                f"{path}: reading TensorBoard files needs the tensorboard package "
                "(fix: pip install 'scalerl-harness[tensorboard]')"
            ) from None
        try:
            data = path.read_bytes()
        except OSError as err:
            raise ImportFormatError(f"{path}: cannot read: {err}") from None
        points: dict[str, list[tuple[int, float, float, str]]] = defaultdict(list)
        first_wall: float | None = None
        n_events = 0
        for index, record in _records(data, masked_crc32c, losses):
            try:
                event = Event.FromString(record)
            except Exception as err:  # protobuf's DecodeError: a sound checksum over a bad event
                raise ImportFormatError(
                    f"{path}: record {index} is not a TensorBoard event: {err} "
                    "(fix: pass an events file written by TensorBoard / tensorboardX / PyTorch)"
                ) from None
            n_events += 1
            if first_wall is None:
                first_wall = event.wall_time
            step: int | None = None
            for value in event.summary.value:
                v = _scalar(value)
                if v is None:
                    continue
                if step is None:
                    step = check_step(float(event.step), f"record {index}", losses)
                    if step is None:
                        break
                points[value.tag].append((step, event.wall_time - first_wall, v, f"record {index}"))
        if not points:
            raise ImportFormatError(
                f"{path}: {n_events} event(s) but no scalar summaries (fix: log scalars with "
                "SummaryWriter.add_scalar, or pick the events file that holds them)"
            )
        run = path.name.split(".tfevents")[0] or path.stem
        return [
            make_curve(
                path,
                run,
                tag,
                axis,
                [p[0] for p in pts],
                [float(p[0]) if axis == "step" else p[1] for p in pts],
                [p[2] for p in pts],
                [p[3] for p in pts],
                losses,
            )
            for tag, pts in points.items()
        ]


def _records(
    data: bytes, masked_crc32c: Callable[[bytes], int], losses: LossLog
) -> Iterator[tuple[int, bytes]]:
    """The TFRecord framing: ``uint64 length, uint32 masked CRC-32C of the length, data, uint32
    masked CRC-32C of the data``, little-endian. Yields (1-based record number, data) for every
    sound record. A record whose data checksum fails is skipped (its length is sound); one whose
    header checksum fails is skipped by scanning forward to the next sound record. Both count as
    ``crc-failure``; an incomplete last record counts as ``truncated-tail``."""
    pos, index, size = 0, 0, len(data)
    while pos < size:
        index += 1
        if size - pos < 12:
            losses.add("truncated-tail", f"record {index} (byte {pos}): {size - pos} byte(s) of header")
            return
        (length,) = struct.unpack_from("<Q", data, pos)
        (header_crc,) = struct.unpack_from("<I", data, pos + 8)
        if masked_crc32c(data[pos : pos + 8]) != header_crc:
            losses.add("crc-failure", f"record {index} (byte {pos}): header checksum")
            nxt = _resync(data, pos + 1, masked_crc32c)
            if nxt is None:
                return
            pos = nxt
            continue
        end = pos + 12 + length + 4
        if end > size:
            losses.add("truncated-tail", f"record {index} (byte {pos}): {size - pos} of {end - pos} byte(s)")
            return
        body = data[pos + 12 : pos + 12 + length]
        (data_crc,) = struct.unpack_from("<I", data, end - 4)
        if masked_crc32c(body) != data_crc:
            losses.add("crc-failure", f"record {index} (byte {pos}): data checksum")
        else:
            yield index, body
        pos = end


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
