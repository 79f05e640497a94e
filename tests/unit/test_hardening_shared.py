"""Issue 40, a shared machine and a shared store: another user's planted files, output paths that
are not files, escape sequences in names, secrets in error text and imported configs.

Each test names the failure it guards (the hostile input the third round found)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np
import pytest

from scalerl import db
from scalerl.db import RunRecord, queries
from scalerl.db.redaction import scrub
from scalerl.harness.atomicio import NotRegularFileError, write_atomic
from scalerl.harness.cli import main
from scalerl.harness.errors import ExecutionError
from scalerl.harness.execution.executors import local_files
from scalerl.harness.importers.base import ImportedCurve
from scalerl.harness.importers.ingest import import_curves


@pytest.fixture
def slots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "slots"
    monkeypatch.setenv(local_files.ENV_SLOT_DIR, str(folder))
    return folder


# ----------------------------------------------------------------- local slot locks


def test_a_symlink_planted_among_the_slot_locks_is_never_followed(slots: Path, tmp_path: Path) -> None:
    """Was: /tmp/scalerl-local-slots-<uid>/slot0.lock -> a victim file, truncated and overwritten."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    local_files.slot_dir()  # made private
    (slots / "slot0.lock").symlink_to(victim)
    with pytest.raises(ExecutionError, match="is a symlink; it is never followed"):
        local_files.acquire_slot(2)
    assert victim.read_text() == "precious"


def test_a_slot_lock_is_opened_without_truncating_it(slots: Path) -> None:
    folder = local_files.slot_dir()
    (folder / "slot0.lock").write_text('{"held": "by someone"}')
    fh = local_files.acquire_slot(1)
    assert fh is not None
    try:
        assert fh.name == str(folder / "slot0.lock")  # the holder is recorded by the slot's name
        assert (folder / "slot0.lock").read_text() == '{"held": "by someone"}'
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    finally:
        fh.close()


@pytest.mark.parametrize("problem", ["symlink", "mode", "owner"])
def test_a_slot_folder_someone_else_could_touch_is_refused(
    slots: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, problem: str
) -> None:
    if problem == "symlink":
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir(mode=0o700)
        slots.symlink_to(elsewhere)
        match = "is a symlink"
    elif problem == "mode":
        slots.mkdir()
        slots.chmod(0o777)
        match = "group or others may enter it"
    else:
        slots.mkdir(mode=0o700)
        monkeypatch.setattr(local_files.os, "getuid", lambda: os.geteuid() + 4242)
        match = "is owned by uid"
    with pytest.raises(ExecutionError, match=match):
        local_files.slot_dir()


def test_the_default_slot_folder_is_private_and_never_under_tmp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(local_files.ENV_SLOT_DIR, raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    folder = local_files.slot_dir()
    assert folder.parent == tmp_path / "cache" / "scalerl"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700 and folder.stat().st_uid == os.getuid()


# ----------------------------------------------------------------- files that are not files


def test_an_atomic_write_never_replaces_a_fifo_or_a_device(tmp_path: Path) -> None:
    fifo = tmp_path / "report.html"
    os.mkfifo(fifo)
    with pytest.raises(NotRegularFileError, match="is a FIFO"):
        write_atomic(fifo, "<html>")
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    with pytest.raises(NotRegularFileError, match="is a character device"):
        write_atomic(Path("/dev/null"), "x")
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode)
    link = tmp_path / "link.html"  # a symlink to a regular file is written through, and stays
    target = tmp_path / "real.html"
    target.write_text("old")
    link.symlink_to(target)
    write_atomic(link, "new")
    assert link.is_symlink() and target.read_text() == "new"


@pytest.mark.parametrize("target", ["fifo", "/dev/null"])
def test_report_onto_a_fifo_or_device_is_refused_before_reading_the_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], target: str
) -> None:
    out = tmp_path / "r.html" if target == "fifo" else Path(target)
    if target == "fifo":
        os.mkfifo(out)
    code = main(["report", "s", "-o", str(out), "--db", f"sqlite:///{tmp_path / 'none.db'}"])
    assert code == 3 and "not a regular file; it is never replaced" in capsys.readouterr().err
    assert not out.is_file()


# ----------------------------------------------------------------- escape sequences


EVIL = "evil\x1b]0;PWNED\x07\x1b[2J\x9b31m\u202e"


def test_escape_sequences_in_names_reach_no_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    store = db.open_store(url)
    store.ensure_sweep(EVIL, {})
    store.register_run(RunRecord("r-s0", EVIL, "v\x1b[31m", 0, {}, "h", knob="k\x1b[1m", alternative="a"))
    attempt = store.start_attempt("r-s0")
    store.finish_run("r-s0", attempt, "failed", error="boom \x1b]52;c;ZXZpbA==\x07")
    store.close()
    for argv in (["ls"], ["status", EVIL], ["status", "nope"]):
        main([*argv, "--db", url])
        seen = capsys.readouterr()
        text = seen.out + seen.err
        assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text and "\u202e" not in text
    main(["status", EVIL, "--db", url])
    out = capsys.readouterr().out
    assert "evil\\x1b]0;PWNED\\x07" in out and "boom \\x1b]52;c;" in out  # shown, not executed


# ----------------------------------------------------------------- secrets


SECRETS = [
    ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJlMTIz", "eyJhbGci"),
    ("curl -H 'Authorization: Basic dXNlcjpodW50ZXIy' https://x", "dXNlcjpodW50ZXIy"),
    ("train.py --password hunter2 --lr 3e-4", "hunter2"),
    ("train.py --api-key=s3cr3t-value", "s3cr3t-value"),
    ("clone https://ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789@github.com/x", "ghp_aBcD"),
    ("token github_pat_11AAAAAAA0aaaaaaaaaaaa_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "github_pat_11"),
    ("openai.AuthenticationError: sk-proj-AbCdEfGhIjKlMnOpQrSt1234", "sk-proj-AbCd"),
    ("HF_HUB hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123", "hf_AbCd"),
    ("botocore: AKIAIOSFODNN7EXAMPLE denied", "AKIAIOSFODNN7EXAMPLE"),
    ("aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCY", "wJalrXUtnFEMI"),
]


@pytest.mark.parametrize(("text", "secret"), SECRETS)
def test_error_text_is_stored_without_its_secrets(tmp_path: Path, text: str, secret: str) -> None:
    """Was: a run's error kept Authorization headers, --password X and tokens, for every reader."""
    assert secret not in scrub(text)
    store = db.open_store(f"sqlite:///{tmp_path / 's.db'}")
    store.register_run(RunRecord("r-s0", "s", "v", 0, {}, "h"))
    attempt = store.start_attempt("r-s0")
    store.finish_run("r-s0", attempt, "failed", error=f"Traceback...\n{text}")
    run = store.get_run("r-s0")
    assert run is not None and run.error is not None and secret not in run.error
    events = queries.events(store, "s")
    assert all(secret not in str(d) for d in events["detail"])


def test_plain_text_keeps_its_words() -> None:
    for text in ("--max-tokens 512 --tokenizer gpt2 --lr 3e-4", "the basic run failed: token count 5",
                 "commit 0123456789abcdef0123456789abcdef01234567", "pad_token=<pad>"):  # fmt: skip
        assert scrub(text) == text


def test_imported_params_and_tags_are_stored_with_their_secrets_masked(tmp_path: Path) -> None:
    """Was: ``import mlflow:`` copied a db_url's password and an API key into run configs."""
    steps = np.arange(1, 4, dtype=np.int64)
    curve = ImportedCurve(
        "mlflow:postgresql://lab:hunter2@db/mlflow", "r1", "val/pass_rate", "step", steps,
        steps.astype(float), np.array([0.1, 0.2, 0.3]),
        params={"db_url": "postgresql://lab:hunter2@db/runs", "api_key": "k-123456", "lr": "3e-4",
                "wandb_token": "abcd1234", "max_tokens": "512"},
        tags={"mlflow.note": "export OPENAI_API_KEY=sk-proj-AbCdEfGhIjKlMnOpQrSt1234"},
    )  # fmt: skip
    store = db.open_store(f"sqlite:///{tmp_path / 's.db'}")
    import_curves(store, [curve], "imp")
    (config,) = queries.run_configs(store, "imp").values()
    text = str(config)
    for secret in ("hunter2", "k-123456", "abcd1234", "sk-proj-AbCd"):
        assert secret not in text
    assert config["params"]["lr"] == "3e-4" and config["params"]["max_tokens"] == "512"
    assert config["params"]["db_url"] == "postgresql://lab:***@db/runs"


def test_a_secret_named_by_a_sibling_field_is_masked() -> None:
    """Second pass: a Kubernetes-style env entry names its secret in ``name``, not in its key."""
    from scalerl.db.redaction import redact_value

    env = [{"name": "WANDB_API_KEY", "value": "0123456789abcdef0123456789abcdef01234567"},
           {"name": "OMP_NUM_THREADS", "value": "4"}]  # fmt: skip
    assert redact_value({"env": env}) == {
        "env": [{"name": "WANDB_API_KEY", "value": "***"}, {"name": "OMP_NUM_THREADS", "value": "4"}]
    }
