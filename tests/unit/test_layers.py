"""Layers point down: errors and db at the bottom, then the core packages, then api, then cli.

Every module of the package (``harness/`` and ``db/``, imported as ``scalerl.harness`` and
``scalerl.db``) sits in one layer of :data:`LAYERS` and may import only from its own layer or the
ones below; nothing imports :mod:`scalerl.harness.cli` but ``scalerl.harness.__main__`` (and the cli
itself). Inside ``analysis/`` the same holds between its subpackages (:data:`ANALYSIS_LAYERS`).
The check reads the source (every ``import`` statement, those inside functions and under
``TYPE_CHECKING`` included), so a violation fails here before it can make an import cycle at run
time. A module may not import a private (``_``-prefixed) name from another package either (within
one package modules may share them). The last tests plant violations in a scratch package and see
the check fail on each.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# (layer, module prefixes), bottom first. A module belongs to the layer of its longest prefix.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # Imports nothing of ours: the secret patterns every message is scrubbed with, the axes.
    ("base", ("scalerl.db.redaction", "scalerl.harness.axes", "scalerl.harness.argtypes")),
    ("errors", ("scalerl.harness.errors", "scalerl.harness.extras")),
    ("store", ("scalerl.db", "scalerl.harness.atomicio", "scalerl.harness.boundedio")),
    ("analysis", ("scalerl.harness.analysis",)),
    (
        "core",
        (
            "scalerl.harness.recipe",
            "scalerl.harness.execution",
            "scalerl.harness.importers",
            "scalerl.harness.report",
            "scalerl.harness.rl",
            "scalerl.harness.search",
            "scalerl.harness.optuna",
            "scalerl.harness.client",
            "scalerl.harness.client_trl",
            "scalerl.harness.lookup",
            "scalerl.harness.export",
        ),
    ),
    ("api", ("scalerl.harness.api",)),
    ("cli", ("scalerl.harness.cli",)),
    ("main", ("scalerl.harness.__main__",)),
)
# Inside analysis: the fit and the noise below what forecasts, judges and simulates with them.
ANALYSIS_LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("fit", ("scalerl.harness.analysis.fit", "scalerl.harness.analysis.noise")),
    ("groups", ("scalerl.harness.analysis.groups",)),
    ("verdicts", ("scalerl.harness.analysis.verdicts",)),
    ("forecast", ("scalerl.harness.analysis.forecast",)),
    ("sim", ("scalerl.harness.analysis.sim",)),
    ("face", ("scalerl.harness.analysis",)),
)
# The package faces (``scalerl``, ``scalerl.harness``: ``scalerl.Sweep`` and the exceptions) are
# outside the layers: each is the parent of every module below it, so importing one is free (it
# runs on any import of a submodule anyway), and what they re-export (the API) they import lazily,
# on first access. ``from scalerl import lazy_getattr`` is how every lazy package face is made.
FACADES = frozenset({"scalerl", "scalerl.harness"})
# Private names one package takes from another, from before this check (issue 35a left them to
# the packages' owners): the check fails on any new one, and on an entry here once it is gone.
KNOWN_PRIVATE = frozenset(
    {
        ("scalerl.harness.execution.runners.metrics_file", "scalerl.harness.importers.jsonl", "_first_keys"),
        ("scalerl.harness.search.launch", "scalerl.harness.execution.executors.slurm", "_require"),
    }
)


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    target: str  # the module imported (a name imported from a module counts as that module)
    names: tuple[str, ...]  # the names taken from it (empty for `import x`)
    where: str  # file:line


def modules(root: Path) -> dict[str, Path]:
    """Module name -> file for every .py under ``root``/harness and ``root``/db."""
    out: dict[str, Path] = {}
    for top in ("harness", "db"):
        for path in sorted((root / top).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(["scalerl", *parts])] = path
    return out


def imports(root: Path) -> Iterator[Import]:
    """Every import of a ``scalerl`` module made by a module under ``root``."""
    known = modules(root)
    for name, path in known.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(tree):
            where = f"{path.relative_to(root)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == "scalerl":
                        yield Import(name, alias.name, (), where)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*up, *([base] if base else [])])
                if base.split(".")[0] != "scalerl":
                    continue
                names = tuple(a.name for a in node.names)
                # `from pkg import mod` imports the module pkg.mod; `from mod import name` mod.
                subs = [n for n in names if f"{base}.{n}" in known]
                for n in subs:
                    yield Import(name, f"{base}.{n}", (), where)
                rest = tuple(n for n in names if n not in subs)
                if rest:
                    yield Import(name, base, rest, where)


def _layer(module: str, layers: Sequence[tuple[str, tuple[str, ...]]]) -> int | None:
    best: tuple[int, int] | None = None  # (prefix length, layer index)
    for i, (_, prefixes) in enumerate(layers):
        for p in prefixes:
            covers = module == p or (p not in FACADES and module.startswith(p + "."))
            if covers and (best is None or len(p) > best[0]):
                best = (len(p), i)
    return None if best is None else best[1]


def violations(root: Path) -> list[str]:
    """Every import under ``root`` that points up a layer, names no layer, or takes another
    module's private name; as ``file:line: module -> target (why)``."""
    out = []
    for imp in imports(root):
        private = [n for n in imp.names if n.startswith("_") and not n.startswith("__")]
        unknown = [n for n in private if (imp.module, imp.target, n) not in KNOWN_PRIVATE]
        if unknown and _package(imp.module) != _package(imp.target):
            out.append(f"{imp.where}: {imp.module} -> {imp.target} (private name(s) {', '.join(unknown)})")
        if imp.module in FACADES or imp.target in FACADES:
            continue
        mine, theirs = _layer(imp.module, LAYERS), _layer(imp.target, LAYERS)
        if mine is None or theirs is None:
            out.append(f"{imp.where}: {imp.module} -> {imp.target} (no layer: add it to LAYERS)")
        elif theirs > mine:
            up = f"{LAYERS[mine][0]} imports {LAYERS[theirs][0]}"
            out.append(f"{imp.where}: {imp.module} -> {imp.target} ({up}, a layer above it)")
        a_mine, a_theirs = _layer(imp.module, ANALYSIS_LAYERS), _layer(imp.target, ANALYSIS_LAYERS)
        if a_mine is not None and a_theirs is not None and a_theirs > a_mine:
            up = f"analysis/{ANALYSIS_LAYERS[a_mine][0]} imports analysis/{ANALYSIS_LAYERS[a_theirs][0]}"
            out.append(f"{imp.where}: {imp.module} -> {imp.target} ({up})")
    return out


def _package(module: str) -> str:
    """The (sub)package a module's private names are shared within: ``a.b.c`` -> ``a.b``."""
    return module.rpartition(".")[0]


def test_every_import_of_the_package_points_down_a_layer() -> None:
    found = violations(REPO)
    assert not found, "layering violations:\n" + "\n".join(found)


def test_the_known_private_imports_still_exist() -> None:
    """An entry of KNOWN_PRIVATE that was fixed must leave the list (it only ever shrinks)."""
    seen = {(i.module, i.target, n) for i in imports(REPO) for n in i.names}
    assert seen >= KNOWN_PRIVATE, f"fixed, drop from KNOWN_PRIVATE: {sorted(KNOWN_PRIVATE - seen)}"


def test_nothing_but_the_entry_point_imports_the_cli() -> None:
    users = sorted(
        {imp.module for imp in imports(REPO) if imp.target.startswith("scalerl.harness.cli")}
        - {m for m in modules(REPO) if m.startswith("scalerl.harness.cli")}
    )
    assert users == ["scalerl.harness.__main__"]


def _scratch(tmp_path: Path, files: dict[str, str]) -> Path:
    """A package tree under ``tmp_path`` shaped like the repository's (harness/, db/)."""
    base = {
        "harness/__init__.py": "",
        "harness/errors.py": "",
        "harness/analysis/__init__.py": "",
        "harness/analysis/fit/__init__.py": "",
        "harness/analysis/fit/curve.py": "",
        "harness/analysis/verdicts/__init__.py": "",
        "harness/analysis/verdicts/rule.py": "",
        "harness/api.py": "",
        "harness/cli/__init__.py": "def main() -> int:\n    return 0\n",
        "harness/__main__.py": "from scalerl.harness.cli import main\n",
        "db/__init__.py": "from scalerl.harness.errors import *\n",
    }
    for rel, text in (base | files).items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        # A core module reaching up into the CLI (what api.py and rl/toy.py once did), lazily.
        (
            {"harness/report/__init__.py": "def f():\n    from scalerl.harness.cli import main\n"},
            "harness/report/__init__.py:2: scalerl.harness.report -> scalerl.harness.cli "
            "(core imports cli, a layer above it)",
        ),
        # The bottom importing up (what db.redaction once did with harness.errors).
        (
            {"db/redaction.py": "from scalerl.harness.errors import ConfigError\n"},
            "db/redaction.py:1: scalerl.db.redaction -> scalerl.harness.errors (base imports errors, "
            "a layer above it)",
        ),
        # Under TYPE_CHECKING still counts.
        (
            {"harness/analysis/fit/bad.py": "if TYPE_CHECKING:\n    import scalerl.harness.api\n"},
            "harness/analysis/fit/bad.py:2: scalerl.harness.analysis.fit.bad -> scalerl.harness.api "
            "(analysis imports api, a layer above it)",
        ),
        # Inside analysis: the fit may not lean on the verdicts.
        (
            {"harness/analysis/fit/bad.py": "from scalerl.harness.analysis.verdicts import rule\n"},
            "harness/analysis/fit/bad.py:1: scalerl.harness.analysis.fit.bad -> "
            "scalerl.harness.analysis.verdicts.rule (analysis/fit imports analysis/verdicts)",
        ),
        # Another package's private name.
        (
            {"harness/api.py": "from scalerl.harness.analysis.fit.curve import _helper\n"},
            "harness/api.py:1: scalerl.harness.api -> scalerl.harness.analysis.fit.curve "
            "(private name(s) _helper)",
        ),
        # A package nobody placed in a layer.
        (
            {"harness/newpkg.py": "from scalerl.harness import errors\n"},
            "harness/newpkg.py:1: scalerl.harness.newpkg -> scalerl.harness.errors (no layer: add it "
            "to LAYERS)",
        ),
    ],
)
def test_the_check_fails_on_a_planted_violation(tmp_path: Path, files: dict[str, str], expected: str) -> None:
    assert violations(_scratch(tmp_path, {})) == []
    assert violations(_scratch(tmp_path, files)) == [expected]
