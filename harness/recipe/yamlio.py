"""Safe YAML reading that remembers where every key came from.

Recipes and sweeps are read into plain data plus a :class:`SourceMap` that maps each key path
(``("knobs", "loss", "choice")``) to the file and line that wrote it, so a validation error found
later (by pydantic, by the planner) can point at the exact line. Only PyYAML's safe constructors
are used: no Python tags, no code. Duplicate keys are errors (PyYAML silently keeps the last one).

Scalars follow YAML 1.2: ``1e-3`` is the float 0.001 (YAML 1.1, and so PyYAML, would read it as a
string), so ``lr: 1e-3`` and ``lr: 0.001`` mean, and hash, the same; and only ``true``/``false``
are booleans, so ``choice: off`` is the alternative ``"off"``, not ``False``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from scalerl.harness.errors import ConfigError

KeyPath = tuple[str | int, ...]


@dataclass(frozen=True)
class Source:
    """Where a value was written: a file (or ``<command line>``) and a 1-based line, if known."""

    file: str
    line: int | None = None


@dataclass
class SourceMap:
    """Key path -> :class:`Source`. A missing path falls back to its nearest recorded parent."""

    entries: dict[KeyPath, Source] = field(default_factory=dict)

    def get(self, path: KeyPath) -> Source | None:
        for n in range(len(path), -1, -1):
            found = self.entries.get(path[:n])
            if found is not None:
                return found
        return None

    def set_subtree(self, prefix: KeyPath, other: SourceMap) -> None:
        """Drop every entry under ``prefix`` and graft ``other`` (whose paths are relative) there."""
        for key in [k for k in self.entries if k[: len(prefix)] == prefix]:
            del self.entries[key]
        for key, src in other.entries.items():
            self.entries[prefix + key] = src


# YAML 1.2 floats with an exponent: PyYAML wants a dot and a signed exponent (1.0e-3); also 1e-3, 1e3.
_FLOAT_12 = re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$")


_BOOL = "tag:yaml.org,2002:bool"
_BOOL_12 = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")


class _Loader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 scalars: ``1e-3`` is a float, and only true/false are booleans
    (YAML 1.1's on/off/yes/no are strings, so the knobs' ``on``/``off`` alternatives need no
    quotes). Everything else is SafeLoader's."""


# A fresh resolver table on the subclass only (SafeLoader itself is left untouched), minus 1.1 bools.
_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in entries if tag != _BOOL]
    for first, entries in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(_BOOL, _BOOL_12, list("tTfF"))
_Loader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT_12, list("-+0123456789."))


def _line(node: yaml.Node) -> int:
    return int(node.start_mark.line) + 1


# Bounds on one document. Aliases let a few hundred bytes name billions of values ("billion
# laughs": 9 levels of 9 aliases); a recipe or sweep has a few hundred. Both limits are far above
# any real file and far below what hurts a 2-core machine.
MAX_DOCUMENT_BYTES = 1 << 20
MAX_VALUES = 100_000
# Nesting: a recipe is a few levels deep. Deeper input (``[[[[...]]]]``) would exhaust Python's
# stack in the YAML composer or later in validation and hashing, which all recurse.
MAX_DEPTH = 64


class _Budget:
    def __init__(self, file: str) -> None:
        self.left = MAX_VALUES
        self.file = file

    def spend(self, node: yaml.Node) -> None:
        self.left -= 1
        if self.left < 0:
            raise ConfigError(
                f"the document expands to more than {MAX_VALUES:,} values (YAML aliases or merge "
                "keys repeated inside each other?)",
                file=self.file,
                line=_line(node),
                fix="write the values out, or use fewer nested aliases (&name / *name)",
            )


def _build(
    loader: _Loader, node: yaml.Node, path: KeyPath, file: str, sources: SourceMap, budget: _Budget
) -> Any:
    budget.spend(node)
    if len(path) > MAX_DEPTH:
        raise _too_deep(file, _line(node))
    if isinstance(node, yaml.MappingNode):
        loader.flatten_mapping(node)  # resolves YAML merge keys (<<) the way SafeLoader does
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            if not isinstance(key, str | int | float) or isinstance(key, bool):
                # true/false/null or a complex key: a config key must be a name.
                shown = key_node.value if isinstance(key_node, yaml.ScalarNode) else key
                raise ConfigError(
                    f"mapping key {shown!r} is not a string",
                    file=file,
                    line=_line(key_node),
                    field=".".join(str(p) for p in path) or None,
                    fix=f'quote the key: "{shown}"',
                )
            key = str(key)
            if key in out:
                first = sources.entries.get((*path, key))
                where = f" (first at line {first.line})" if first and first.line else ""
                raise ConfigError(
                    f"duplicate key {key!r}{where}",
                    file=file,
                    line=_line(key_node),
                    field=".".join(str(p) for p in (*path, key)),
                    fix="keep one of the two entries",
                )
            sources.entries[(*path, key)] = Source(file, _line(key_node))
            out[key] = _build(loader, value_node, (*path, key), file, sources, budget)
        return out
    if isinstance(node, yaml.SequenceNode):
        items = []
        for i, item in enumerate(node.value):
            sources.entries[(*path, i)] = Source(file, _line(item))
            items.append(_build(loader, item, (*path, i), file, sources, budget))
        return items
    return loader.construct_object(node, deep=True)


def _too_deep(file: str, line: int | None) -> ConfigError:
    return ConfigError(
        f"the document nests lists or mappings more than {MAX_DEPTH} levels deep",
        file=file,
        line=line,
        fix="flatten it; a recipe, sweep, profile or mapping is a few levels deep",
    )


def parse_yaml(text: str, file: str, *, line_offset: int = 0) -> tuple[Any, SourceMap]:
    """Parse one YAML document into plain data and its :class:`SourceMap`.

    Raises :class:`ConfigError` naming the file and line on syntax errors and duplicate keys.
    """
    sources = SourceMap()
    size = len(text.encode("utf-8", errors="replace"))
    if size > MAX_DOCUMENT_BYTES:
        raise ConfigError(
            f"the document is {size:,} bytes, more than the {MAX_DOCUMENT_BYTES:,} a recipe or sweep may be",
            file=file,
            fix="split it, or check that this is the file you meant",
        )
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, sources
        sources.entries[()] = Source(file, _line(node) + line_offset)
        data = _build(loader, node, (), file, sources, _Budget(file))
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line = int(mark.line) + 1 if mark is not None else None
        reason = " ".join(str(p) for p in (err.context, err.problem) if p)
        raise ConfigError(
            f"YAML syntax error: {reason}",
            file=file,
            line=line,
            fix="check indentation, quoting and the ':' after each key",
        ) from None
    except yaml.YAMLError as err:
        raise ConfigError(f"YAML error: {err}", file=file, fix="fix the YAML syntax") from None
    except RecursionError:  # PyYAML's composer recurses once per level, before _build can count
        raise _too_deep(file, None) from None
    finally:
        loader.dispose()
    return data, sources


def read_yaml_text(path: Path) -> str:
    """The text of a YAML file the product reads (recipe, sweep, profile, mapping): a regular file
    of at most :data:`MAX_DOCUMENT_BYTES`, so ``/dev/zero`` or a huge file fails at once."""
    from scalerl.harness.boundedio import read_text

    def error(reason: str, fix: str) -> ConfigError:
        return ConfigError(reason, file=str(path), fix=fix)

    return read_text(
        path, MAX_DOCUMENT_BYTES, "YAML file", error, fix="split it, or check that this is the file you meant"
    )


def read_yaml_file(path: Path) -> tuple[Any, SourceMap]:
    """Read and parse any YAML file the product reads through the recipes' bounded loader."""
    return parse_yaml(read_yaml_text(path), str(path))


def read_yaml_mapping(path: Path) -> tuple[dict[str, Any], SourceMap]:
    """Read a file that must hold one YAML mapping (a recipe or a sweep)."""
    file = str(path)
    text = read_yaml_text(path)
    data, sources = parse_yaml(text, file)
    if data is None:
        raise ConfigError("the file is empty", file=file, fix="write a YAML mapping (key: value lines)")
    if not isinstance(data, Mapping):
        raise ConfigError(
            f"the top level is a {type(data).__name__}, not a mapping",
            file=file,
            line=1,
            fix="write key: value lines at the top level",
        )
    return dict(data), sources
