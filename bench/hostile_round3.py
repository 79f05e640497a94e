"""Issue 40's second hostile pass: new inputs of each failure class, against this checkout.

Each probe tries one input a hostile (or careless) user could give, in the class issue 40 found
failures in, and says whether the harness held (a clear refusal or the right result: no
traceback, no silent loss, no lie, no secret, no escape, no stray process). Nothing here was in
the first pass or in the tests written for it. Run it, read the counts:

    python -m bench.hostile_round3            # SQLite probes + a throwaway PostgreSQL
    python -m bench.hostile_round3 --no-pg    # without the PostgreSQL class

Exit status: the number of probes that did not hold (0: every one held).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
import time
import traceback
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS: list[tuple[str, str, bool, str]] = []
Probe = Callable[[Path], tuple[bool, str]]
PROBES: list[tuple[str, str, Probe]] = []


def probe(cls: str) -> Callable[[Probe], Probe]:
    def deco(fn: Probe) -> Probe:
        PROBES.append((cls, fn.__name__, fn))
        return fn

    return deco


def cli(
    *argv: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scalerl.harness", *argv], capture_output=True, text=True, timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}, errors="surrogateescape",
    )  # fmt: skip


def clean(out: str) -> bool:
    """No traceback and no raw escape on a terminal stream."""
    return "Traceback" not in out and "\x1b" not in out and "\x9b" not in out


def fresh(tmp: Path, name: str = "s.db") -> str:
    return f"sqlite:///{tmp / name}"


# ================================================================ 1. another user on the machine


@probe("access: machine")
def slot_lock_is_a_fifo(tmp: Path) -> tuple[bool, str]:
    from scalerl.harness.errors import ExecutionError
    from scalerl.harness.execution.executors import local_files

    os.environ[local_files.ENV_SLOT_DIR] = str(tmp / "slots")
    folder = local_files.slot_dir()
    os.mkfifo(folder / "slot0.lock")
    try:
        local_files.acquire_slot(1)  # O_NONBLOCK: must not hang on the FIFO
    except ExecutionError as err:
        return "not a regular file" in str(err), str(err)[:100]
    return False, "a FIFO was taken as a lock file"


@probe("access: machine")
def slot_lock_owned_by_another_uid(tmp: Path) -> tuple[bool, str]:
    from scalerl.harness.errors import ExecutionError
    from scalerl.harness.execution.executors import local_files

    if os.geteuid() != 0:
        return True, "skipped (needs root to chown)"
    os.environ[local_files.ENV_SLOT_DIR] = str(tmp / "slots2")
    folder = local_files.slot_dir()
    lock = folder / "slot0.lock"
    lock.write_text("{}")
    os.chown(lock, 65534, 65534)
    try:
        local_files.acquire_slot(1)
    except ExecutionError as err:
        return "owned by uid 65534" in str(err), str(err)[:100]
    return False, "another uid's lock file was used"


@probe("access: machine")
def slot_folder_is_a_dangling_symlink(tmp: Path) -> tuple[bool, str]:
    from scalerl.harness.errors import ExecutionError
    from scalerl.harness.execution.executors import local_files

    link = tmp / "slots3"
    link.symlink_to(tmp / "nowhere")
    os.environ[local_files.ENV_SLOT_DIR] = str(link)
    try:
        local_files.slot_dir()
    except ExecutionError as err:
        return "symlink" in str(err), str(err)[:100]
    return False, "followed a dangling symlink"


@probe("access: machine")
def gpu_lock_through_a_symlink(tmp: Path) -> tuple[bool, str]:
    from scalerl.harness.errors import ExecutionError
    from scalerl.harness.execution.executors import local_files

    os.environ[local_files.ENV_SLOT_DIR] = str(tmp / "slots4")
    victim = tmp / "victim"
    victim.write_text("keep")
    (local_files.slot_dir() / "gpu-0.lock").symlink_to(victim)
    try:
        fh = local_files.try_lock(local_files.slot_dir() / "gpu-0.lock")
        if fh is not None:
            fh.close()
    except ExecutionError:
        pass
    return victim.read_text() == "keep", "victim intact" if victim.read_text() == "keep" else "victim changed"


# ================================================================ 3. silent loss


def _writer(tmp: Path) -> Any:
    from scalerl import db
    from scalerl.db import RunRecord

    store = db.open_store(fresh(tmp))
    store.register_run(RunRecord("r-s0", "s", "v", 0, {}, "h"))
    return store, store.writer("r-s0", store.start_attempt("r-s0"), spool=tmp / "spool")


def _add_refused(tmp: Path, metrics: dict[str, Any], n: dict[str, Any] | None = None,
                 compute: dict[str, Any] | None = None, step: Any = 1) -> tuple[bool, str]:  # fmt: skip
    from scalerl import db
    from scalerl.db import queries

    store, w = _writer(tmp)
    try:
        w.add(step, metrics, compute or {"flops": 1.0}, n=n)
        refused = ""
    except db.StoreError as err:
        refused = str(err)
    w.add(2, {"m": 0.5}, {"flops": 2.0})
    w.close()
    later = queries.curves(store, "s")
    kept = 2 in set(later["step"]) and w.left_in_spool is None
    return bool(refused) and kept, (refused or "accepted")[:100]


@probe("silent loss")
def numpy_str_value(tmp: Path) -> tuple[bool, str]:
    return _add_refused(tmp, {"m": np.str_("0.5")})


@probe("silent loss")
def high_surrogate_metric(tmp: Path) -> tuple[bool, str]:
    return _add_refused(tmp, {"m\ud800x": 0.5})


@probe("silent loss")
def n_just_past_int4(tmp: Path) -> tuple[bool, str]:
    return _add_refused(tmp, {"m": 0.5}, n={"m": 2**31})


@probe("silent loss")
def numpy_int64_n_past_int4(tmp: Path) -> tuple[bool, str]:
    return _add_refused(tmp, {"m": 0.5}, n={"m": np.int64(2**40)})


@probe("silent loss")
def text_compute(tmp: Path) -> tuple[bool, str]:
    return _add_refused(tmp, {"m": 0.5}, compute={"flops": "1e3"})


@probe("silent loss")
def bytearray_value(tmp: Path) -> tuple[bool, str]:
    return _add_refused(tmp, {"m": bytearray(b"1")})


@probe("silent loss")
def numpy_uint64_step_past_int4(tmp: Path) -> tuple[bool, str]:
    return _add_refused(tmp, {"m": 0.5}, step=np.uint64(2**40))


@probe("silent loss")
def spool_of_another_store_by_id_only(tmp: Path) -> tuple[bool, str]:
    """A spool line that names another store's id (its URL redacted away): still refused."""
    from scalerl import db
    from scalerl.db import RunRecord, queries
    from scalerl.db.spool import replay

    store = db.open_store(fresh(tmp))
    store.register_run(RunRecord("r-s0", "s", "v", 0, {}, "h"))
    store.start_attempt("r-s0")
    folder = tmp / "spool"
    folder.mkdir()
    line = {"v": 2, "run_id": "r-s0", "attempt": 1, "store": str(uuid.uuid4()),
            "rows": [[1, "m", 0.5, None, 1.0, None, None, None, None, None]]}  # fmt: skip
    (folder / "r-s0.a1.1.x.jsonl").write_text(json.dumps(line) + "\n")
    report = replay(store, folder)
    ok = (
        report.kept_other_store
        and queries.curves(store, "s").empty
        and (folder / "r-s0.a1.1.x.jsonl").exists()
    )
    return bool(ok), f"kept {len(report.kept_other_store)}"


@probe("silent loss")
def wandb_run_file_is_a_folder(tmp: Path) -> tuple[bool, str]:
    run = tmp / "wandb" / "offline-run-20250101_000000-zz9"
    (run / "run-zz9.wandb").mkdir(parents=True)
    out = cli("import", str(tmp / "wandb"), "--sweep", "w", "--db", fresh(tmp))
    return out.returncode == 7 and "not-regular-file" in out.stderr, out.stderr.strip()[-100:]


@probe("silent loss")
def tensorboard_event_file_is_a_fifo(tmp: Path) -> tuple[bool, str]:
    run = tmp / "tb" / "run1"
    run.mkdir(parents=True)
    os.mkfifo(run / "events.out.tfevents.1.host")
    out = cli("import", str(tmp / "tb"), "--sweep", "t", "--db", fresh(tmp), timeout=60)
    return out.returncode == 7 and "not-regular-file" in out.stderr, out.stderr.strip()[-100:]


# ================================================================ 4. runs that lie


ATTACH = """
import os, sys, time, signal, threading
from scalerl.harness import client
run = client.init(sweep="lie", seed=0, config={"case": sys.argv[2]}, db=sys.argv[1])
run.log(1, {"m": 0.5}, compute={"flops": 1.0})
run.flush()
case = sys.argv[2]
if case == "os-exit": os._exit(3)
if case == "sys-exit-msg": sys.exit("out of memory")
if case == "quit-2": quit(2)
if case == "thread-exit": threading.Thread(target=sys.exit, args=(5,)).start(); time.sleep(0.2)
if case == "keyboard-interrupt": raise KeyboardInterrupt
if case == "caught-then-zero":
    try:
        sys.exit(4)
    except SystemExit:
        pass
    sys.exit(0)
if case == "with-block":
    run.finish()
    with client.init(sweep="lie", seed=1, config={"case": case}, db=sys.argv[1]) as r2:
        r2.log(1, {"m": 0.5}, compute={"flops": 1.0})
        raise SystemExit(2)
if case in ("sighup", "sigint", "alive"):
    print("ready", flush=True)
    time.sleep(60)
"""

LIE_CASES = {
    # case -> (expected exit code, expected run status, text in its error or after `status`)
    "os-exit": (3, "failed", "lost: its process"),
    "sys-exit-msg": (1, "failed", "message 'out of memory'"),
    "quit-2": (2, "failed", "status 2 (quit())"),
    "thread-exit": (0, "completed", None),
    "keyboard-interrupt": (-2, "failed", "KeyboardInterrupt"),  # Python exits it as SIGINT
    "caught-then-zero": (0, "completed", None),
}


def _script(tmp: Path, url: str, case: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, str(tmp / "lie.py"), url, case]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)


def _shown(info: Any) -> str:
    return f"status={getattr(info, 'status', None)} error={str(getattr(info, 'error', ''))[:60]!r}"


def _lie_run(tmp: Path, case: str) -> tuple[Any, Any]:
    from scalerl import db
    from scalerl.db import queries

    store = db.open_store(fresh(tmp, "lie.db"), readonly=True)
    runs = queries.runs(store, "lie")
    rows = runs[runs["seed"] == (1 if case == "with-block" else 0)]
    for rid in rows["run_id"]:
        info = store.get_run(str(rid))
        if info is not None and info.config["attach"]["config"]["case"] == case:
            return info, store
    return None, store


def _lie_probe(case: str) -> Probe:
    def run(tmp: Path) -> tuple[bool, str]:
        from scalerl import db

        (tmp / "lie.py").write_text(ATTACH)
        url = fresh(tmp, "lie.db")
        db.open_store(url).close()
        code, status, text = LIE_CASES[case]
        proc = _script(tmp, url, case)
        if case == "os-exit":
            cli("status", "lie", "--db", url)
        info, _ = _lie_run(tmp, case)
        ok = proc.returncode == code and info is not None and info.status == status
        ok = ok and (text is None or text in str(info.error))
        return (
            ok,
            f"rc={proc.returncode} {_shown(info)}",
        )

    run.__name__ = f"attached_{case.replace('-', '_')}"
    return run


for _case in LIE_CASES:
    probe("runs that lie")(_lie_probe(_case))


@probe("runs that lie")
def attached_with_block_raise_2(tmp: Path) -> tuple[bool, str]:
    from scalerl import db

    (tmp / "lie.py").write_text(ATTACH)
    url = fresh(tmp, "lie.db")
    db.open_store(url).close()
    proc = _script(tmp, url, "with-block")
    info, _ = _lie_run(tmp, "with-block")
    ok = proc.returncode == 2 and info is not None and info.status == "failed"
    return ok, f"rc={proc.returncode} status={getattr(info, 'status', None)}"


def _signalled(tmp: Path, case: str, sig: int | None) -> tuple[Any, str]:
    from scalerl import db

    (tmp / "lie.py").write_text(ATTACH)
    url = fresh(tmp, "lie.db")
    db.open_store(url).close()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, str(tmp / "lie.py"), url, case], stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout is not None
    proc.stdout.readline()  # "ready"
    if sig is not None:
        proc.send_signal(sig)
        proc.wait(timeout=60)
    cli("status", "lie", "--db", url)
    info, _ = _lie_run(tmp, case)
    if sig is None:
        proc.kill()
        proc.wait()
    return info, url


@probe("runs that lie")
def attached_sighup(tmp: Path) -> tuple[bool, str]:
    info, _ = _signalled(tmp, "sighup", signal.SIGHUP)
    return (
        info is not None and info.status == "failed",
        f"{getattr(info, 'status', None)}: {str(getattr(info, 'error', ''))[:60]}",
    )


@probe("runs that lie")
def attached_sigint(tmp: Path) -> tuple[bool, str]:
    info, _ = _signalled(tmp, "sigint", signal.SIGINT)
    return (
        info is not None and info.status == "failed",
        f"{getattr(info, 'status', None)}: {str(getattr(info, 'error', ''))[:60]}",
    )


@probe("runs that lie")
def a_live_attached_run_is_not_called_lost(tmp: Path) -> tuple[bool, str]:
    info, _ = _signalled(tmp, "alive", None)
    return info is not None and info.status == "running", f"{getattr(info, 'status', None)}"


@probe("runs that lie")
def a_reused_pid_is_another_process(tmp: Path) -> tuple[bool, str]:
    from types import SimpleNamespace

    from scalerl.harness.execution import liveness

    me, start = liveness.this_process()
    assert start is not None
    other = start.rsplit("/", 1)[0] + "/1"  # this pid, started at another tick: a reused pid
    row = SimpleNamespace(pid=me, pid_start=other, heartbeat_at=None, host="here")
    reason = liveness.lost(row)
    return reason is not None and "is gone" in reason, str(reason)[:80]


# ================================================================ 5. secrets


SECRET_TEXTS = {
    "slack token": "posting failed: xoxb-123456789012-abcdefghijklmnop",
    "gitlab token": "clone https://oauth2:glpat-AbCdEfGhIjKlMnOpQrSt@gitlab.com/x",
    "google key": "maps: AIzaSyA1234567890abcdefghijklmnopqrstu",
    "private key": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n"
    "-----END OPENSSH PRIVATE KEY-----",
    "token flag with =": "python train.py --hf-token=hf_AbCdEfGhIjKlMnOpQrSt12345 --lr 1",
    "env dump": "PGPASSWORD=hunter2 WANDB_API_KEY=0123456789abcdef0123456789abcdef01234567",
    "bearer no space after colon": "Authorization:Bearer abcdef0123456789",
    "json api key": '{"api_key": "k-abcdef", "lr": 1}',
    "anthropic key": "anthropic.AuthenticationError: sk-ant-api03-AbCdEfGhIjKlMnOpQrSt-uvwx",
    "aws session": "ASIAIOSFODNN7EXAMPLE and aws_session_token=FwoGZXIvYXdzEJr",
}
SECRET_BITS = {
    "slack token": "xoxb-1234", "gitlab token": "glpat-AbCd", "google key": "AIzaSyA123",
    "private key": "b3BlbnNzaC1rZXktdjEAAAAA", "token flag with =": "hf_AbCd", "env dump": "hunter2",
    "bearer no space after colon": "abcdef0123456789", "json api key": "k-abcdef",
    "anthropic key": "sk-ant-api03", "aws session": "FwoGZXIvYXdzEJr",
}  # fmt: skip


def _secret_probe(name: str) -> Probe:
    def run(tmp: Path) -> tuple[bool, str]:
        from scalerl import db
        from scalerl.db import RunRecord

        store = db.open_store(fresh(tmp))
        store.register_run(RunRecord("r-s0", "s", "v", 0, {"note": SECRET_TEXTS[name]}, "h"))
        attempt = store.start_attempt("r-s0")
        store.finish_run("r-s0", attempt, "failed", error=SECRET_TEXTS[name])
        info = store.get_run("r-s0")
        seen = f"{info.error} {info.config}" if info else ""
        bit = SECRET_BITS[name]
        return bit not in seen, seen[:90]

    run.__name__ = "secret_" + name.replace(" ", "_").replace("=", "eq")
    return run


for _name in SECRET_TEXTS:
    probe("secrets")(_secret_probe(_name))


@probe("secrets")
def wandb_key_under_its_env_name_in_a_nested_config(tmp: Path) -> tuple[bool, str]:
    from scalerl import db
    from scalerl.db import RunRecord

    store = db.open_store(fresh(tmp))
    cfg = {
        "runner": {"env": [{"name": "WANDB_API_KEY", "value": "0123456789abcdef0123456789abcdef01234567"}]}
    }
    store.register_run(RunRecord("r-s0", "s", "v", 0, cfg, "h"))
    info = store.get_run("r-s0")
    text = json.dumps(info.config if info else {})
    return "0123456789abcdef0123" not in text, text[:100]


# ================================================================ 6. identity


def _hash(cfg: dict[str, Any], seed: str = "0") -> str:
    code = ("import json, sys\nfrom scalerl.harness.recipe.hashing import canonical_json\n"
            "print(canonical_json(eval(sys.argv[1])))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code, repr(cfg)], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": seed})  # fmt: skip
    return out.stdout.strip() or out.stderr.strip().splitlines()[-1]


@probe("identity")
def set_of_tuples_across_processes(tmp: Path) -> tuple[bool, str]:
    cfg = {"pairs": {("a", 1), ("b", 2), ("c", 3), ("d", 4)}}
    seen = {_hash(cfg, s) for s in ("1", "2", "3")}
    return len(seen) == 1, next(iter(seen))[:80]


@probe("identity")
def frozenset_key_across_processes(tmp: Path) -> tuple[bool, str]:
    cfg = {frozenset({"x", "y", "z"}): 1}
    seen = {_hash(cfg, s) for s in ("1", "2", "3")}
    return len(seen) == 1, next(iter(seen))[:80]


@probe("identity")
def int_and_text_key_are_two_configs(tmp: Path) -> tuple[bool, str]:
    from scalerl.harness.errors import ConfigError
    from scalerl.harness.recipe.hashing import canonical_json

    try:
        a, b = canonical_json({1: "a", "1": "b"}), canonical_json({"1": "b"})
    except ConfigError as err:
        return True, f"refused: {str(err)[:80]}"
    return a != b, f"{a} vs {b}"


@probe("identity")
def large_numpy_arrays_that_differ_hash_apart(tmp: Path) -> tuple[bool, str]:
    from scalerl.harness.errors import ConfigError
    from scalerl.harness.recipe.hashing import canonical_json

    a, b = np.arange(5000), np.arange(5000)
    b[2500] = -1  # differs only in the middle, which str() elides as "..."
    try:
        same = canonical_json({"w": a}) == canonical_json({"w": b})
    except ConfigError as err:
        return True, f"refused: {str(err)[:80]}"
    return not same, "two different arrays, one id" if same else "distinct"


@probe("identity")
def object_with_address_refused(tmp: Path) -> tuple[bool, str]:
    from scalerl.harness.errors import ConfigError
    from scalerl.harness.recipe.hashing import canonical_json

    try:
        canonical_json({"gen": (i for i in range(3))})
    except ConfigError as err:
        return True, str(err)[:80]
    return False, "a generator hashed by its address"


# ================================================================ 7. files


@probe("files")
def report_onto_a_symlink_to_dev_null(tmp: Path) -> tuple[bool, str]:
    link = tmp / "r.html"
    link.symlink_to("/dev/null")
    out = cli("report", "s", "-o", str(link), "--db", fresh(tmp))
    return out.returncode == 3 and stat.S_ISCHR(
        os.stat("/dev/null").st_mode
    ) and link.is_symlink(), out.stderr[-90:]


@probe("files")
def report_onto_a_socket(tmp: Path) -> tuple[bool, str]:
    import socket

    path = tmp / "r.sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    out = cli("report", "s", "-o", str(path), "--db", fresh(tmp))
    s.close()
    return out.returncode == 3 and "socket" in out.stderr, out.stderr[-90:]


@probe("files")
def spool_quarantine_through_a_planted_symlink(tmp: Path) -> tuple[bool, str]:
    """A spool folder shared in /tmp: a symlink planted at the quarantine file's name."""
    from scalerl import db
    from scalerl.db import RunRecord
    from scalerl.db.spool import replay

    store = db.open_store(fresh(tmp))
    store.register_run(RunRecord("r-s0", "s", "v", 0, {}, "h"))
    store.start_attempt("r-s0")
    folder = tmp / "spool"
    (folder / "quarantine").mkdir(parents=True)
    victim = tmp / "victim"
    victim.write_text("keep")
    (folder / "quarantine" / "x.jsonl").symlink_to(victim)
    (folder / "quarantine" / "x.tmp").symlink_to(victim)
    (folder / "x.jsonl").write_text("not json\n")
    with contextlib.suppress(Exception):
        replay(store, folder)
    return (
        victim.read_text() == "keep",
        "victim intact" if victim.read_text() == "keep" else "victim overwritten",
    )


# ================================================================ 8. tracebacks and exits


@probe("exits")
def import_sweep_name_too_long(tmp: Path) -> tuple[bool, str]:
    (tmp / "r.csv").write_text("step,m\n1,0.1\n")
    out = cli("import", str(tmp / "r.csv"), "--sweep", "x" * 201, "--db", fresh(tmp))
    return out.returncode == 3 and clean(out.stderr), out.stderr[-80:]


@probe("exits")
def import_sweep_with_nul(tmp: Path) -> tuple[bool, str]:
    (tmp / "r.csv").write_text("step,m\n1,0.1\n")
    out = cli(
        "import", str(tmp / "r.csv"), "--sweep", "a\u0000b".replace("\u0000", "\u2400"), "--db", fresh(tmp)
    )
    return out.returncode == 0 and clean(out.stderr), f"rc={out.returncode}"


@probe("exits")
def replay_a_line_whose_store_is_a_number(tmp: Path) -> tuple[bool, str]:
    from scalerl import db
    from scalerl.db import RunRecord

    url = fresh(tmp)
    store = db.open_store(url)
    store.register_run(RunRecord("r-s0", "s", "v", 0, {}, "h"))
    store.start_attempt("r-s0")
    (tmp / "spool").mkdir()
    line = {
        "v": 2,
        "run_id": "r-s0",
        "attempt": 1,
        "store": 5,
        "rows": [[1, "m", 0.5, None, 1.0, None, None, None, None, None]],
    }
    (tmp / "spool" / "a.jsonl").write_text(json.dumps(line) + "\n")
    out = cli("db", "replay", "--spool", str(tmp / "spool"), url)
    return out.returncode == 1 and clean(out.stdout + out.stderr) and "set aside 1" in out.stdout, out.stdout[
        -80:
    ]


@probe("exits")
def grant_a_role_name_that_is_sql(tmp: Path) -> tuple[bool, str]:
    out = cli("db", "grant", "x; DROP TABLE run", fresh(tmp), "--read")
    return out.returncode == 4 and clean(out.stderr), out.stderr[-90:]


@probe("exits")
def grant_on_sqlite(tmp: Path) -> tuple[bool, str]:
    from scalerl import db

    db.open_store(fresh(tmp)).close()
    out = cli("db", "grant", "alice", fresh(tmp), "--sweep", "s")
    return out.returncode == 4 and "file's permissions" in out.stderr, out.stderr[-90:]


@probe("exits")
def status_of_a_sweep_named_with_bytes_that_are_not_utf8(tmp: Path) -> tuple[bool, str]:
    from scalerl import db

    db.open_store(fresh(tmp)).close()
    out = cli("status", "s\udcff", "--db", fresh(tmp))
    return out.returncode == 3 and clean(out.stderr), out.stderr[-80:]


# ================================================================ 9. processes


METRICS_LINE = (
    "open(os.environ['SCALERL_METRICS_FILE'], 'a').write("
    '\'{"step": 1, "metrics": {"m": 1.0}, "compute": {"flops": 1}}\\n\')\n'
)


def _command_sweep(tmp: Path, body: str) -> Path:
    from tests.unit.execution.test_hardening_runs import _script_sweep

    return _script_sweep(tmp, body)


@probe("processes")
def a_double_forked_daemon_ends_with_its_run(tmp: Path) -> tuple[bool, str]:
    body = (
        "import os, sys, time\n"
        "r, w = os.pipe()\n"
        "if os.fork() == 0:\n"
        "    if os.fork() == 0:\n"
        "        os.write(w, str(os.getpid()).encode()); time.sleep(120); os._exit(0)\n"
        "    os._exit(0)\n"
        "pid = os.read(r, 32).decode()\n"
        "open(os.path.join(os.environ['SCALERL_CHECKPOINT_DIR'], '..', 'pids'), 'w').write(pid)\n"
        + METRICS_LINE
    )
    return _ends_with_run(tmp, body)


@probe("processes")
def a_child_that_clears_its_environment_and_setsids_ends_with_its_run(tmp: Path) -> tuple[bool, str]:
    body = (
        "import os, subprocess, sys\n"
        "argv = ['/usr/bin/env', '-i', sys.executable, '-c', 'import time; time.sleep(120)']\n"
        "child = subprocess.Popen(argv, start_new_session=True)\n"
        "open(os.path.join(os.environ['SCALERL_CHECKPOINT_DIR'], '..', 'pids'), 'w').write(str(child.pid))\n"
        + METRICS_LINE
    )
    return _ends_with_run(tmp, body)


def _ends_with_run(tmp: Path, body: str) -> tuple[bool, str]:
    from scalerl import db
    from scalerl.db import queries
    from scalerl.harness.execution.sweep import launch, prepare

    sweep = _command_sweep(tmp, body)
    url = fresh(tmp)
    prepared = prepare(sweep, [], executor="debug", profile=None, db_url=url, state_dir=tmp / "state")
    store = db.open_store(url)
    launch(store, prepared)
    (row,) = queries.runs(store, "scr").to_dict("records")
    pid = int((tmp / "state" / "runs" / row["run_id"] / "pids").read_text())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True, f"run {row['status']}; child {pid} gone"
        if state == "Z":
            return True, f"run {row['status']}; child {pid} ended (zombie of init)"
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)
    return False, f"child {pid} outlived the run"


# ================================================================ 10. terminal


@probe("terminal")
def osc8_hyperlink_in_a_variant_name(tmp: Path) -> tuple[bool, str]:
    from scalerl import db
    from scalerl.db import RunRecord

    url = fresh(tmp)
    store = db.open_store(url)
    name = "v\x1b]8;;http://evil/\x1b\\click\x1b]8;;\x1b\\"
    store.register_run(RunRecord("r-s0", "s", name, 0, {}, "h"))
    out = cli("status", "s", "--db", url)
    return clean(out.stdout + out.stderr) and out.returncode == 0, out.stdout.splitlines()[-1][:80]


@probe("terminal")
def escape_in_a_job_log(tmp: Path) -> tuple[bool, str]:
    from scalerl import db
    from scalerl.db import RunRecord

    url = fresh(tmp)
    store = db.open_store(url)
    store.register_run(RunRecord("r-s0", "s", "v", 0, {}, "h"))
    logs = tmp / "state" / "local" / "logs"
    logs.mkdir(parents=True)
    (logs / "r-s0.log").write_text("step 1\x1b]52;c;ZXZpbA==\x07\rprogress 50%\n")
    store.log_events(
        "s", "submitted", {"r-s0": {"executor": "local", "job_id": "1", "state_dir": str(tmp / "state")}}
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "scalerl.harness", "logs", "r-s0", "--db", url]
    out = subprocess.run(argv, capture_output=True, env=env, timeout=60)
    text = out.stdout.decode()  # bytes: a carriage return is kept (a progress bar), not turned into \n
    return clean(text) and "\r" in text and out.returncode == 0, repr(text[:60])


@probe("terminal")
def escape_in_a_log_line_of_a_warning(tmp: Path) -> tuple[bool, str]:
    (tmp / "r.csv").write_text("step,m\x1b[2J\n1,0.1\n1,0.2\n")
    out = cli("import", str(tmp / "r.csv"), "--sweep", "w", "--db", fresh(tmp))
    return clean(out.stdout + out.stderr), (out.stdout + out.stderr).strip()[-80:]


@probe("terminal")
def json_output_keeps_escapes_escaped(tmp: Path) -> tuple[bool, str]:
    from scalerl import db

    url = fresh(tmp)
    db.open_store(url).ensure_sweep("s\x1b[31m", {})
    out = cli("ls", "--json", "--db", url)
    doc = json.loads(out.stdout)
    return clean(out.stdout) and doc["sweeps"][0]["name"] == "s\x1b[31m", out.stdout[:60].replace("\n", " ")


# ================================================================ 2. another user on the store


def pg_probes(tmp: Path) -> None:
    """The PostgreSQL class: a store created by an administrator, alice's sweep, bob a writer."""
    import psycopg
    from sqlalchemy.engine import make_url

    from scalerl import db
    from scalerl.db import RunRecord
    from tests.fixtures.postgres import _start_managed

    server = _start_managed()
    try:
        admin = server.create_database()
        u = make_url(admin)

        def connect(user: str, password: str) -> Any:
            return psycopg.connect(host=u.host, port=u.port, user=user, password=password, dbname=u.database,
                                   autocommit=True)  # fmt: skip

        with connect(u.username, u.password) as conn:
            for role in ("alice3", "bob3"):
                conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD 'pw'")
        db.open_store(admin).close()
        for role in ("alice3", "bob3"):
            assert cli("db", "grant", role, admin, "--write").returncode == 0
        alice = u.set(username="alice3", password="pw").render_as_string(hide_password=False)
        bob = u.set(username="bob3", password="pw").render_as_string(hide_password=False)
        store = db.open_store(alice)
        store.ensure_sweep("hers", {"spec": 1})
        for seed in range(3):  # curves a fit can fit, so bob's `fit` gets as far as saving
            rid = f"r-s{seed}"
            store.register_run(RunRecord(rid, "hers", "baseline", seed, {}, "h"))
            with store.writer(rid, store.start_attempt(rid)) as w:
                for step in range(1, 31):
                    c = step * 1e15
                    w.add(
                        step,
                        {"val/pass_rate": 0.1 + 0.5 / (1 + (15e15 / c) ** 1.5) + 0.002 * seed},
                        {"flops": c},
                    )
        store.close()

        def sql(statement: str, *args: Any, setup: str | None = None) -> tuple[bool, str]:
            with connect("bob3", "pw") as conn:
                try:
                    if setup:
                        conn.execute(setup)
                    n = conn.execute(statement, args or None).rowcount
                except psycopg.errors.InsufficientPrivilege as err:
                    return True, f"refused: {str(err).splitlines()[0][:70]}"
                except psycopg.Error as err:
                    return True, f"refused ({type(err).__name__}): {str(err).splitlines()[0][:60]}"
                return n == 0, f"{n} row(s) changed"

        checks = {
            "bob replaces alice's fits": lambda: sql(
                "INSERT INTO fit (sweep, variant, metric, axis, status, created_at) "
                "VALUES ('hers', 'v', 'm', 'flops', 'ok', now())"
            ),
            "bob deletes alice's sweep": lambda: sql("DELETE FROM sweep WHERE name = 'hers'"),
            "bob rewrites alice's spec": lambda: sql("UPDATE sweep SET spec = '{}' WHERE name = 'hers'"),
            "bob drops alice's run from her sweep": lambda: sql("DELETE FROM sweep_run WHERE sweep = 'hers'"),
            "bob logs an event on alice's run": lambda: sql(
                "INSERT INTO event (time, sweep, run_id, kind, detail) "
                "VALUES (now(), NULL, 'r-s0', 'x', '{}')"
            ),
            "bob moves alice's run into his sweep": lambda: sql(
                "UPDATE run SET first_sweep = 'his' WHERE run_id = 'r-s0'"
            ),
            "bob shadows sweep with a temp table": lambda: sql(
                "UPDATE run SET status = 'cancelled' WHERE run_id = 'r-s0'",
                setup="CREATE TEMP TABLE sweep (name text, owner text); "
                "INSERT INTO sweep VALUES ('hers', 'bob3')",
            ),
            "bob grants himself by a group role he made": lambda: sql(
                "INSERT INTO sweep_grant (sweep, grantee) VALUES ('hers', 'public')"
            ),
            "bob inserts a sweep owned by nobody": lambda: sql(
                "INSERT INTO sweep (name, spec, created_at, owner) VALUES ('x', '{}', now(), NULL)"
            ),
            "bob truncates the point table": lambda: sql("TRUNCATE point"),
        }
        for name, check in checks.items():
            try:
                ok, detail = check()
            except Exception as err:
                ok, detail = False, f"{type(err).__name__}: {err}"[:100]
            RESULTS.append(("access: store", name, ok, detail))
        for name, argv in {
            "bob fits alice's sweep and saves": (
                "fit",
                "hers",
                "--db",
                bob,
                "--boot",
                "10",
                "--axis",
                "flops",
            ),
            "bob hands alice's sweep to himself": ("db", "grant", "bob3", bob, "--owner", "hers"),
            "bob revokes nothing of alice's": ("db", "revoke", "alice3", bob, "--sweep", "hers"),
        }.items():
            out = cli(*argv)
            text = out.stdout + out.stderr
            held = clean(text) and (out.returncode == 4 or "not saved" in text or "had no grant" in text)
            if os.environ.get("HOSTILE_VERBOSE"):
                print(text)
            shown = next((line for line in text.splitlines() if "not saved" in line or "error" in line), text)
            RESULTS.append(("access: store", name, held, f"rc={out.returncode} {shown.strip()[:150]}"))
    finally:
        server.stop()


# ================================================================ runner


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    import logging

    logging.disable(logging.CRITICAL)
    try:
        yield
    finally:
        logging.disable(logging.NOTSET)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-pg", action="store_true", help="skip the PostgreSQL class")
    parser.add_argument("-k", default="", help="only probes whose name holds this (no PostgreSQL class)")
    parser.add_argument("--pg-only", action="store_true", help="only the PostgreSQL class")
    args = parser.parse_args()
    for cls, name, fn in PROBES:
        if args.k not in name or args.pg_only:
            continue
        with tempfile.TemporaryDirectory() as tmp, quiet(), contextlib.redirect_stderr(io.StringIO()):
            env = dict(os.environ)
            try:
                ok, detail = fn(Path(tmp))
            except Exception as err:
                ok, detail = False, "raised " + "".join(traceback.format_exception_only(err)).strip()[:120]
            finally:
                os.environ.clear()
                os.environ.update(env)
        RESULTS.append((cls, name, ok, detail))
        print(f"{'held' if ok else 'FAILED':6} {cls:16} {name}: {detail}", flush=True)
    if not args.no_pg and not args.k:
        with tempfile.TemporaryDirectory() as tmp:
            pg_probes(Path(tmp))
        for cls, name, ok, detail in RESULTS:
            if cls == "access: store":
                print(f"{'held' if ok else 'FAILED':6} {cls:16} {name}: {detail}", flush=True)
    total = Counter(c for c, *_ in RESULTS)
    failed = Counter(c for c, _, ok, _ in RESULTS if not ok)
    print("\nclass             probes  failed")
    for cls in total:
        print(f"{cls:17} {total[cls]:6}  {failed[cls]:6}")
    print(f"{'all':17} {sum(total.values()):6}  {sum(failed.values()):6}")
    return sum(failed.values())


if __name__ == "__main__":
    sys.exit(main())
