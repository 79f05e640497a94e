"""TensorBoard event files (``*.tfevents*``): every scalar tag becomes a curve.

Read with the ``tensorboard`` package's own event reader, imported lazily (install the
``tensorboard`` or ``dev`` extra: ``pip install 'scalerl-harness[tensorboard]'``). Scalars come as
``simple_value`` (TF1-style) or as a 0-d ``tensor`` (TF2 / PyTorch writers); both are read. The run
is named after the file (the part before ``.tfevents``). The x axis is the event step, or with
``axis_column="wall_time"`` the seconds since the file's first event.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from harness.errors import ImportFormatError
from harness.importers.base import CurveImporter, ImportedCurve, make_curve, register

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

    def read(self, path: Path, *, axis_column: str | None = None) -> list[ImportedCurve]:
        axis = axis_column or "step"
        if axis not in _AXES:
            raise ImportFormatError(
                f"{path}: axis column {axis!r} does not exist in event files (fix: use one of {_AXES})"
            )
        try:
            # The raw loader + our own proto parse: EventFileLoader would also "migrate" every
            # event to the newest summary format, which is most of its cost and changes nothing
            # for scalars.
            from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader
            from tensorboard.compat.proto.event_pb2 import Event
        except ImportError:
            raise ImportFormatError(
                f"{path}: reading TensorBoard files needs the tensorboard package "
                "(fix: pip install 'scalerl-harness[tensorboard]')"
            ) from None
        points: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
        first_wall: float | None = None
        n_events = 0
        try:
            for record in RawEventFileLoader(str(path)).Load():
                event = Event.FromString(record)
                n_events += 1
                if first_wall is None:
                    first_wall = event.wall_time
                for value in event.summary.value:
                    v = _scalar(value)
                    if v is not None:
                        points[value.tag].append((float(event.step), event.wall_time - first_wall, v))
        except Exception as err:  # the reader raises TF's own DataLossError etc. on corrupt records
            raise ImportFormatError(
                f"{path}: corrupt TensorBoard record after event {n_events}: {err} "
                "(fix: copy the file again; a file still being written may be truncated)"
            ) from None
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
                [p[0] if axis == "step" else p[1] for p in pts],
                [p[2] for p in pts],
            )
            for tag, pts in points.items()
        ]
