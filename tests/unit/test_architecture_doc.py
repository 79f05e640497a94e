"""docs/architecture.md is the map of the checkout: it names every package and module group that
exists, and nothing that does not.

Read from its "Layers" and "Packages and modules" tables: every backticked path there must exist
(a path relative to its row's package, like ``models.py`` in the ``db/`` row, or a glob like
``local_*.py``, too); every Python package under ``harness/``, ``db/`` and ``bench/`` must be named,
and so must every module at the top of ``harness/``, ``harness/analysis/`` and ``db/`` (by its path,
or by its file name in its package's row). The last test plants a missing and an unknown package
in a scratch tree and sees the check report both.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.unit.execution.helpers import REPO

DOC = REPO / "docs" / "architecture.md"
ROOTS = ("harness", "db", "bench", "scalerl", "tests")  # a path token starts with one of these
PACKAGE_ROOTS = ("harness", "db", "bench")
MODULE_GROUPS = ("harness", "harness/analysis", "db")  # every module directly inside must be named
TABLES = ("## Layers", "## Packages and modules")


def _rows(doc: str) -> list[tuple[list[str], str]]:
    """(first-cell tokens, the whole row) for each row of the checked tables."""
    rows = []
    for title in TABLES:
        start = doc.index(title)
        end = doc.find("\n## ", start + len(title))
        for line in doc[start : end if end > 0 else None].splitlines():
            if not line.startswith("| ") or line.startswith("|---"):
                continue
            first = line.split(" | ", 1)[0]
            rows.append((re.findall(r"`([^`]+)`", first), line))
    return rows


def _is_path(token: str) -> bool:
    return bool(re.fullmatch(r"[\w./*-]+", token)) and (token.endswith((".py", "/", ".json")) or "*" in token)


def check(doc: str, repo: Path) -> list[str]:
    """Every problem with ``doc`` as a map of ``repo``; empty when the map is true."""
    problems: list[str] = []
    named: set[str] = set()  # paths (files, and dirs with a trailing /) the doc names
    for first, line in _rows(doc):
        anchors = [t for t in first if _is_path(t) and t.endswith("/")]
        for token in re.findall(r"`([^`]+)`", line):
            if not _is_path(token):
                continue
            # A token under a root is a path; else it is relative to the row's package(s):
            # `models.py` in the db/ row, `tasks/` in the harness/rl/ row.
            rooted = token.split("/", 1)[0] in ROOTS
            candidates = [token] if rooted else [a + token for a in anchors]
            hits = [c for c in candidates if list(repo.glob(c.rstrip("/")))]
            if not hits:
                problems.append(f"names {token!r}, which does not exist ({line[:60]}...)")
            for c in hits:
                named.add(c)
                named.update(
                    str(p.relative_to(repo)) + ("/" if p.is_dir() else "") for p in repo.glob(c.rstrip("/"))
                )
    for root in PACKAGE_ROOTS:
        for init in sorted((repo / root).rglob("__init__.py")):
            pkg = str(init.parent.relative_to(repo)) + "/"
            if "__pycache__" not in pkg and "/versions/" not in pkg and pkg not in named:
                problems.append(f"does not name the package {pkg}")
    for group in MODULE_GROUPS:
        for mod in sorted((repo / group).glob("*.py")):
            rel = str(mod.relative_to(repo))
            if mod.name != "__init__.py" and rel not in named:
                problems.append(f"does not name the module {rel}")
    return problems


def test_the_architecture_doc_names_exactly_what_exists() -> None:
    assert check(DOC.read_text(), REPO) == []


def test_the_check_sees_a_missing_and_an_unknown_package(tmp_path: Path) -> None:
    for path in ("harness/__init__.py", "harness/errors.py", "harness/new/__init__.py", "db/__init__.py"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    (tmp_path / "harness" / "analysis").mkdir()
    doc = (
        "## Layers\n\n| layer | modules |\n|---|---|\n| errors | `harness/errors.py` |\n\n"
        "## Packages and modules\n\n| path | owns |\n|---|---|\n"
        "| `db/` | the store (`store.py`) |\n| `harness/gone/` | was here |\n\n## Other\n"
    )
    problems = check(doc, tmp_path)
    assert problems == [
        "names 'store.py', which does not exist (| `db/` | the store (`store.py`) |...)",
        "names 'harness/gone/', which does not exist (| `harness/gone/` | was here |...)",
        "does not name the package harness/",
        "does not name the package harness/new/",
    ]
