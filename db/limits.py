"""What a value must fit to be stored: the schema's column sizes, checked before the first write.

PostgreSQL enforces ``VARCHAR(200)`` and ``INTEGER`` (int4); SQLite enforces neither. Without a
check of our own a 201-character metric name or a step past 2**31 - 1 is stored on SQLite and, on
PostgreSQL, fails the whole batch it travels in (every other point of the batch with it) deep in a
background writer, long after the caller was told the points were accepted. Every writer path (the
trainer's and the client's :class:`scalerl.db.writer.PointWriter`, the importers, run registration)
checks here instead, so both stores accept exactly the same values and a bad one fails alone, at
the call that brought it, with its own error.

The bounds are read from the models (:mod:`scalerl.db.models`), so a migration that widens a
column widens its check.
"""

from __future__ import annotations

from scalerl.db.models import Point, Run
from scalerl.harness.errors import StoreError

# VARCHAR lengths of the name columns (metric, variant, knob, alternative, sweep: all 200).
NAME_MAX: int = int(Point.__table__.c.metric.type.length)  # type: ignore[attr-defined]
RUN_ID_MAX: int = int(Run.__table__.c.run_id.type.length)  # type: ignore[attr-defined]
# ``point.step`` is INTEGER: int4 on PostgreSQL, so the largest step both stores hold.
STEP_MAX: int = 2**31 - 1


def name_problem(value: object, limit: int = NAME_MAX) -> str | None:
    """Why ``value`` cannot be a stored name (metric, variant, knob, alternative, sweep), or None."""
    if not isinstance(value, str):
        return f"is a {type(value).__name__}, not a string"
    if not value:
        return "is empty"
    if len(value) > limit:
        return f"is {len(value)} characters long, more than the store's {limit}"
    if "\x00" in value:
        return "contains a NUL character"
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as err:
            # A lone surrogate (a name decoded with errors="surrogateescape", or "\udc80" typed in):
            # no database encoding can hold it, and the driver fails the whole batch it rides in.
            return f"contains {value[err.start]!r}, a lone surrogate that no text encoding can store"
    return None


def check_name(value: object, what: str, *, limit: int = NAME_MAX, where: str = "") -> str:
    """``value`` if it fits a name column, else a StoreError naming ``what``, the value and the fix."""
    problem = name_problem(value, limit)
    if problem is None:
        return value  # type: ignore[return-value]  # name_problem checked it is a str
    shown = repr(value) if not isinstance(value, str) or len(value) <= 60 else repr(value[:57] + "...")
    prefix = f"{where}: " if where else ""
    raise StoreError(
        f"{prefix}{what} {shown} {problem} (fix: use a non-empty name of at most {limit} characters "
        "of valid text: no NUL, no lone surrogate)"
    )


def step_problem(step: int) -> str | None:
    """Why the integer ``step`` cannot be stored, or None."""
    if step < 0:
        return "is negative"
    if step > STEP_MAX:
        return f"is larger than the store's largest step {STEP_MAX} (2**31 - 1)"
    return None


# ``run.seed`` is INTEGER as well: a seed past int4 (an imported "1e30") fails at registration.
SEED_MAX: int = 2**31 - 1
# ``point.n`` (the samples behind a rate) is INTEGER too.
COUNT_MAX: int = 2**31 - 1
