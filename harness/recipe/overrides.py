"""Diffs on plain config data: deep merge (``extends``), dotted keys, and CLI ``key=value``.

Every function here keeps the :class:`~scalerl.harness.recipe.yamlio.SourceMap` in step with the data, so
a value that came from a base file, a sweep's ``overrides:`` or the command line is still traced
to where it was written when validation rejects it.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from scalerl.harness.errors import ConfigError
from scalerl.harness.recipe.yamlio import KeyPath, Source, SourceMap, parse_yaml

COMMAND_LINE = "<command line>"
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*(\.[A-Za-z0-9_\-]+)*$")


@dataclass(frozen=True)
class Override:
    """One ``dotted.key = value`` assignment and where it was written."""

    key: str
    value: Any
    source: Source

    @property
    def path(self) -> tuple[str, ...]:
        return tuple(self.key.split("."))

    def describe(self) -> str:
        return f"{self.key}={self.value!r}"


def deep_merge(
    base: Mapping[str, Any],
    base_src: SourceMap,
    over: Mapping[str, Any],
    over_src: SourceMap,
    prefix: KeyPath = (),
) -> tuple[dict[str, Any], SourceMap]:
    """``over`` on top of ``base``: mappings merge key by key, anything else is replaced.

    Returns new data and a new source map; neither input is modified.
    """
    data = copy.deepcopy(dict(base))
    sources = SourceMap(dict(base_src.entries))
    if () in over_src.entries and () not in sources.entries:
        sources.entries[()] = over_src.entries[()]
    _merge_into(data, sources, over, over_src, prefix)
    return data, sources


def _merge_into(
    data: dict[str, Any], sources: SourceMap, over: Mapping[str, Any], over_src: SourceMap, prefix: KeyPath
) -> None:
    for key, value in over.items():
        path = (*prefix, key)
        if isinstance(value, Mapping) and isinstance(data.get(key), Mapping):
            if path in over_src.entries:
                sources.entries[path] = over_src.entries[path]
            child = dict(data[key])
            _merge_into(child, sources, value, over_src, path)
            data[key] = child
            continue
        data[key] = copy.deepcopy(value)
        sub = SourceMap({k[len(path) :]: s for k, s in over_src.entries.items() if k[: len(path)] == path})
        sources.set_subtree(path, sub)


def set_dotted(data: dict[str, Any], sources: SourceMap, override: Override, prefix: KeyPath = ()) -> None:
    """Apply one override in place. A mapping value merges into a mapping; anything else replaces.

    Intermediate mappings are created as needed; walking through a non-mapping is an error.
    """
    node: dict[str, Any] = data
    parts = override.path
    for depth, part in enumerate(parts[:-1]):
        nxt = node.get(part)
        if nxt is None:
            nxt = {}
            node[part] = nxt
        elif not isinstance(nxt, dict):
            stem = ".".join(parts[: depth + 1])
            raise ConfigError(
                f"cannot set {override.key!r}: {stem!r} is {nxt!r}, not a mapping",
                file=override.source.file,
                line=override.source.line,
                field=override.key,
                value=override.value,
                fix=f"override {stem!r} itself, or a key that exists under it",
            )
        node = nxt
    leaf = parts[-1]
    full = (*prefix, *parts)
    if isinstance(override.value, Mapping) and isinstance(node.get(leaf), dict):
        _merge_into(node[leaf], sources, override.value, _flat(override.value, full, override.source), full)
        sources.entries[full] = override.source
        return
    node[leaf] = copy.deepcopy(override.value)
    sources.set_subtree(full, _flat(override.value, full, override.source, relative=True))


def _flat(value: Any, path: KeyPath, source: Source, *, relative: bool = False) -> SourceMap:
    """Every key path under ``value`` mapped to one source (a value written on one line)."""
    out = SourceMap()
    base: KeyPath = () if relative else path

    def walk(v: Any, p: KeyPath) -> None:
        out.entries[p] = source
        if isinstance(v, Mapping):
            for k, sub in v.items():
                walk(sub, (*p, str(k)))
        elif isinstance(v, list):
            for i, sub in enumerate(v):
                walk(sub, (*p, i))

    walk(value, base)
    return out


def check_key(key: str, source: Source, value: Any = None) -> None:
    if not _KEY.match(key):
        raise ConfigError(
            f"bad override key {key!r}",
            file=source.file,
            line=source.line,
            field=key,
            value=value,
            fix="use dotted names like scale.max_gen_len or knobs.loss.choice",
        )


def parse_cli_overrides(items: Iterable[str]) -> tuple[Override, ...]:
    """``["scale.max_gen_len=64", "seeds=[0, 1]"]`` -> overrides with YAML-typed values."""
    out: list[Override] = []
    for item in items:
        source = Source(f"{COMMAND_LINE} {item!r}")
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(
                f"bad override {item!r}: expected key=value",
                file=COMMAND_LINE,
                field=item,
                fix="write overrides as dotted.key=value, e.g. scale.max_gen_len=64",
            )
        check_key(key, source)
        value, _ = parse_yaml(text, source.file) if text.strip() else (None, None)
        out.append(Override(key, value, source))
    return tuple(out)


def overrides_from_mapping(
    mapping: Mapping[str, Any], sources: SourceMap, prefix: KeyPath
) -> tuple[Override, ...]:
    """A YAML ``{dotted.key: value}`` section (a sweep's ``overrides:``) as :class:`Override` s."""
    out = []
    for key, value in mapping.items():
        src = sources.get((*prefix, key)) or Source("<unknown>")
        check_key(str(key), src, value)
        out.append(Override(str(key), value, src))
    return tuple(out)
