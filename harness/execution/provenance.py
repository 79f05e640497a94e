"""What code a run ran: the trainer repository's git state and the versions that matter.

:func:`capture` returns a small JSON-able dict, stored on the run (``run.provenance``, schema
0006) by the attempt that ran it::

    {"repo": "/abs/path" | None,       # the git top level, None when there is none
     "commit": "40 hex" | None,        # HEAD; None without a repo or before the first commit
     "dirty": bool | None,             # uncommitted changes or untracked files; None: unknown
     "diff": "sha256:..." | None,      # hash of `git diff HEAD` + the untracked files; None when clean
     "versions": {"torch": "2.5.1", "transformers": None, ...}}   # None: not installed

plus ``"truncated": true`` when a bound below was reached (the hash then covers what was read,
so the same tree still gives the same hash) and ``"error"`` when git failed or timed out.

Which repository is the trainer's (:func:`code_root`): for the ``command`` runner the working
directory the sweep is submitted from (the command runs there); for the reference, ``trl`` and
``replay`` runners this package's own checkout, when the installed package is a tracked file of
one (an editable install), else none: a wheel is identified by its version alone.

Bounds (a capture runs once per submission, not per run, and must stay cheap on any tree): git
gets :data:`GIT_TIMEOUT_S` per call; the diff is hashed as it streams, up to :data:`MAX_DIFF_BYTES`;
untracked files (``.gitignore`` respected) count by name and size, with contents hashed for files
up to :data:`MAX_FILE_BYTES` and :data:`MAX_UNTRACKED_BYTES` in all, at most
:data:`MAX_UNTRACKED_FILES` names. The harness's own outputs (the state dir, a SQLite store, the
sweep file) are passed as ``exclude``: a sweep that writes its checkpoints inside the repository
would otherwise make the tree "change" with every run.

Versions come from :mod:`importlib.metadata`, never by importing torch or vllm.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

PACKAGES: tuple[str, ...] = ("torch", "transformers", "vllm", "trl", "scalerl-harness")
# The fields that say the code differs; ``repo`` (where the checkout lives) does not.
COMPARED: tuple[str, ...] = ("commit", "dirty", "diff")
GIT_TIMEOUT_S = 30.0
MAX_DIFF_BYTES = 64 << 20
MAX_FILE_BYTES = 1 << 20
MAX_UNTRACKED_BYTES = 16 << 20
MAX_UNTRACKED_FILES = 5000
_NAMES_CAP = 4 << 20  # bytes of `git ls-files --others` output read


def package_versions(names: Iterable[str] = PACKAGES) -> dict[str, str | None]:
    """Installed distribution versions (None when not installed), without importing them."""
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def _git_env() -> dict[str, str]:
    # GIT_OPTIONAL_LOCKS=0: `git diff` may refresh the index; it must never take index.lock in a
    # lab's checkout (a concurrent `git commit` there would fail on it).
    return {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0"}


def _git(args: Sequence[str], cwd: Path) -> str | None:
    """A short git command's stdout (stripped), or None when it fails."""
    try:
        done = subprocess.run(
            ["git", *args], cwd=cwd, env=_git_env(), capture_output=True, timeout=GIT_TIMEOUT_S,
            stdin=subprocess.DEVNULL, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.decode("utf-8", "surrogateescape").strip() if done.returncode == 0 else None


def _stream(
    args: Sequence[str], cwd: Path, sink: Callable[[bytes], None], cap: int
) -> tuple[bool, str | None]:
    """Feed a git command's stdout to ``sink`` in chunks, up to ``cap`` bytes; returns
    (truncated, error). The process is killed past the cap or after :data:`GIT_TIMEOUT_S`."""
    try:
        proc = subprocess.Popen(
            ["git", *args], cwd=cwd, env=_git_env(), stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except OSError as exc:
        return False, f"git {args[0]}: {exc}"
    timed_out = threading.Event()

    def kill() -> None:
        timed_out.set()
        proc.kill()

    timer = threading.Timer(GIT_TIMEOUT_S, kill)
    timer.start()
    read, truncated = 0, False
    try:
        assert proc.stdout is not None
        while chunk := proc.stdout.read(1 << 16):
            take = chunk[: max(0, cap - read)]
            sink(take)
            read += len(take)
            if len(take) < len(chunk):
                truncated = True
                proc.kill()
                break
    finally:
        timer.cancel()
        if proc.stdout is not None:
            proc.stdout.close()
        rc = proc.wait()
    if truncated:
        return True, None
    if timed_out.is_set():
        return False, f"git {args[0]} took longer than {GIT_TIMEOUT_S:g} s"
    return False, None if rc == 0 else f"git {args[0]} exited with status {rc}"


def _pathspec(top: Path, exclude: Iterable[Path]) -> list[str]:
    """``-- . :(exclude)rel ...`` for every excluded path inside ``top``."""
    spec = ["--", "."]
    for path in exclude:
        try:
            # Resolved, like git's top level: a checkout reached through a symlink still matches.
            rel = Path(path).resolve().relative_to(top)
        except ValueError:
            continue  # outside the repository: nothing to leave out
        if str(rel) != ".":
            spec.append(f":(exclude,literal){rel.as_posix()}")
    return spec


def _hash_untracked(top: Path, names: list[str], digest: Any) -> bool:
    """Add each untracked file's name, size and (bounded) contents; returns True if truncated."""
    budget, truncated = MAX_UNTRACKED_BYTES, len(names) > MAX_UNTRACKED_FILES
    for name in sorted(names)[:MAX_UNTRACKED_FILES]:
        path = top / name
        digest.update(b"\0untracked\0" + name.encode("utf-8", "surrogateescape") + b"\0")
        try:
            if path.is_symlink():
                digest.update(b"link:" + os.fsencode(os.readlink(path)))
                continue
            size = path.stat().st_size
            digest.update(str(size).encode())
            if size > MAX_FILE_BYTES or size > budget:
                truncated = True  # name and size only
                continue
            with path.open("rb") as fh:
                digest.update(fh.read(size))
            budget -= size
        except OSError:
            digest.update(b"unreadable")
    return truncated


def capture(
    cwd: str | Path | None = None, *, exclude: Iterable[Path] = (), anchor: Path | None = None
) -> dict[str, Any]:
    """The provenance of the code at ``cwd`` (default: the working directory); see the module
    docstring for the fields. ``anchor``: a file that must be tracked by the repository found
    (else the code is not that repository's: a package installed into a venv inside a lab's
    checkout). ``exclude``: paths whose changes are not code changes. Never raises for a
    missing git or a broken repository: those are recorded (``repo`` None, or ``error``)."""
    root = Path(cwd if cwd is not None else os.getcwd()).resolve()
    out: dict[str, Any] = {"repo": None, "commit": None, "dirty": None, "diff": None}
    top_text = _git(["rev-parse", "--show-toplevel"], root) if shutil.which("git") else None
    top = Path(top_text).resolve() if top_text else None
    if top is not None and anchor is not None:
        rel = os.path.relpath(anchor.resolve(), top)
        if rel.startswith("..") or _git(["ls-files", "--error-unmatch", "--", rel], top) is None:
            top = None
    if top is not None:
        out.update(_git_state(top, list(exclude)))
    out["versions"] = package_versions()
    return out


def _git_state(top: Path, exclude: list[Path]) -> dict[str, Any]:
    out: dict[str, Any] = {"repo": str(top)}
    commit = _git(["rev-parse", "--verify", "-q", "HEAD"], top)
    out["commit"] = commit or None
    # Before the first commit, the tracked files are diffed against the empty tree.
    base = commit or _git(["hash-object", "-t", "tree", "/dev/null"], top)
    spec = _pathspec(top, exclude)
    digest = hashlib.sha256()
    size = [0]

    def sink(chunk: bytes) -> None:
        size[0] += len(chunk)
        digest.update(chunk)

    diff_args = ["diff", "--binary", "--no-ext-diff", "--no-textconv", "--no-color", "--no-renames"]
    truncated, error = _stream([*diff_args, str(base), *spec], top, sink, MAX_DIFF_BYTES)
    raw: list[bytes] = []
    more, error2 = _stream(
        ["ls-files", "-z", "--others", "--exclude-standard", *spec], top, raw.append, _NAMES_CAP
    )
    names = [n for n in b"".join(raw).decode("utf-8", "surrogateescape").split("\0") if n]
    if more:
        names = names[:-1]  # the last name may be cut
    if names:
        truncated = _hash_untracked(top, names, digest) or truncated or more
    if error or error2:
        out.update(dirty=None, diff=None, error=error or error2)
        return out
    dirty = bool(size[0] or names)
    out.update(dirty=dirty, diff=f"sha256:{digest.hexdigest()}" if dirty else None)
    if truncated:
        out["truncated"] = True
    return out


def code_root(runner: str) -> tuple[Path, Path | None]:
    """(directory, anchor) whose repository holds the trainer of a ``runner`` (see the module
    docstring): the working directory for ``command``, this package for the others."""
    if runner == "command":
        return Path.cwd(), None
    import scalerl.harness

    init = Path(scalerl.harness.__file__).resolve()  # through the scalerl/harness symlink
    return init.parent, init


def for_runners(runners: Iterable[str], *, exclude: Iterable[Path] = ()) -> dict[str, dict[str, Any]]:
    """runner type -> its provenance, one :func:`capture` per distinct code root."""
    roots = {r: code_root(r) for r in dict.fromkeys(runners)}
    excluded = list(exclude)
    captured: dict[tuple[Path, Path | None], dict[str, Any]] = {}
    for root in roots.values():
        if root not in captured:
            captured[root] = capture(root[0], exclude=excluded, anchor=root[1])
    return {r: captured[root] for r, root in roots.items()}


def differences(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """(field, old, new) for every compared field that differs; ``[]`` when ``old`` is None
    (unknown is not "different": nothing says the code changed)."""
    if old is None:
        return []
    out = [(k, old.get(k), new.get(k)) for k in COMPARED if old.get(k) != new.get(k)]
    before, after = old.get("versions") or {}, new.get("versions") or {}
    out += [(k, before.get(k), after.get(k)) for k in PACKAGES if before.get(k) != after.get(k)]
    if any(k == "dirty" for k, _, _ in out):  # clean <-> dirty already says the diff changed
        out = [d for d in out if d[0] != "diff"]
    return out


def short(prov: Mapping[str, Any] | None) -> str:
    """One token for a table: ``1a2b3c4``, ``1a2b3c4+dirty``, ``no-git`` or ``unknown``."""
    if not prov:
        return "unknown"
    commit = prov.get("commit")
    if not commit:
        return "no-git" if prov.get("repo") is None else "no-commit" + ("+dirty" if prov.get("dirty") else "")
    return str(commit)[:7] + ("+dirty" if prov.get("dirty") else "") + ("?" if prov.get("error") else "")


def code_key(prov: Mapping[str, Any] | None) -> str | None:
    """What two runs must share to have run the same code (None: unknown): the compared git
    fields and every version, as one string."""
    if not prov:
        return None
    versions = prov.get("versions") or {}
    parts = [f"{k}={prov.get(k)}" for k in COMPARED] + [f"{k}={versions.get(k)}" for k in PACKAGES]
    return "|".join(parts)


def shown(field: str, value: Any) -> str:
    """A compared field's value, short: a commit's 7 hex digits, a diff hash's first 12."""
    if value is None:
        return "none"
    if field == "commit":
        return str(value)[:7]
    if field == "diff":
        return str(value).removeprefix("sha256:")[:12]
    return str(value)


def field_value(prov: Mapping[str, Any], field: str) -> Any:
    """A compared field of ``prov``: a git field, or a package's version."""
    return prov.get(field) if field in COMPARED else (prov.get("versions") or {}).get(field)


def describe(diffs: Sequence[tuple[str, Any, Any]]) -> str:
    """``commit 1a2b3c4 -> 5d6e7f8, torch 2.4.0 -> 2.5.1`` for :func:`differences`' output."""
    return ", ".join(f"{f} {shown(f, a)} -> {shown(f, b)}" for f, a, b in diffs)
