"""Provenance capture against real git repositories (subprocess git in a temp folder): clean,
dirty (tracked and untracked), ignored and excluded files, no repository, bounds, comparison."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from scalerl.harness.execution import provenance
from scalerl.harness.execution.codechange import mixed_warning, versions_in
from tests.unit.execution.helpers import git


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "lab"
    root.mkdir()
    git(root, "init", "-q")
    (root / "train.py").write_text("print('train')\n")
    (root / ".gitignore").write_text("outputs/\n")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "first")
    return root


def test_a_clean_checkout_records_its_commit_and_no_diff(repo: Path) -> None:
    got = provenance.capture(repo)
    assert got["repo"] == str(repo.resolve())
    assert got["commit"] == git(repo, "rev-parse", "HEAD") and len(got["commit"]) == 40
    assert (got["dirty"], got["diff"]) == (False, None)
    assert set(got["versions"]) == set(provenance.PACKAGES)
    assert got["versions"]["scalerl-harness"] is not None
    # from a subfolder: the same repository
    (repo / "sub").mkdir()
    assert provenance.capture(repo / "sub")["commit"] == got["commit"]


def test_dirty_trees_hash_their_diff_and_untracked_files(repo: Path) -> None:
    (repo / "train.py").write_text("print('train v2')\n")
    one = provenance.capture(repo)
    assert one["dirty"] is True and one["diff"].startswith("sha256:")
    assert provenance.capture(repo)["diff"] == one["diff"]  # same tree, same hash
    (repo / "train.py").write_text("print('train v3')\n")
    two = provenance.capture(repo)
    assert two["diff"] != one["diff"] and two["commit"] == one["commit"]
    # staged counts too (git diff HEAD covers the index)
    git(repo, "add", "train.py")
    assert provenance.capture(repo)["diff"] == two["diff"]
    git(repo, "reset", "-q", "--hard")
    assert provenance.capture(repo)["dirty"] is False
    # an untracked file: by name and contents
    (repo / "new_loss.py").write_text("A = 1\n")
    three = provenance.capture(repo)
    (repo / "new_loss.py").write_text("A = 2\n")
    four = provenance.capture(repo)
    assert three["dirty"] is True and four["dirty"] is True and three["diff"] != four["diff"]
    assert provenance.differences(three, four) == [("diff", three["diff"], four["diff"])]


def test_ignored_and_excluded_paths_are_not_code(repo: Path) -> None:
    (repo / "outputs").mkdir()
    (repo / "outputs" / "ckpt.bin").write_bytes(b"\0" * 100)  # .gitignore'd
    (repo / ".scalerl" / "runs").mkdir(parents=True)
    (repo / ".scalerl" / "runs" / "spec.json").write_text("{}")
    (repo / "scalerl.db").write_bytes(b"db")
    got = provenance.capture(repo, exclude=[repo / ".scalerl", repo / "scalerl.db", Path("/elsewhere")])
    assert (got["dirty"], got["diff"]) == (False, None)
    assert provenance.capture(repo)["dirty"] is True  # without the exclusions they count
    link = repo.parent / "lab-link"  # a checkout reached through a symlink: the same exclusions hold
    link.symlink_to(repo)
    got = provenance.capture(link, exclude=[link / ".scalerl", link / "scalerl.db"])
    assert (got["repo"], got["dirty"]) == (str(repo.resolve()), False)


def test_no_repository_and_an_untracked_anchor_record_no_git(tmp_path: Path, repo: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    got = provenance.capture(plain)
    assert {k: got[k] for k in ("repo", "commit", "dirty", "diff")} == dict.fromkeys(
        ("repo", "commit", "dirty", "diff")
    )
    assert provenance.short(got) == "no-git"
    # a package installed into an ignored venv inside a checkout is not that checkout's code
    pkg = repo / "outputs" / "site-packages" / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    assert provenance.capture(pkg, anchor=pkg / "__init__.py")["repo"] is None
    assert provenance.capture(repo, anchor=repo / "train.py")["repo"] == str(repo.resolve())


def test_a_repository_before_its_first_commit(tmp_path: Path) -> None:
    root = tmp_path / "fresh"
    root.mkdir()
    git(root, "init", "-q")
    (root / "a.py").write_text("x = 1\n")
    got = provenance.capture(root)
    assert got["commit"] is None and got["dirty"] is True and got["diff"].startswith("sha256:")
    assert provenance.short(got) == "no-commit+dirty"


def test_reads_are_bounded_and_still_deterministic(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(provenance, "MAX_FILE_BYTES", 10)
    monkeypatch.setattr(provenance, "MAX_DIFF_BYTES", 64)
    (repo / "big.bin").write_bytes(b"x" * 1000)
    (repo / "train.py").write_text("print('changed')\n" * 50)
    one = provenance.capture(repo)
    assert one["truncated"] is True and one["dirty"] is True
    assert provenance.capture(repo)["diff"] == one["diff"]
    (repo / "big.bin").write_bytes(b"y" * 1001)  # a size change is still seen past the bound
    assert provenance.capture(repo)["diff"] != one["diff"]


def test_versions_come_from_metadata_without_importing_the_packages() -> None:
    assert provenance.package_versions(["scalerl-harness", "surely-not-installed-xyz"]) == {
        "scalerl-harness": provenance.package_versions(["scalerl-harness"])["scalerl-harness"],
        "surely-not-installed-xyz": None,
    }
    code = (
        "import sys; from scalerl.harness.execution.provenance import capture; "
        "v = capture('/')['versions']; print(v['torch'] is not None, 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    # Whether torch is installed (the floors venv has none), and never imported to find out.
    assert out.split() == [str(importlib.util.find_spec("torch") is not None), "False"]


def test_differences_short_ids_and_mixed_versions(repo: Path) -> None:
    old = provenance.capture(repo)
    (repo / "train.py").write_text("print('v2')\n")
    git(repo, "commit", "-q", "-am", "v2")
    new = provenance.capture(repo)
    # One torch build for both (the suite also runs in a venv without torch: version None).
    old, new = ({**p, "versions": {**p["versions"], "torch": "2.13.0"}} for p in (old, new))
    diffs = provenance.differences(old, new)
    assert diffs == [("commit", old["commit"], new["commit"])]
    assert provenance.describe(diffs) == f"commit {old['commit'][:7]} -> {new['commit'][:7]}"
    bumped = {**new, "versions": {**new["versions"], "torch": "9.9"}}
    assert [d[0] for d in provenance.differences(new, bumped)] == ["torch"]
    assert provenance.differences(None, new) == []  # unknown is not "changed"
    assert provenance.short(new) == new["commit"][:7] and provenance.short(None) == "unknown"
    assert versions_in([old, old, new, None]) == [
        (old["commit"][:7], 2), (new["commit"][:7], 1), ("unknown", 1)
    ]  # fmt: skip
    # one commit, two torch builds: the labels say what differs
    assert versions_in([new, bumped]) == [
        (f"{new['commit'][:7]} (torch {new['versions']['torch']})", 1),
        (f"{new['commit'][:7]} (torch 9.9)", 1),
    ]
    warning = mixed_warning([old, new, None])
    assert warning is not None and "mixes 2 code versions" in warning and "--on-code-change rerun" in warning
    assert mixed_warning([new, new, None]) is None
