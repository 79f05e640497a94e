"""Reading examples (one ``dict`` per record) from local files, by format name.

Three readers, selected by ``task.params.format`` (:data:`READERS`): JSON Lines, Parquet, and a
directory written by ``datasets.Dataset.save_to_disk`` / ``DatasetDict.save_to_disk``. Nothing is
ever downloaded. Every reader returns :class:`Records` in file order and raises
:class:`~scalerl.harness.errors.ConfigError` naming the file (and the line) on unreadable data; ``pyarrow``
and ``datasets`` are imported only when a file of theirs is read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scalerl.harness.errors import ConfigError

__all__ = ["READERS", "Records", "digest", "format_by_suffix", "is_placeholder", "read_records"]

SUFFIXES = {".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet"}


@dataclass(frozen=True)
class Records:
    """The records of one file or split, in file order, and typed access to their fields.

    ``lines`` holds the 1-based line of each record for line-oriented files; ``None`` means the
    records are rows of a table, located by their 0-based index. ``splits`` lists the splits of a
    ``DatasetDict`` directory and ``split`` the one read (``None`` for anything else).
    """

    source: str
    rows: tuple[dict[str, Any], ...]
    lines: tuple[int, ...] | None = None
    splits: tuple[str, ...] | None = None
    split: str | None = None

    def place(self, i: int) -> str:
        """Where record ``i`` is, for messages: ``data.jsonl:12``, or ``data/ split 'train' row 40
        (0-based)`` for a table."""
        if self.lines is not None:
            return f"{self.source}:{self.lines[i]}"
        split = f" split {self.split!r}" if self.split is not None else ""
        return f"{self.source}{split} row {i} (0-based)"

    def error(self, i: int, reason: str, param: str, value: object, fix: str | None = None) -> ConfigError:
        """A :class:`ConfigError` about record ``i``, blamed on ``task.params.<param>``."""
        line = self.lines[i] if self.lines is not None else None
        where = "" if line is not None else f"row {i} (0-based): "
        if self.split is not None:
            where = f"split {self.split!r} {where}"
        fix = fix or f"fix the record, or set task.params.{param} to one of its fields"
        return ConfigError(
            where + reason, file=self.source, line=line, field=f"task.params.{param}", value=value, fix=fix
        )

    def value(self, i: int, name: str, param: str) -> Any:
        """Field ``name`` of record ``i``; a missing or null field is an error listing the fields."""
        rec = self.rows[i]
        if rec.get(name) is None:
            state = "is null" if name in rec else "is missing"
            raise self.error(i, f"field {name!r} {state} (fields: {list(rec)})", param, name)
        return rec[name]

    def text(self, i: int, name: str, param: str) -> str:
        """Field ``name`` as text: strings as they are, numbers by ``repr`` (3 -> "3", 0.5 -> "0.5")."""
        value = self.value(i, name, param)
        if isinstance(value, str):
            return value
        if isinstance(value, int | float) and not isinstance(value, bool):
            return repr(value)
        raise self.error(
            i, f"field {name!r} is a {type(value).__name__}, not a string or number", param, name
        )


Reader = Callable[[Path, str | None, str], Records]
"""``reader(path, split, split_field)``: ``split`` picks a split of a ``DatasetDict`` (``None``: its
only one); files ignore it. ``split_field`` is the parameter an unknown split is blamed on."""


def is_placeholder(path: str) -> bool:
    """True for a path still holding a template placeholder such as ``<your MATH train.jsonl>``."""
    return re.search(r"<[^<>]*>", path) is not None


def format_by_suffix(path: str) -> str | None:
    """The format a file's suffix names (``None``: no known suffix; a directory is ``hf_disk``)."""
    return SUFFIXES.get(Path(path).suffix.lower())


def read_jsonl(path: Path, split: str | None, split_field: str) -> Records:
    rows: list[dict[str, Any]] = []
    lines: list[int] = []
    fix = "write one JSON object per line (JSON Lines; a JSON array is not read)"
    try:
        with path.open(encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as err:
                    raise ConfigError(
                        f"malformed JSON: {err.msg} (column {err.colno})", file=str(path), line=n, fix=fix
                    ) from None
                if not isinstance(obj, dict):
                    raise ConfigError(
                        f"expected a JSON object, got {type(obj).__name__}", file=str(path), line=n, fix=fix
                    )
                rows.append(obj)
                lines.append(n)
    except UnicodeDecodeError as err:
        raise ConfigError(f"not UTF-8 text: {err}", file=str(path), fix="save the file as UTF-8") from None
    return Records(str(path), tuple(rows), tuple(lines))


def read_parquet(path: Path, split: str | None, split_field: str) -> Records:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as err:
        raise ConfigError(
            f"not a readable Parquet file: {err}",
            file=str(path),
            fix="check the file, or set task.params.format",
        ) from None
    return Records(str(path), tuple(table.to_pylist()))


def read_hf_disk(path: Path, split: str | None, split_field: str) -> Records:
    try:
        import datasets
    except ImportError:
        raise ConfigError(
            "reading a datasets save_to_disk directory needs the `datasets` package",
            file=str(path),
            field="task.params.format",
            value="hf_disk",
            fix="pip install datasets",
        ) from None
    try:
        data = datasets.load_from_disk(str(path))
    except (FileNotFoundError, ValueError) as err:
        raise ConfigError(
            f"not a datasets save_to_disk directory: {err}",
            file=str(path),
            field="task.params.path",
            fix="point it at a directory written by Dataset.save_to_disk or DatasetDict.save_to_disk",
        ) from None
    splits = None
    if isinstance(data, datasets.DatasetDict):
        splits = tuple(data)
        if split is None and len(splits) != 1:
            raise ConfigError(
                f"a DatasetDict with several splits {list(splits)}: which one is meant?",
                file=str(path),
                field=split_field,
                fix="save the split alone, or point task.params.path here and select splits by name",
            )
        name = splits[0] if split is None else split
        if name not in data:
            raise ConfigError(
                f"no split {name!r} in this DatasetDict (splits: {list(splits)})",
                file=str(path),
                field=split_field,
                value=name,
                fix=f"use one of {list(splits)}",
            )
        data = data[name]
    return Records(str(path), tuple(data.to_list()), splits=splits, split=split if splits else None)


READERS: dict[str, Reader] = {"jsonl": read_jsonl, "parquet": read_parquet, "hf_disk": read_hf_disk}


def read_records(path: str, fmt: str, split: str | None, split_field: str) -> Records:
    """Read ``path`` (an existing file or directory) in format ``fmt`` (``auto``: by suffix)."""
    p = Path(path)
    if fmt == "auto":
        fmt = "hf_disk" if p.is_dir() else (format_by_suffix(path) or "")
        if not fmt:
            raise ConfigError(
                f"cannot tell the format of {p.name!r} from its suffix",
                field="task.params.format",
                value="auto",
                fix=f"name it {'/'.join(SUFFIXES)}, or set task.params.format to one of {list(READERS)}",
            )
    return READERS[fmt](p, split, split_field)


def digest(h: Any, path: str) -> None:
    """Feed the bytes of ``path`` into hash ``h`` (a ``hashlib`` object): a file's content, or for a
    directory every file in it, sorted by relative path, with that path. Moving the data keeps it."""
    p = Path(path)
    if p.is_dir():
        entries = sorted((f.relative_to(p).as_posix(), f) for f in p.rglob("*") if f.is_file())
    else:
        entries = [("", p)]
    for name, f in entries:
        h.update(f"{name}\0{f.stat().st_size}\0".encode())
        with f.open("rb") as fh:
            while chunk := fh.read(1 << 20):
                h.update(chunk)
