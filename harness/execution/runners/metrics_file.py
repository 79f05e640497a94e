"""Tail a metrics JSONL file that a lab's script appends to, and ingest its points.

One JSON object per line::

    {"step": 10, "metrics": {"val/pass_rate": 0.41}, "compute": {"gpu_hours": 0.2, "samples": 640}}

``metrics`` may be left out, in which case every other numeric top-level key is a metric
(``{"step": 10, "val/pass_rate": 0.41}``). An optional ``"n": {"val/pass_rate": 512}`` gives the
number of Bernoulli samples behind a rate (its binomial noise; see scalerl.harness.analysis.noise): each
key one of the line's metrics, each value an integer >= 1. A NaN or ±inf metric value (JSON's
``NaN`` / ``Infinity``, or a number too large for a double) is kept as a non-finite point and
counted (``non-finite-value``), as every importer and the trainer's own writer do; a line whose
compute is not finite, or negative, cannot be placed on that axis and is dropped and counted (``bad-axis``).
:attr:`MetricsTail.losses` holds the counts. Only complete lines (ending in a
newline) are read while the command runs, so a line the script is still writing is picked up on
a later poll, never half; once it has exited, the last poll (``final=True``) reads a last line
that lacks its newline too (a ``print(..., end="")`` or an unflushed final write), and counts
one that does not parse as ``truncated-tail``. Within one tailer the file is read once (a byte
offset); across attempts the store's unique (run, step, metric) key makes re-reading the file idempotent.
"""

from __future__ import annotations

import json
import logging
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scalerl.harness.errors import ImportFormatError
from scalerl.harness.execution.runners.base import Sink

if TYPE_CHECKING:
    from scalerl.harness.importers.base import LossLog

_RESERVED = {"step", "metrics", "compute", "n"}
# Bytes read per block: a metrics line is well under a kilobyte; a "line" longer than this is a
# runaway write (binary garbage, a missing newline) that must not be buffered whole.
READ_BLOCK = 8 << 20
log = logging.getLogger(__name__)


def _numbers(obj: Any, *, where: str, what: str) -> dict[str, float]:
    """name -> float; NaN / ±inf pass (the caller counts them), anything not a number raises."""
    if not isinstance(obj, dict):
        raise ImportFormatError(f"{where}: {what} must be an object of name -> number, got {obj!r}")
    out: dict[str, float] = {}
    for key, value in obj.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ImportFormatError(
                f"{where}: {what}.{key}={value!r} is not a finite number; fix: write a number"
            )
        try:
            out[str(key)] = float(value)
        except OverflowError:  # an integer beyond a double: as infinite as 1e400
            out[str(key)] = math.copysign(math.inf, value)
    return out


def _counts(obj: Any, metrics: dict[str, float], *, where: str) -> dict[str, int]:
    if not isinstance(obj, dict):
        raise ImportFormatError(f"{where}: n must be an object of metric -> sample count, got {obj!r}")
    out: dict[str, int] = {}
    for key, value in obj.items():
        if key not in metrics:
            raise ImportFormatError(
                f"{where}: n.{key} names no metric on this line; fix: use one of {sorted(metrics)}"
            )
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ImportFormatError(
                f"{where}: n.{key}={value!r} must be an integer >= 1 (the samples behind the value)"
            )
        out[str(key)] = value
    return out


def parse_line(
    text: str, *, where: str, losses: LossLog | None = None
) -> tuple[int, dict[str, float], dict[str, float], dict[str, int]]:
    """One JSONL line -> (step, metrics, compute, n); ``where`` is ``file:line`` for errors. A
    repeated key keeps its first value and is counted in ``losses`` as ``duplicate-column``, as
    the verl JSONL importer does (``json`` alone would keep the last one, silently)."""
    from scalerl.harness.importers.base import LossLog
    from scalerl.harness.importers.jsonl import _first_keys

    try:
        obj = json.loads(
            text, object_pairs_hook=_first_keys(where, losses if losses is not None else LossLog())
        )
    except RecursionError:
        raise ImportFormatError(
            f"{where}: JSON nested too deep; fix: write one flat JSON object per line"
        ) from None
    except json.JSONDecodeError as err:
        raise ImportFormatError(
            f"{where}: not valid JSON ({err.msg}); fix: write one JSON object per line"
        ) from None
    if not isinstance(obj, dict) or "step" not in obj:
        raise ImportFormatError(f'{where}: each line needs an object with "step"; got {text.strip()[:80]!r}')
    step = obj["step"]
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ImportFormatError(f"{where}: step={step!r} must be a non-negative integer")
    if "metrics" in obj:
        metrics = _numbers(obj["metrics"], where=where, what="metrics")
    else:
        metrics = _numbers({k: v for k, v in obj.items() if k not in _RESERVED}, where=where, what="metrics")
    compute = _numbers(obj.get("compute", {}), where=where, what="compute")
    if not metrics:
        raise ImportFormatError(f'{where}: no metrics on this line; fix: add e.g. "metrics": {{...}}')
    n = _counts(obj.get("n", {}), metrics, where=where)
    return step, metrics, compute, n


class MetricsTail:
    """Incrementally ingest complete lines of ``path`` into ``sink``."""

    def __init__(self, path: Path, sink: Sink) -> None:
        from scalerl.harness.importers.base import LossLog

        self.path = path
        self.sink = sink
        self.offset = 0
        self.line_no = 0
        self._ident: tuple[int, int] | None = None  # (device, inode) of the file read so far
        self.losses = LossLog()  # non-finite values kept, unplaceable lines dropped: both counted

    def poll(self, *, final: bool = False) -> int:
        """Ingest the complete lines appended since the last poll; returns how many points.
        ``final`` (the command has exited, nothing more will be written): a last line without its
        newline is read too, or, if it does not parse (cut short), counted as ``truncated-tail``.

        Read in blocks of :data:`READ_BLOCK` bytes, so memory stays bounded whatever the script
        writes; a line longer than a block fails the run (ImportFormatError). A file that shrank
        or was replaced (the script reopened it with "w") is read again from its start: the
        store's (run, step, metric) key makes that idempotent, where keeping the old offset
        would silently skip every point written after it."""
        try:
            fh = self.path.open("rb")
        except FileNotFoundError:
            return 0
        n = 0
        with fh:
            st = os.fstat(fh.fileno())
            ident = (st.st_dev, st.st_ino)
            if st.st_size < self.offset or (self._ident is not None and ident != self._ident):
                log.warning("%s was truncated or replaced; reading it again from the start", self.path)
                self.offset = self.line_no = 0
            self._ident = ident
            while True:
                fh.seek(self.offset)
                chunk = fh.read(READ_BLOCK)
                cut = chunk.rfind(b"\n") + 1
                if cut == 0 and len(chunk) == READ_BLOCK:
                    raise ImportFormatError(
                        f"{self.path}:{self.line_no + 1}: a line longer than {READ_BLOCK:,} bytes; "
                        "fix: write one short JSON object per line"
                    )
                n += self._lines(chunk[:cut])
                if len(chunk) < READ_BLOCK:  # the end of the file
                    rest = chunk[cut:]
                    if final and rest.strip():
                        # The writer is gone: its unterminated last line is all it will ever write.
                        n += self._last_line(rest)
                    return n

    def _last_line(self, raw: bytes) -> int:
        """The final unterminated line: read when whole; a cut-short one (the writer was killed
        mid-line) is counted as ``truncated-tail``, never silently dropped."""
        line_no = self.line_no
        try:
            n = self._lines(raw + b"\n")
        except ImportFormatError:
            self.line_no = line_no + 1
            self.offset += len(raw)
            self.losses.add("truncated-tail", f"line {self.line_no}: {raw[:60]!r} (no newline, cut short)")
            return 0
        self.offset -= 1  # the newline added above is not in the file
        return n

    def _lines(self, chunk: bytes) -> int:
        end = chunk.rfind(b"\n")
        if end < 0:
            return 0
        n = 0
        for raw in chunk[: end + 1].split(b"\n")[:-1]:
            self.line_no += 1
            text = raw.decode("utf-8", errors="replace")
            if not text.strip():
                continue
            where = f"{self.path}:{self.line_no}"
            step, metrics, compute, counts = parse_line(text, where=where, losses=self.losses)
            if not all(math.isfinite(v) and v >= 0 for v in compute.values()):
                for name in metrics:
                    self.losses.add("bad-axis", f"line {self.line_no}: compute {compute}", metric=name)
                continue
            for name, value in metrics.items():
                if not math.isfinite(value):
                    self.losses.add("non-finite-value", f"line {self.line_no}: {name} {value!r}", metric=name)
            if counts:
                self.sink.add(step, metrics, compute, n=counts)
            else:  # a sink written before points carried n still takes the line
                self.sink.add(step, metrics, compute)
            n += 1
        self.offset += end + 1
        return n
