"""Argument types shared by every command line (``scalerl``'s commands, ``python -m
scalerl.harness.rl.toy``): numbers are checked once, at the boundary, so a bad value is argparse's
one-line usage error (exit 2) instead of a hang, a traceback or a silently ignored flag later. A
bottom-layer module (it imports only the standard library), so a package below the CLI can parse
its own flags the same way.

Every numeric flag of every command goes through one of these: :func:`whole` for integers (no
floats, no ``1e3``, bounded so a value past the store's int4 columns or a count that would eat
memory fails here), :func:`real` for floats (finite only: ``nan``, ``inf`` and ``1e999`` are
refused, never compared against; then a range, open or closed at each end)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

# The store's integer columns (seed, step) are int4 on PostgreSQL.
INT4_MAX = 2**31 - 1


def whole(lo: int | None = None, hi: int | None = INT4_MAX) -> Callable[[str], int]:
    """An argparse type: a whole number in ``[lo, hi]``."""

    def parse(text: str) -> int:
        value = _int(text)
        if lo is not None and value < lo:
            raise argparse.ArgumentTypeError(f"must be at least {lo}, got {value}")
        if hi is not None and value > hi:
            raise argparse.ArgumentTypeError(f"must be at most {hi}, got {value}")
        return value

    parse.__name__ = "whole number"  # what argparse says of a value this type rejects
    return parse


def real(
    lo: float | None = None,
    hi: float | None = None,
    *,
    lo_open: bool = False,
    hi_open: bool = False,
) -> Callable[[str], float]:
    """An argparse type: a finite number in the range ``lo``..``hi`` (each end closed unless
    ``lo_open`` / ``hi_open``; None for no bound)."""
    span = (
        ("(" if lo_open or lo is None else "[")
        + ("-inf" if lo is None else f"{lo:g}")
        + ", "
        + ("inf" if hi is None else f"{hi:g}")
        + (")" if hi_open or hi is None else "]")
    )

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number in {span}, got {text!r}")
        too_low = lo is not None and (value <= lo if lo_open else value < lo)
        too_high = hi is not None and (value >= hi if hi_open else value > hi)
        if too_low or too_high:
            raise argparse.ArgumentTypeError(f"must be in {span}, got {value:g}")
        return value

    parse.__name__ = "number"
    return parse


positive_int = whole(1)
non_negative_int = whole(0)
positive_float = real(0.0, lo_open=True)
non_negative_float = real(0.0)
fraction_open = real(0.0, 1.0, lo_open=True, hi_open=True)  # (0, 1): a level, a share


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None


class BoundsPair(argparse.Action):
    """``--bounds LO HI``: the range a metric can take, two finite numbers with LO < HI, stored
    as the tuple ``(lo, hi)``; anything else is a usage error that names the flag, the values
    and the fix (the off switch is a separate ``--no-bounds`` flag, store_const None)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        texts = [str(v) for v in values] if isinstance(values, list) else [str(values)]
        got = " ".join(texts)
        fix = "fix: e.g. --bounds 0 1 for a pass rate, or --no-bounds to turn clipping off"
        try:
            lo, hi = (float(t) for t in texts)
        except ValueError:
            raise argparse.ArgumentError(self, f"LO and HI must be numbers, got {got!r} ({fix})") from None
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise argparse.ArgumentError(self, f"LO and HI must be finite, got {got!r} ({fix})")
        if not lo < hi:
            raise argparse.ArgumentError(self, f"LO must be below HI, got {got!r} ({fix})")
        setattr(namespace, self.dest, (lo, hi))
