"""Tail a metrics JSONL file that a lab's script appends to, and ingest its points.

One JSON object per line::

    {"step": 10, "metrics": {"val/pass_rate": 0.41}, "compute": {"gpu_hours": 0.2, "samples": 640}}

``metrics`` may be left out, in which case every other numeric top-level key is a metric
(``{"step": 10, "val/pass_rate": 0.41}``). An optional ``"n": {"val/pass_rate": 512}`` gives the
number of Bernoulli samples behind a rate (its binomial noise; see scalerl.harness.analysis.noise): each
key one of the line's metrics, each value an integer >= 1. Only complete lines (ending in a
newline) are read, so a line the script is still writing is picked up on a later poll, never
half. Within one tailer the file is read once (a byte offset); across attempts the store's
unique (run, step, metric) key makes re-reading the file idempotent.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from scalerl.harness.errors import ImportFormatError
from scalerl.harness.execution.runners.base import Sink

_RESERVED = {"step", "metrics", "compute", "n"}


def _numbers(obj: Any, *, where: str, what: str) -> dict[str, float]:
    if not isinstance(obj, dict):
        raise ImportFormatError(f"{where}: {what} must be an object of name -> number, got {obj!r}")
    out: dict[str, float] = {}
    for key, value in obj.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise ImportFormatError(
                f"{where}: {what}.{key}={value!r} is not a finite number; fix: write a number"
            )
        out[str(key)] = float(value)
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


def parse_line(text: str, *, where: str) -> tuple[int, dict[str, float], dict[str, float], dict[str, int]]:
    """One JSONL line -> (step, metrics, compute, n); ``where`` is ``file:line`` for errors."""
    try:
        obj = json.loads(text)
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
        self.path = path
        self.sink = sink
        self.offset = 0
        self.line_no = 0

    def poll(self) -> int:
        """Ingest the complete lines appended since the last poll; returns how many points."""
        try:
            with self.path.open("rb") as fh:
                fh.seek(self.offset)
                chunk = fh.read()
        except FileNotFoundError:
            return 0
        end = chunk.rfind(b"\n")
        if end < 0:
            return 0
        n = 0
        for raw in chunk[: end + 1].split(b"\n")[:-1]:
            self.line_no += 1
            text = raw.decode("utf-8", errors="replace")
            if not text.strip():
                continue
            step, metrics, compute, counts = parse_line(text, where=f"{self.path}:{self.line_no}")
            if counts:
                self.sink.add(step, metrics, compute, n=counts)
            else:  # a sink written before points carried n still takes the line
                self.sink.add(step, metrics, compute)
            n += 1
        self.offset += end + 1
        return n
