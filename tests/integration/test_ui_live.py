"""`scalerl ui` for real: a local sweep runs while headless Chromium watches the live view.

The store is made first and `scalerl ui` (a subprocess, read-only) serves it; the browser opens
the sweeps list, then `scalerl sweep` launches two command runs on the local executor. Without a
reload the list shows the sweep, the sweep page shows a new point, the runs' completion, and the
verdict table filling in once the live fit lands. Once on SQLite and once on the real
PostgreSQL server, whose URL carries a password that must reach neither the page nor the log.
A screenshot of each sweep page is kept under the test's tmp dir (its path is printed).
Then hostile names (script tags, quotes, a 10,000-character knob) render as text, and a
non-local bind without a token is refused.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from scalerl import db
from tests.fixtures.chromium import Tab, chromium_binary, open_tab
from tests.fixtures.real import unavailable
from tests.unit.execution.helpers import REPO, write_command_sweep


@pytest.fixture(autouse=True)
def _needs_chromium() -> None:
    if chromium_binary() is None:
        unavailable("Chromium", "no chromium binary on PATH (apt-get install -y chromium)")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _scalerl(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scalerl.harness", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        cwd=REPO,
    )


@contextmanager
def ui_server(url: str, log: Path, *extra: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """`scalerl ui` on ``url`` in a subprocess; yields its address once it answers."""
    port = _free_port()
    with log.open("w") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "scalerl.harness",
                "ui",
                "--db",
                url,
                "--port",
                str(port),
                "--refresh",
                "0.5",
                *extra,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            env={**os.environ, **(env or {})},
        )
    address = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(address + "/api/info", timeout=2):
                    break
            except (urllib.error.URLError, ConnectionError):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"scalerl ui did not start: {log.read_text()[-2000:]}") from None
                time.sleep(0.2)
        yield address
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# The points the runs table counts, summed over its rows.
POINTS = (
    "Array.from(document.querySelectorAll('table.runs td.points'))"
    ".reduce((a, td) => a + (+td.textContent), 0)"
)
COMPLETED = (
    "Array.from(document.querySelectorAll('table.runs tr[data-run]'))"
    ".every(r => r.dataset.status === 'completed')"
)


def _points(tab: Tab) -> int:
    return int(tab.evaluate(POINTS))


def _errors(tab: Tab) -> list[str]:
    return [e for e in tab.errors() if "favicon" not in e]


def _watch_a_sweep(tmp_path: Path, url: str) -> str:
    """The live-view walk on the store at ``url``; returns the page's full text for more checks."""
    db.open_store(url).close()  # the store exists before the view opens it read-only
    sweep = write_command_sweep(tmp_path, steps=40, executor="local", step_seconds=0.2)
    log = tmp_path / "ui.log"
    with ui_server(url, log) as address, open_tab(width=1440, height=1400) as tab:
        tab.navigate(address + "/")
        tab.wait_for("document.querySelector('table.sweeps') !== null")
        tab.evaluate("window.__kept = 'no reload'")
        # The URL through the environment: `scalerl sweep` refuses a password on its command line.
        # Its own slot folder: the local executor's machine-wide run slots live there, and another
        # sweep on a shared machine may hold them all (the runs would wait, not run).
        (tmp_path / "tmp").mkdir()
        env = {
            "SCALERL_DB_URL": url,
            "TMPDIR": str(tmp_path / "tmp"),
            "SCALERL_SLOT_DIR": str(tmp_path / "slots"),
        }
        done = _scalerl("sweep", str(sweep), "--state-dir", str(tmp_path / "st"), env=env)
        assert done.returncode == 0, done.stderr[-2000:]
        # The sweep appears in the list without a reload.
        tab.wait_for("document.querySelector('tr[data-sweep=\"cmd\"]') !== null", timeout=20)
        assert tab.evaluate("window.__kept") == "no reload"
        tab.navigate(address + "/sweep?name=cmd")
        tab.wait_for("document.body.dataset.ready === '1'", timeout=30)
        tab.evaluate("window.__kept = 'no reload'")
        tab.wait_for("document.querySelectorAll('table.runs tr[data-run]').length === 2", timeout=20)
        before = _points(tab)
        assert before < 16  # 2 runs x 8 evaluations when done: the runs are still going
        tab.wait_for(f"{POINTS} > {before}", timeout=60)
        # Every run completes, and the page says so without a reload.
        tab.wait_for(COMPLETED, timeout=60)
        tab.wait_for(f"{POINTS} === 16", timeout=20)
        # The verdict table fills in from the view's own fit of every point, once the runs are done.
        tab.wait_for("document.querySelector('.fit-status').textContent.includes('on 16 points')", timeout=60)
        verdict = tab.evaluate("document.querySelector('table.verdicts tr[data-verdict]').dataset.verdict")
        assert verdict in (
            "asymptote-mover",
            "efficiency-shaper",
            "no-effect",
            "undecided",
            "unstable",
            "unfit",
        )
        assert tab.evaluate("document.querySelector('table.verdicts td').textContent") == "loss"
        assert tab.evaluate("window.__kept") == "no reload"  # everything above came without a reload
        assert tab.evaluate("window.__scalerl.updates") >= 3
        assert tab.evaluate("document.querySelectorAll('#curves .scatterlayer .trace').length") >= 2
        assert tab.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        shot = tmp_path / "ui-sweep.png"
        shot.write_bytes(tab.screenshot(full_page=True))
        print(f"screenshot of the live sweep page: {shot}")
        assert shot.stat().st_size > 20_000
        assert not _errors(tab), _errors(tab)
        text = str(tab.evaluate("document.documentElement.outerHTML"))
        run_id = str(tab.evaluate("document.querySelector('table.runs tr[data-run]').dataset.run"))
        tab.navigate(f"{address}/run?id={run_id}")
        tab.wait_for("document.body.dataset.ready === '1'", timeout=30)
        assert tab.evaluate("document.querySelectorAll('table.points tbody tr').length") == 8
        assert tab.evaluate("document.body.dataset.status") == "completed"
        logs = str(
            tab.evaluate("Array.from(document.querySelectorAll('pre.log')).map(p => p.textContent).join()")
        )
        assert f"run {run_id}: completed" in logs  # the job log's tail
        assert not _errors(tab), _errors(tab)
        text += str(tab.evaluate("document.documentElement.outerHTML"))
    return text + log.read_text()


@pytest.mark.slow
def test_live_view_follows_a_local_sweep_on_sqlite(tmp_path: Path) -> None:
    _watch_a_sweep(tmp_path, f"sqlite:///{tmp_path / 's.db'}")


@pytest.mark.slow
@pytest.mark.postgres
def test_live_view_follows_a_local_sweep_on_postgres(tmp_path: Path, pg_url: str) -> None:
    from sqlalchemy.engine import make_url

    password = make_url(pg_url).password
    assert password
    seen = _watch_a_sweep(tmp_path, pg_url)
    assert password not in seen  # neither the pages nor the server's log
    assert "***" in seen  # the store is named, its password masked


# Hostile names: each would run script or break the markup if it were ever parsed as HTML.
EVIL_SWEEP = "<script>window.__xss=1</script>\"'sweep"
EVIL_VARIANT = '<img src=x onerror="window.__xss=2">'
EVIL_KNOB = "<b>" + "k" * 190 + "</b>"  # a name column holds 200 characters
LONG = "x" * 10_000  # a 10,000-character knob (in a config and a verdict's reason): wraps, never scrolls


def test_hostile_names_render_as_text(tmp_path: Path) -> None:
    from scalerl.db import RunRecord

    url = f"sqlite:///{tmp_path / 'evil.db'}"
    store = db.open_store(url)
    store.ensure_sweep(EVIL_SWEEP, {"design": "loo", "fit": {"metric": "val/pass_rate", "axis": "step"}})
    for i, (variant, knob) in enumerate((("baseline", None), (EVIL_VARIANT, EVIL_KNOB))):
        run_id = f"evil-{i}"
        store.register_run(
            RunRecord(
                run_id,
                EVIL_SWEEP,
                variant,
                0,
                {"knobs": {LONG: LONG}},
                f"h{i}",
                knob=knob,
                alternative="'\"><svg onload=window.__xss=3>",
            )
        )
        attempt = store.start_attempt(run_id, executor="local")
        writer = store.writer(run_id, attempt)
        for s in range(6):
            writer.add(s, {"val/pass_rate": 0.1 * s}, {"flops": 1e12 * (s + 1)})
        writer.close()
        store.finish_run(run_id, attempt, "failed", error=f"<script>window.__xss=4</script>{LONG}")
    store.replace_verdicts(
        EVIL_SWEEP,
        [
            {
                "knob": EVIL_KNOB,
                "variant": EVIL_VARIANT,
                "alternative": "'\"",
                "verdict": "asymptote-mover",
                "d_a": -0.1,
                "d_a_lo": -0.15,
                "d_a_hi": -0.05,
                "d_b": 0.0,
                "d_b_lo": -0.1,
                "d_b_hi": 0.1,
                "margin": 0.02,
                "reason": LONG,
            }
        ],
        metric="val/pass_rate",
        axis="step",
    )
    with ui_server(url, tmp_path / "ui.log", "--no-fit") as address, open_tab(width=1440, height=1000) as tab:
        from urllib.parse import quote

        for path in ("/", f"/sweep?name={quote(EVIL_SWEEP)}", "/run?id=evil-1"):
            tab.navigate(address + path)
            tab.wait_for("document.querySelector('main tbody tr') !== null", timeout=30)
            time.sleep(0.5)  # the knob map draws after the table
            text = str(tab.evaluate("document.body.innerText"))
            assert tab.evaluate("typeof window.__xss") == "undefined", path
            assert (
                tab.evaluate("document.querySelectorAll('main img, main svg[onload], main script').length")
                == 0
            )
            assert tab.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), path  # wraps
            assert not _errors(tab), (path, _errors(tab))
            if path == "/":
                assert EVIL_SWEEP in text
            elif path.startswith("/sweep"):
                assert EVIL_VARIANT in text and EVIL_KNOB in text and LONG in text
                assert tab.evaluate("document.title") == f"scalerl ui: {EVIL_SWEEP}"
                # the knob map names the variant as text too (Plotly decodes the escaped entities)
                assert EVIL_VARIANT in str(tab.evaluate("document.getElementById('knob-map').textContent"))
            else:
                assert EVIL_VARIANT in text and "<script>window.__xss=4</script>" in text


def test_a_non_local_bind_without_a_token_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    db.open_store(url).close()
    env = {k: v for k, v in os.environ.items() if k != "SCALERL_UI_TOKEN"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "scalerl.harness",
            "ui",
            "--db",
            url,
            "--host",
            "0.0.0.0",
            "--port",
            str(_free_port()),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=REPO,
    )
    assert done.returncode == 3, done.stderr
    assert (
        "--host='0.0.0.0'" in done.stderr
        and "SCALERL_UI_TOKEN" in done.stderr
        and "--new-token" in done.stderr
    )
