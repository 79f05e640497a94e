"""The only import name is ``scalerl``: no file imports a top-level ``harness`` or ``db``.

Those generic names clash with a lab's own packages (issue 22): from a trainer repository with its
own ``db/``, a top-level ``import db`` inside the harness picked up the lab's module. The checkout
keeps the ``harness/`` and ``db/`` folders; they are imported as ``scalerl.harness`` and
``scalerl.db`` (``scalerl/harness`` and ``scalerl/db`` link to them).
"""

from __future__ import annotations

import ast
import itertools
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GENERIC = ("harness", "db")
# Not sources of this project: build output, caches, and scalerl/ (links to harness/, db/); any
# virtual environment (a folder with pyvenv.cfg: .venv, .venv-floors, ...) is skipped too.
SKIP = {".git", "build", "dist", "scalerl", "node_modules", "__pycache__", ".ipynb_checkpoints"}


def _sources() -> Iterator[tuple[str, str]]:
    """(where, python source) for every .py file and every notebook code cell of the checkout."""
    for dirpath, dirnames, filenames in os.walk(REPO):
        dirnames[:] = sorted(
            d
            for d in dirnames
            if d not in SKIP
            and not d.endswith((".egg-info", "_cache"))
            and not (Path(dirpath) / d / "pyvenv.cfg").exists()
        )
        for name in sorted(filenames):
            path = Path(dirpath) / name
            rel = path.relative_to(REPO)
            if name.endswith(".py"):
                yield str(rel), path.read_text()
            elif name.endswith(".ipynb"):
                for i, cell in enumerate(json.loads(path.read_text())["cells"]):
                    if cell["cell_type"] == "code":
                        lines = "".join(cell["source"]).splitlines()
                        # IPython magics and shell escapes are not Python.
                        yield (
                            f"{rel}[cell {i}]",
                            "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in lines),
                        )


def _generic(module: str) -> bool:
    return module.split(".")[0] in GENERIC


def _offences(where: str, source: str) -> Iterator[str]:
    for node in ast.walk(ast.parse(source, filename=where)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _generic(alias.name):
                    yield f"{where}:{node.lineno}: import {alias.name}"
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module and _generic(node.module):
                yield f"{where}:{node.lineno}: from {node.module} import ..."
        elif isinstance(node, ast.Call):
            # importlib.import_module("harness.x") / __import__("db")
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            arg = node.args[0] if node.args else None
            if (
                name in ("import_module", "__import__")
                and isinstance(arg, ast.Constant)
                and isinstance(arg.value, str)
                and _generic(arg.value)
            ):
                yield f"{where}:{node.lineno}: {name}({arg.value!r})"
        elif isinstance(node, ast.List | ast.Tuple):
            # [sys.executable, "-m", "harness", ...]
            for flag, target in itertools.pairwise(node.elts):
                if (
                    isinstance(flag, ast.Constant)
                    and flag.value == "-m"
                    and isinstance(target, ast.Constant)
                    and isinstance(target.value, str)
                    and _generic(target.value)
                ):
                    yield f"{where}:{node.lineno}: -m {target.value}"


def test_no_source_imports_a_generic_top_level_name() -> None:
    sources = list(_sources())
    walked = {where.split("[")[0] for where, _ in sources}
    # The walk reached every part of the checkout that imports the harness.
    for part in ("harness/cli/__init__.py", "db/store.py", "tests/conftest.py", "bench/fit.py"):
        assert part in walked
    assert any(w.endswith(".ipynb") for w in walked)
    offences = [o for where, source in sources for o in _offences(where, source)]
    assert offences == [], "import scalerl.harness / scalerl.db instead:\n" + "\n".join(offences)


def test_the_checker_sees_each_kind_of_offence() -> None:
    source = (
        "import db\nimport harness.rl as rl\nfrom harness.cli import main\nfrom db import queries\n"
        "import importlib\nimportlib.import_module('harness.api')\ncmd = ['python', '-m', 'harness']\n"
        "from scalerl.harness import client\nfrom scalerl import db as store\nfrom . import db\n"
        "db.open_store('x')\n"
    )
    assert [o.split(": ", 1)[1] for o in _offences("x.py", source)] == [
        "import db",
        "import harness.rl",
        "from harness.cli import ...",
        "from db import ...",
        "import_module('harness.api')",
        "-m harness",
    ]


def test_python_m_scalerl_harness_runs_from_anywhere_and_the_generic_names_are_not_installed(
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    helped = subprocess.run(
        [sys.executable, "-m", "scalerl.harness", "--help"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert helped.returncode == 0, helped.stderr
    assert helped.stdout.startswith("usage: scalerl ")
    assert "sweep" in helped.stdout and "train" in helped.stdout
    code = (
        "import importlib.util, sys, scalerl\n"
        "print([m for m in ('harness', 'db') if importlib.util.find_spec(m) is not None])\n"
        "print(sorted(m for m in sys.modules if m.startswith('scalerl')))"
    )
    probe = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, check=False
    )
    assert probe.returncode == 0, probe.stderr
    # Outside the checkout only `scalerl` is importable, and importing it imports nothing else.
    assert probe.stdout.splitlines() == ["[]", "['scalerl']"]
