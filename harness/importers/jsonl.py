"""verl metrics as JSON lines: one JSON object per logged step, one key per metric.

This is what verl's file logger and summary scripts write (e.g. SPEED-RL's
``processed_metrics.json``): ``{"train_global_steps": 25, "accumulated_training_time": 2710.2,
"val-core/MATH500-Qwen-instruct/acc/mean@1": 0.57, ...}``. The file is one run, named after its
folder (files are usually all called ``processed_metrics.json``, one folder per run). The step is
the first key that is a known step name (``train_global_steps``, ``global_step``, ``step``, ...);
every other numeric key is a metric, and a key absent or null on a line means "not logged at this
step". A key with no numeric value at all (a run name, a config) is not a metric; a non-numeric
value of a numeric key (``"N/A"``) drops that point only, counted as ``bad-value``.
``axis_column`` picks another key as the x axis (a cumulative one such as
``accumulated_training_time``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scalerl.harness.errors import ImportFormatError
from scalerl.harness.importers.base import (
    SYSTEM_NAMES,
    CurveImporter,
    ImportedCurve,
    LossLog,
    check_step,
    is_step_name,
    make_curve,
    register,
)

# verl's own step key comes first; the generic names of base.STEP_NAMES follow.
JSONL_STEP_KEYS = ("train_global_steps", "global_steps", "global_step", "step", "_step", "iteration")
# Keys that are an x axis (time), never a metric.
AXIS_KEYS = (*SYSTEM_NAMES, "accumulated_training_time")


def _step_key(keys: list[str]) -> str | None:
    for name in JSONL_STEP_KEYS:
        if name in keys:
            return name
    return next((k for k in keys if is_step_name(k)), None)


@register
class JsonLinesImporter(CurveImporter):
    name = "verl-jsonl"
    priority = 30

    def sniff(self, path: Path, head: bytes) -> bool:
        first = head.split(b"\n", 1)[0].strip()
        if not first.startswith(b"{"):
            return False
        try:
            obj = json.loads(first)
        except ValueError:
            return False
        return isinstance(obj, dict) and _step_key(list(obj)) is not None

    def read(self, path: Path, *, axis_column: str | None, losses: LossLog) -> list[ImportedCurve]:
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as err:
            raise ImportFormatError(f"{path}: cannot read as JSON lines: {err}") from None
        rows: list[tuple[int, dict[str, object]]] = []
        for lineno, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line, object_pairs_hook=_first_keys(f"line {lineno}", losses))
            except json.JSONDecodeError as err:
                raise ImportFormatError(
                    f"{path}:{lineno}: not a JSON object ({err.msg}) (fix: one JSON object per line)"
                ) from None
            if not isinstance(obj, dict):
                raise ImportFormatError(
                    f"{path}:{lineno}: a JSON {type(obj).__name__}, not an object "
                    "(fix: one JSON object per line)"
                )
            rows.append((lineno, obj))
        if not rows:
            raise ImportFormatError(f"{path}: no JSON lines (fix: one JSON object per logged step)")
        keys: list[str] = []
        for _, obj in rows:
            keys.extend(k for k in obj if k not in keys)
        step_key = _step_key(keys)
        if step_key is None:
            raise ImportFormatError(
                f"{path}: no step key among {keys[:6]} (fix: log 'train_global_steps' or 'step' on each line)"
            )
        x_key = step_key
        if axis_column is not None:
            if axis_column not in keys:
                raise ImportFormatError(
                    f"{path}: axis key {axis_column!r} not found "
                    f"(fix: use one of {keys[:10]}{' ...' if len(keys) > 10 else ''})"
                )
            x_key = axis_column
        steps: list[int] = []
        xs: list[float] = []
        where: list[str] = []
        kept: list[dict[str, object]] = []
        for lineno, obj in rows:
            raw_step = _number(obj.get(step_key), path, lineno, step_key)
            if raw_step is None:
                raise ImportFormatError(f"{path}:{lineno}: no {step_key!r} (fix: every line needs its step)")
            step = check_step(raw_step, f"line {lineno}", losses)
            if step is None:
                continue
            x = _number(obj.get(x_key), path, lineno, x_key)
            if x is None:
                continue  # a line without the chosen axis cannot be placed on it
            steps.append(step)
            xs.append(x)
            where.append(f"line {lineno}")
            kept.append(obj)
        run = path.parent.name if path.stem in ("processed_metrics", "metrics") else path.stem
        curves = []
        for key in keys:
            if key in (step_key, x_key) or key.lower() in AXIS_KEYS:
                continue
            vals = [obj.get(key) for obj in kept]
            if not any(_is_number(v) for v in vals):
                continue  # a text, bool or nested field (a run name, a config) is not a metric
            st: list[int] = []
            xv: list[float] = []
            vv: list[float] = []
            wh: list[str] = []
            for s, x, v, w in zip(steps, xs, vals, where, strict=True):
                if v is None:  # null or absent: not logged at this step
                    continue
                if not _is_number(v):
                    # One stray value (a "N/A", a "0.5" logged as text) costs that point only,
                    # counted, never the metric's every other point.
                    shown = repr(v) if len(repr(v)) <= 40 else repr(v)[:37] + "..."
                    losses.add("bad-value", f"{w}: {key} {shown}", metric=key)
                    continue
                st.append(s)
                xv.append(x)
                vv.append(float(v))  # type: ignore[arg-type]
                wh.append(w)
            if st:
                curves.append(make_curve(path, run, key, x_key, st, xv, vv, wh, losses))
        return curves


def _first_keys(where: str, losses: LossLog) -> Callable[[list[tuple[str, Any]]], dict[str, Any]]:
    """A JSON object hook that keeps the first of a repeated key (``json`` keeps the last) and
    counts the others as ``duplicate-column``."""

    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                losses.add("duplicate-column", f"{where}: key {key!r} repeated", metric=key)
            else:
                out[key] = value
        return out

    return hook


def _is_number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _number(v: object, path: Path, lineno: int, key: str) -> float | None:
    """A step or axis value; null or absent is None, anything else non-numeric is an error."""
    if v is None:
        return None
    if not _is_number(v):
        raise ImportFormatError(
            f"{path}:{lineno}: key {key!r}: {v!r} is not a number (fix: log numeric values)"
        )
    return float(v)  # type: ignore[arg-type]
