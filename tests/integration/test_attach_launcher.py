"""Issue 25, done-when: a script started by plain ``python`` (no harness launcher, no SCALERL_*
variables) attaches its runs to a sweep with ``client.init`` and gets a verdict from the real
``scalerl fit`` (no flags) on the real SQLite file it wrote."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from scalerl import db

# Three seeds of a baseline (ceiling 0.60) and of a variant (ceiling 0.45) on one sigmoid in tokens,
# with a fixed RNG, under verl's metric name. The baseline reports cumulative tokens with run.log;
# the variant reports each step's tokens (as verl logs them) through the module's client.log and
# the run's running totals (add_compute). init's metric/axis make them the sweep's fit defaults.
SCRIPT = """\
import random
import sys

from scalerl.harness import client


METRIC = "val-core/openai/gsm8k/acc/mean@1"


def curve(c, a, c_mid=1e7, b=1.5, r0=0.1):
    return r0 + (a - r0) / (1 + (c_mid / c) ** b)


rng = random.Random(25)
for knob, alternative, ceiling in ((None, None, 0.60), ("loss", "dapo", 0.45)):
    for seed in range(3):
        config = {"model": "qwen-0.5b", "lr": 1e-6, "loss": alternative or "cispo"}
        with client.init(
            sweep="lab", knob=knob, alternative=alternative, seed=seed, config=config, db=sys.argv[1],
            metric=METRIC, axis="tokens",
        ) as run:
            before = 0.0
            for step in range(1, 41):
                tokens = 1e6 * 1.15**step
                value = curve(tokens, ceiling) + rng.gauss(0, 0.01)
                n = {METRIC: 1024}
                if knob is None:
                    run.log(step, {METRIC: value}, compute={"tokens": tokens}, n=n)
                else:
                    client.log(step, {METRIC: value}, add_compute={"tokens": tokens - before}, n=n)
                before = tokens
        print(run.run_id, run.variant, run.status)
# Attaching and logging load none of the analysis libraries (the light install's promise).
heavy = sorted(m for m in ("numpy", "pandas", "scipy", "torch", "transformers") if m in sys.modules)
assert not heavy, heavy
"""

# A run that dies on an uncaught exception without finishing: the exit hook records the failure.
CRASH = """\
import sys

from scalerl.harness import client

run = client.init(sweep="crash", seed=0, config={"lr": 1e-6}, db=sys.argv[1])
for step in range(3):
    client.log(step, {"val/pass_rate": 0.1 * step}, compute={"flops": 1e12 * (step + 1)})
raise RuntimeError("diverged at step 3")
"""


def _env() -> dict[str, str]:
    """This environment without anything a harness launch (or a multi-rank job) would set."""
    drop = ("RANK", "SLURM_PROCID")
    return {k: v for k, v in os.environ.items() if not k.startswith("SCALERL_") and k not in drop}


def _python(script: Path, url: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(script), url], capture_output=True, text=True, env=_env(), cwd=cwd, timeout=120
    )


def test_a_plain_python_script_attaches_and_appears_in_the_verdicts(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'lab.db'}"
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    # The lab's checkout: each run records its commit (the store file beside it is not code).
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", "-c", "commit.gpgsign=false"]
    for args in (["init", "-q"], ["add", "train.py"], ["commit", "-q", "-m", "trainer"]):
        subprocess.run([*git, *args], cwd=tmp_path, check=True, capture_output=True)
    head = subprocess.run(
        [*git, "rev-parse", "HEAD"], cwd=tmp_path, check=True, capture_output=True, text=True
    )
    done = _python(script, url, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.split("\n")
    assert sum(line.endswith(" baseline completed") for line in lines) == 3
    assert sum(line.endswith(" loss=dapo completed") for line in lines) == 3

    fit = subprocess.run(
        [sys.executable, "-m", "scalerl.harness", "fit", "lab", "--db", url],
        capture_output=True, text=True, env=_env(), cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert fit.returncode == 0, fit.stderr[-3000:]
    # No --metric / --axis: the sweep's defaults, from init, are what it fitted.
    assert "metric val-core/openai/gsm8k/acc/mean@1 on tokens" in fit.stdout, fit.stdout
    rows = [line.split() for line in fit.stdout.splitlines() if "loss=dapo" in line and "mover" in line]
    assert rows and rows[0][:3] == ["loss", "loss=dapo", "asymptote-mover"], fit.stdout

    store = db.open_store(url, create=False)
    try:
        runs = db.runs(store, "lab")
        assert sorted(runs["variant"]) == ["baseline"] * 3 + ["loss=dapo"] * 3
        assert set(runs["status"]) == {"completed"} and set(runs["executor"]) == {"attach"}
        codes = {(p["commit"], p["dirty"]) for p in runs["provenance"]}
        assert codes == {(head.stdout.strip(), False)}
        verdict = db.verdicts(store, "lab").set_index("variant").loc["loss=dapo"]
        assert -0.19 < verdict["d_a"] < -0.11  # the truth is 0.45 - 0.60 = -0.15
        # The running totals of the variant's per-step tokens are its cumulative tokens.
        curve = db.curves(store, "lab", "val-core/openai/gsm8k/acc/mean@1")
        last = curve[curve["variant"] == "loss=dapo"].groupby("run_id")["tokens"].max()
        assert (abs(last / (1e6 * 1.15**40) - 1) < 1e-9).all()
    finally:
        store.close()


def test_an_uncaught_exception_fails_the_attached_run(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'lab.db'}"
    script = tmp_path / "crash.py"
    script.write_text(CRASH)
    done = _python(script, url, tmp_path)
    assert done.returncode == 1 and "RuntimeError: diverged at step 3" in done.stderr
    store = db.open_store(url, create=False)
    try:
        runs = db.runs(store, "crash")
        assert runs["status"].tolist() == ["failed"]
        assert runs["error"].iloc[0].startswith("RuntimeError: diverged at step 3")
        assert db.curves(store, "crash", "val/pass_rate")["step"].tolist() == [0, 1, 2]  # kept
    finally:
        store.close()


# A trainer that catches its own crash and exits non-zero (Hydra's main, which verl runs under,
# calls sys.exit(1)): no uncaught exception reaches the interpreter, and the run must still fail.
SYS_EXIT = """\
import sys

from scalerl.harness import client

run = client.init(sweep="crash", seed=0, config={"lr": 1e-6}, db=sys.argv[1])
for step in range(3):
    client.log(step, {"val/pass_rate": 0.1 * step}, compute={"flops": 1e12 * (step + 1)})
try:
    raise RuntimeError("diverged at step 3")
except RuntimeError as err:
    print(f"Error executing job: {err}", file=sys.stderr)
    sys.exit(1)
"""


def test_a_non_zero_sys_exit_fails_the_attached_run(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'lab.db'}"
    script = tmp_path / "crash.py"
    script.write_text(SYS_EXIT)
    done = _python(script, url, tmp_path)
    assert done.returncode == 1, done.stderr[-3000:]
    store = db.open_store(url, create=False)
    try:
        runs = db.runs(store, "crash")
        assert runs["status"].tolist() == ["failed"]
        assert runs["error"].iloc[0].startswith("the program exited with status 1 (sys.exit)")
    finally:
        store.close()
