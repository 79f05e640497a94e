"""Validate plain data into a frozen pydantic model; turn every ``ValidationError`` into a
:class:`~scalerl.harness.errors.ConfigError` that names the file, line, field, value and the fix.

Pydantic reports a location (``loc``) through the *model*, which can contain union tags the data
does not have; the translator walks ``loc`` against both the data (for the line) and the model
classes (for the field's valid keys or choices), so an unknown key lists the keys that are valid
right there and an unknown alternative lists the alternatives of that knob.
"""

from __future__ import annotations

import difflib
import re
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from scalerl.harness.errors import ConfigError
from scalerl.harness.recipe.yamlio import KeyPath, SourceMap

M = TypeVar("M", bound=BaseModel)

_RANGE = {"greater_than": "gt", "greater_than_equal": "ge", "less_than": "lt", "less_than_equal": "le"}
_RANGE_SYM = {"gt": ">", "ge": ">=", "lt": "<", "le": "<="}
_TYPE_FIX = {
    "int": "an integer",
    "float": "a number",
    "string": "a string (quote it)",
    "bool": "true or false",
    "dict": "a mapping (key: value lines)",
    "list": "a list ([a, b] or '- a' lines)",
    "tuple": "a list",
    "model": "a mapping (key: value lines)",
}
_DOTTED = re.compile(r"\b[a-z_]+(?:\.[a-z_0-9]+)+\b")
_QUOTED = re.compile(r"'([a-z_]+)'")


def validate(model: type[M], data: Any, sources: SourceMap) -> M:
    """``model.model_validate(data)``, with errors rendered against ``sources``."""
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise translate(err, model, data, sources) from None


@dataclass(frozen=True)
class _Where:
    display: tuple[str | int, ...]  # the field as the user would write it
    data_path: KeyPath  # the deepest part of it present in the data (for the line)
    parent_models: tuple[type[BaseModel], ...]  # model(s) owning the last element
    annotation: Any  # the annotation of the last element, when it is a model field


def _models_in(tp: Any) -> list[type[BaseModel]]:
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [tp]
    found: list[type[BaseModel]] = []
    for arg in typing.get_args(tp):
        found.extend(_models_in(arg))
    return found


def _walk(root: type[BaseModel], loc: tuple[str | int, ...], data: Any) -> _Where:
    models: list[type[BaseModel]] = [root]
    parents: list[type[BaseModel]] = [root]
    display: list[str | int] = []
    data_path: list[str | int] = []
    cur: Any = data
    in_data = True
    annotation: Any = None
    for elem in loc:
        fields = {name: m.model_fields[name] for m in models for name in m.model_fields}
        aliases = {f.alias: name for name, f in fields.items() if f.alias}
        name = aliases.get(str(elem), elem)
        is_data_key = in_data and (
            (isinstance(cur, Mapping) and elem in cur)
            or (isinstance(cur, list) and isinstance(elem, int) and 0 <= elem < len(cur))
        )
        if isinstance(name, str) and name in fields:
            parents = list(models)
            annotation = fields[name].annotation
            models = _models_in(annotation) or models
        elif not is_data_key and not isinstance(elem, int):
            continue  # a union tag or validator name that is not part of what the user wrote
        else:
            parents = list(models)
            annotation = None
        display.append(elem)
        if is_data_key:
            data_path.append(elem)
            cur = cur[elem]
        else:
            in_data = False
    return _Where(tuple(display), tuple(data_path), tuple(parents), annotation)


def _valid_keys(models: tuple[type[BaseModel], ...]) -> list[str]:
    keys: list[str] = []
    for m in models:
        for name, f in m.model_fields.items():
            key = f.alias or name
            if key not in keys:
                keys.append(key)
    return keys


def _dotted(path: tuple[str | int, ...]) -> str:
    return ".".join(str(p) for p in path)


def _one(err: ErrorDetails, root: type[BaseModel], data: Any, sources: SourceMap) -> ConfigError:
    where = _walk(root, tuple(err["loc"]), data)
    field = _dotted(where.display) or None
    src = sources.get(where.data_path)
    kind = err["type"]
    ctx = err.get("ctx") or {}
    value: Any = err.get("input")
    fix: str | None = None
    reason = err["msg"]
    if kind == "extra_forbidden":
        key = str(where.display[-1]) if where.display else "?"
        valid = _valid_keys(where.parent_models)
        close = difflib.get_close_matches(key, valid, n=1)
        reason = f"unknown key {key!r}"
        fix = (f"did you mean {close[0]!r}? " if close else "") + "valid keys here: " + ", ".join(valid)
        value = None
    elif kind == "missing":
        reason = "required key is missing"
        fix = f"add '{where.display[-1]}: <value>'" if where.display else "add the key"
        value = None
    elif kind == "literal_error":
        options = [str(a) for a in typing.get_args(where.annotation)] or [ctx.get("expected", "")]
        is_choice = len(where.display) >= 3 and where.display[0] == "knobs" and where.display[-1] == "choice"
        reason = (
            f"unknown alternative {value!r} for knob {where.display[1]!r}"
            if is_choice
            else f"{value!r} is not one of the allowed values"
        )
        fix = "use one of: " + ", ".join(options)
        if isinstance(value, bool):
            fix += " (a bare true/false is a YAML boolean: quote it if you meant a name)"
    elif kind in {"int_parsing", "float_parsing"} and value in ("true", "false"):
        # A YAML boolean in a number field, handed on as its spelling by schema.Frozen.
        reason = f"{value} is a boolean, not a number"
        fix = "write a number"
    elif kind == "finite_number":
        reason = "not a finite number (NaN and infinities, e.g. .inf or 1e309, have no place in a config)"
        fix = "write a finite number"
    elif kind in _RANGE:
        op = _RANGE[kind]
        reason = f"out of range: must be {_RANGE_SYM[op]} {ctx.get(op)}"
        fix = f"use a value {_RANGE_SYM[op]} {ctx.get(op)}"
    elif kind.endswith(("_type", "_parsing")) or kind in {"int_from_float", "model_attributes_type"}:
        expected = next((v for k, v in _TYPE_FIX.items() if kind.startswith(k)), None)
        reason = f"wrong type ({type(value).__name__}): {err['msg']}"
        fix = f"write {expected}" if expected else "write a value of the documented type"
    elif kind == "value_error":
        text = reason.removeprefix("Value error, ")
        reason, _, fix_text = text.partition("; fix: ")
        fix = fix_text or None
        if not where.display:
            # A cross-field rule at the top: point at the first field it names that we can place.
            for name in [*_DOTTED.findall(reason), *_QUOTED.findall(reason)]:
                path = tuple(name.split("."))
                if path in sources.entries:
                    src, field = sources.entries[path], name
                    break
        reason = reason.removeprefix(f"{field}: ") if field else reason
        value = None if isinstance(value, Mapping) else value
    elif kind == "string_pattern_mismatch":
        reason = "does not match the allowed pattern"
        fix = f"match {ctx.get('pattern')}"
    elif kind in {"too_short", "too_long"}:
        fix = "see the field's documented length"
    elif kind == "union_tag_invalid":
        reason = f"unknown type {ctx.get('tag')!r}"
        fix = f"use one of: {ctx.get('expected_tags')}"
        value = None
    if isinstance(value, Mapping | list) and kind != "literal_error":
        value = None  # a whole section is not useful to echo back
    return ConfigError(
        reason,
        file=src.file if src else None,
        line=src.line if src else None,
        field=field,
        value=value,
        fix=fix,
    )


def translate(err: ValidationError, root: type[BaseModel], data: Any, sources: SourceMap) -> ConfigError:
    """The first error, fully located; the count of the others is appended to its reason."""
    errors = err.errors()
    first = _one(errors[0], root, data, sources)
    if len(errors) > 1:
        more = "; ".join(
            f"{_dotted(_walk(root, tuple(e['loc']), data).display) or '<top>'}: {e['msg']}"
            for e in errors[1:4]
        )
        return ConfigError(
            f"{first.reason} [and {len(errors) - 1} more: {more}]",
            file=first.file,
            line=first.line,
            field=first.field,
            value=first.value,
            fix=first.fix,
        )
    return first
