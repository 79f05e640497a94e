"""Every malformed recipe/sweep in tests/data/malformed/ fails through the real CLI entry with exit
code 3 (a configuration error), no traceback, and a message naming the file, line, field, value
and fix (expected.yaml)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from scalerl.harness.cli import main

CORPUS = Path(__file__).resolve().parents[2] / "data" / "malformed"
CASES: dict[str, dict[str, Any]] = yaml.safe_load((CORPUS / "expected.yaml").read_text())


def test_corpus_is_large_and_every_file_has_a_case() -> None:
    inputs = {p.name for p in CORPUS.glob("*.yaml")} - {"expected.yaml"}
    helpers = {n for n in inputs if n.startswith("_")}
    covered = {case.get("file", name) for name, case in CASES.items()}
    assert inputs - helpers - covered == set()
    assert len(CASES) >= 25


@pytest.mark.parametrize("name", sorted(CASES))
def test_malformed_input_gives_a_located_error(
    name: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    case = CASES[name]
    file = case.get("file", name)
    cmd = case.get("cmd", "config" if name.startswith("r-") else "plan")
    # Run from the corpus folder so messages carry the bare file names the cases expect.
    monkeypatch.chdir(CORPUS)
    code = main([cmd, file, *case.get("extra", [])])
    out, err = capsys.readouterr()
    assert code == 3, (out, err)
    assert "Traceback" not in err
    assert err.startswith("scalerl: error: ")
    assert err.count("\n") == 1, err  # one self-contained line
    for needle in case["contains"]:
        assert needle in err, f"{needle!r} not in {err!r}"
