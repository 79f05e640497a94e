"""Print pip constraints that pin every declared lower bound: ``name==X`` for each ``name>=X``.

Read from pyproject.toml, so the floors CI installs can never drift from what the package
declares. Covers the base ``dependencies`` and each extra named on the command line (default:
``analysis``); a requirement there without a ``>=`` floor is an error (an untested range), and a
reference to this package's own extras (``scalerl-harness[analysis]``) is skipped.

    python3 .ci/floors_constraints.py [EXTRA ...] > floors.txt
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# name, optional [extras], then the specifiers (an environment marker after ";" is dropped).
REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*([^;]*)")


def floors(extras: list[str]) -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    optional = project.get("optional-dependencies", {})
    unknown = [e for e in extras if e not in optional]
    if unknown:
        raise SystemExit(f"floors: no extra {unknown} in pyproject.toml (it has {sorted(optional)})")
    requirements = list(project["dependencies"]) + [r for e in extras for r in optional[e]]
    pins: dict[str, str] = {}
    for req in requirements:
        match = REQUIREMENT.match(req)
        if match is None:
            raise SystemExit(f"floors: cannot read the requirement {req!r}")
        name, _, specs = match.groups()
        if name.lower().replace("_", "-") == project["name"]:
            continue  # scalerl-harness[analysis]: the extra's own lines are read directly
        floor = [s.strip()[2:].strip() for s in specs.split(",") if s.strip().startswith(">=")]
        if len(floor) != 1:
            raise SystemExit(f"floors: {req!r} declares no single '>=' lower bound to test")
        if pins.get(name, floor[0]) != floor[0]:
            raise SystemExit(f"floors: {name} has two floors, {pins[name]} and {floor[0]}")
        pins[name] = floor[0]
    return [f"{name}=={version}" for name, version in pins.items()]


if __name__ == "__main__":
    print("\n".join(floors(sys.argv[1:] or ["analysis"])))
