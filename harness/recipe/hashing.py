"""Run identity: the hash of a recipe's fully resolved config, and the run id.

``config_hash(recipe)`` is the SHA-256 (64 hex) of the canonical JSON of ``recipe.resolved()``;
``run_id(recipe, seed)`` is its first 16 hex characters plus ``-s{seed}`` (docs/architecture.md).

Canonical JSON is what makes the id stable across key order, float spelling and interpreters:
keys sorted, no whitespace, ASCII only; floats written with Python's shortest round-trip repr
(the same on every CPython >= 3.1 and platform), and a float with an integral value written as an
integer, so ``1e3``, ``1000.0`` and ``1000`` in a free-form field (``task.params``, the recipe's
own ``params``) agree. The recipe keeps the type it was given (``params.x: 3`` an int, ``3.0`` a
float); only the hash and the command template (:mod:`scalerl.harness.execution.runners.template`, which
also writes ``3``) treat them as one value, so one run id is one command line. This is also how a
knob's float parameter written ``4`` hashes. NaN and infinities are refused: they have no JSON
spelling and never belong in a config. A ``set`` (or ``frozenset``) is written as the list of
its items sorted by their canonical text: its iteration order changes with each process's string
hash seed, which gave one config a different run id in every process of a job array. Any other
type is identified by its text (a YAML date), and refused when that text is Python's default
repr (``<Thing object at 0x7f...>``: a memory address, another id in every process); a numpy
array by its whole text (never ``str()``'s elided ``[0 1 2 ... 4999]``). Two keys with one
text (``1`` and ``"1"``) are refused: JSON would keep one of them.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import sys
from collections.abc import Mapping
from typing import Any

from scalerl.harness.errors import ConfigError
from scalerl.harness.recipe.schema import Recipe

RUN_ID_HEX = 16


# Python's default object repr: ``<pkg.Thing object at 0x7f3a...>``.
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+>")


def _array_text(value: Any) -> str:
    """A numpy value's text with numpy's default print options, whatever the program set, and
    never elided: ``str()`` of a large array is ``[0 1 2 ... 4997 4998 4999]``, the same for
    arrays that differ in the middle. A value short enough to print whole keeps its usual text."""
    import numpy as np

    with np.printoptions(
        threshold=sys.maxsize, precision=8, edgeitems=3, linewidth=75, suppress=False, nanstr="nan",
        infstr="inf", sign="-", floatmode="maxprec", legacy=False,
    ):  # fmt: skip
        return str(value)


def _key(key: Any) -> str:
    """A mapping key's text; a set key by its sorted items, like a set value."""
    if isinstance(key, set | frozenset):
        return json.dumps(_canonical(key, ""), sort_keys=True, ensure_ascii=True)
    return str(key)


def _canonical(value: Any, path: str) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ConfigError(
                "non-finite number in a config", field=path or None, value=value, fix="use a finite number"
            )
        if value.is_integer() and abs(value) < 2**53:
            return int(value)
        return value
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        keys: dict[str, Any] = {}
        for k, v in value.items():
            text = _key(k)
            if text in keys:
                # {1: a, "1": b}: JSON has one spelling for both, so the config would lose one of
                # them and hash as another config.
                raise ConfigError(
                    f"keys {keys[text]!r} and {k!r} are one key in a config's JSON",
                    field=path or None,
                    fix="give every key its own text (a config's keys are strings)",
                )
            keys[text] = k
            out[text] = _canonical(v, f"{path}.{k}" if path else str(k))
        return out
    if isinstance(value, list | tuple):
        return [_canonical(v, f"{path}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, set | frozenset):
        # A set iterates in an order that changes with each process's string hash seed: as a
        # list sorted by each item's canonical text, it is one value everywhere.
        items = [_canonical(v, f"{path}{{}}") for v in value]
        return sorted(items, key=lambda v: json.dumps(v, sort_keys=True, ensure_ascii=True))
    # Anything else (a YAML date in task.params, say) is identified by its text, unless that text
    # is Python's default repr: it holds a memory address, so it differs in every process.
    text = _array_text(value) if type(value).__module__ == "numpy" else str(value)
    if _ADDRESS.search(text):
        raise ConfigError(
            f"a {type(value).__name__} in a config has no stable text (its str() is {text[:80]!r}, "
            "which holds a memory address), so the run would get another id in every process",
            field=path or None,
            fix="pass plain data (dict, list, str, int, float, bool, None; a set becomes a sorted "
            "list), e.g. the object's settings as a dict",
        )
    return text


def canonical_json(data: Mapping[str, Any]) -> str:
    """The canonical JSON text of plain config data (see the module docstring)."""
    return json.dumps(
        _canonical(data, ""), sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
    )


def config_hash(recipe: Recipe) -> str:
    """SHA-256 hex of the canonical JSON of ``recipe.resolved()``."""
    return hashlib.sha256(canonical_json(recipe.resolved()).encode("ascii")).hexdigest()


def run_id(recipe: Recipe, seed: int) -> str:
    """``<first 16 hex of config_hash>-s<seed>``: one run of one config with one seed."""
    return f"{config_hash(recipe)[:RUN_ID_HEX]}-s{int(seed)}"
