"""The importer interface, its registry and format auto-detection.

An importer reads one file a lab exported from its own logging (W&B, TensorBoard, a parsed
console log) into :class:`ImportedCurve` objects, one per (run, metric). Malformed input raises
:class:`harness.errors.ImportFormatError` naming the file, the line/column and the fix.
"""

from __future__ import annotations

import fnmatch
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from harness.errors import ImportFormatError

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
    """One (run, metric) curve. ``steps`` are integers (unique, increasing); ``x`` is the axis the
    user chose (the step itself by default); ``x_name`` names it as in the source file."""

    source: str
    run: str
    metric: str
    x_name: str
    steps: NDArray[np.int64]
    x: NDArray[np.float64]
    values: NDArray[np.float64]

    def __len__(self) -> int:
        return int(self.values.size)


def make_curve(
    source: Path,
    run: str,
    metric: str,
    x_name: str,
    steps: Sequence[float],
    x: Sequence[float],
    values: Sequence[float],
) -> ImportedCurve:
    """Build a curve sorted by step, keeping the last value logged at a repeated step (what a
    resumed run re-logs supersedes what it logged before the restart)."""
    st = np.asarray(steps, dtype=np.float64)
    xv = np.asarray(x, dtype=np.float64)
    vv = np.asarray(values, dtype=np.float64)
    if st.size and not np.array_equal(st, np.round(st)):
        bad = float(st[st != np.round(st)][0])
        raise ImportFormatError(
            f"{source}: run {run!r} metric {metric!r}: step {bad!r} is not a whole number "
            "(fix: use an integer step column, or pass --axis-column for a fractional x axis)"
        )
    order = np.argsort(st, kind="stable")
    st, xv, vv = st[order], xv[order], vv[order]
    last = np.ones(st.size, dtype=bool)
    if st.size > 1:
        last[:-1] = st[1:] != st[:-1]
    return ImportedCurve(str(source), run, metric, x_name, st[last].astype(np.int64), xv[last], vv[last])


def parse_float(text: str, path: Path, line: int, column: str) -> float:
    """A numeric cell; empty means "not logged here" (NaN); anything else non-numeric is an error."""
    text = text.strip()
    if not text:
        return float("nan")
    try:
        return float(text)
    except ValueError:
        raise ImportFormatError(
            f"{path}:{line}: column {column!r}: {text!r} is not a number "
            "(fix: export numeric values only, or drop that column before importing)"
        ) from None


def is_step_name(name: str) -> bool:
    return name.strip().lower() in STEP_NAMES


class CurveImporter(ABC):
    """One file format. Contract: :meth:`sniff` is cheap and never raises; :meth:`read` returns
    every curve in the file (filtered by ``metric``, a name or glob) or raises ImportFormatError."""

    name: ClassVar[str]
    # Detection tries more specific formats first (lower first).
    priority: ClassVar[int] = 100

    @abstractmethod
    def sniff(self, path: Path, head: bytes) -> bool: ...

    @abstractmethod
    def read(self, path: Path, *, axis_column: str | None = None) -> list[ImportedCurve]: ...


IMPORTERS: dict[str, type[CurveImporter]] = {}


def register(cls: type[CurveImporter]) -> type[CurveImporter]:
    IMPORTERS[cls.name] = cls
    return cls


def _registry() -> dict[str, type[CurveImporter]]:
    # The format modules register themselves when imported; importing them here (not at package
    # import) keeps ``import harness.importers`` free of side effects beyond definitions.
    from harness.importers import jsonl, parsed_csv, tensorboard, wandb_csv  # noqa: F401

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


def read_curves(
    path: str | Path,
    *,
    fmt: str | None = None,
    metric: str | None = None,
    axis_column: str | None = None,
) -> list[ImportedCurve]:
    """Read every curve of one file (format auto-detected unless ``fmt``), optionally keeping only
    metrics equal to / matching the glob ``metric``."""
    p = Path(path)
    importer = get_importer(fmt) if fmt else detect(p)
    curves = importer.read(p, axis_column=axis_column)
    if metric is not None:
        kept = [c for c in curves if c.metric == metric or fnmatch.fnmatchcase(c.metric, metric)]
        if not kept:
            found = sorted({c.metric for c in curves})
            shown = ", ".join(found[:12]) + (" ..." if len(found) > 12 else "")
            raise ImportFormatError(f"{p}: no metric matches {metric!r} (fix: use one of: {shown})")
        curves = kept
    return [c for c in curves if len(c)]
