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
spelling and never belong in a config.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from typing import Any

from scalerl.harness.errors import ConfigError
from scalerl.harness.recipe.schema import Recipe

RUN_ID_HEX = 16


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
        return {str(k): _canonical(v, f"{path}.{k}" if path else str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(v, f"{path}[{i}]") for i, v in enumerate(value)]
    # Anything else (a YAML date in task.params, say) is identified by its text.
    return str(value)


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
