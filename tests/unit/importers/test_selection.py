"""Run selection: states, --only / --exclude, --run-status, and the mapping's skipped runs."""

from __future__ import annotations

import numpy as np
import pytest

from scalerl.harness.errors import ConfigError
from scalerl.harness.importers.base import ImportedCurve, LossLog, make_curve
from scalerl.harness.importers.mapping import RunRole, UnmatchedRun, from_flags
from scalerl.harness.importers.selection import RunFilter, parse_statuses, relogged_runs, select_runs


def curve(
    run: str, status: str = "completed", params: dict[str, str] | None = None, **tags: str
) -> ImportedCurve:
    one = np.array([1], dtype=np.int64)
    return ImportedCurve(
        "src",
        run,
        "m",
        "step",
        one,
        one.astype(float),
        one.astype(float),
        params or {},
        status=status,
        tags=tags,
    )


def names(curves: tuple[ImportedCurve, ...]) -> list[str]:
    return [c.run for c in curves]


def test_failed_and_killed_runs_are_left_out_and_listed_unless_included() -> None:
    curves = [
        curve("a"),
        curve("b", "failed"),
        curve("c", "cancelled"),
        curve("d", "running"),
        curve("e", "unknown"),
    ]
    chosen = select_runs(curves)
    assert names(chosen.curves) == ["a", "d", "e"]
    assert [(o.run, o.status) for o in chosen.left_out] == [("b", "failed"), ("c", "cancelled")]
    assert "--include-failed keeps it" in chosen.left_out[0].reason
    assert names(select_runs(curves, include_failed=True).curves) == ["a", "b", "c", "d", "e"]


def test_filters_on_names_params_and_tags() -> None:
    curves = [
        curve("base-0", params={"lr": "0.0001"}, team="rl"),
        curve("debug-1", params={"lr": "1e-4"}, team="rl"),
        curve("other", params={"lr": "3e-4"}, team="vision", baseline="true"),
        curve("no-lr", team="rl"),
    ]

    def pick(only: list[str], exclude: list[str] = []) -> list[str]:  # noqa: B006
        got = select_runs(
            curves,
            only=[RunFilter.parse(t, "--only") for t in only],
            exclude=[RunFilter.parse(t, "--exclude") for t in exclude],
        )
        return names(got.curves)

    assert pick(["tag:team=rl"]) == ["base-0", "debug-1", "no-lr"]
    assert pick(["param:lr=1e-4"]) == ["base-0", "debug-1"]  # 0.0001 is the same number
    assert pick(["param:lr=*e-4"]) == ["debug-1", "other"]  # a glob on the logged text
    assert pick(["tag:team=rl", "param:lr"], ["name:debug-*"]) == ["base-0"]  # every --only, any --exclude
    assert pick(["tag:baseline"]) == ["other"]  # a W&B label: present
    assert pick([], ["tag:team=r?"]) == ["other"]
    got = select_runs(curves, exclude=[RunFilter.parse("name:debug-*", "--exclude")])
    assert [(o.run, o.reason) for o in got.left_out] == [("debug-1", "matches --exclude name:debug-*")]


@pytest.mark.parametrize("bad", ["team=rl", "label:x", "param:", "tag:=rl", "name:"])
def test_a_malformed_filter_names_the_flag_and_the_fix(bad: str) -> None:
    with pytest.raises(
        ConfigError, match=r"--only=.*\(fix: write name:GLOB, param:KEY=VALUE or tag:KEY=VALUE"
    ):
        RunFilter.parse(bad, "--only")


def test_run_status_sets_what_a_file_cannot_say() -> None:
    statuses = parse_statuses(["run-3=failed", "seed-*=killed", "seed-1=completed"])
    curves = [curve("run-3"), curve("seed-0"), curve("seed-1"), curve("x", "failed")]
    chosen = select_runs(curves, statuses=statuses)
    assert names(chosen.curves) == ["seed-1"]
    assert [(o.run, o.status) for o in chosen.left_out] == [
        ("run-3", "failed"),
        ("seed-0", "cancelled"),
        ("x", "failed"),
    ]
    assert "failed (--run-status)" in chosen.left_out[0].reason
    kept = select_runs(curves, statuses=statuses, include_failed=True).curves
    assert [(c.run, c.status, c.source_status) for c in kept][:2] == [
        ("run-3", "failed", "--run-status"),
        ("seed-0", "cancelled", "--run-status"),
    ]
    with pytest.raises(ConfigError, match=r"--run-status='run-3=broken': not NAME=STATE"):
        parse_statuses(["run-3=broken"])


def test_relogged_steps_are_counted_per_run_over_its_metrics() -> None:
    log = LossLog()
    a = make_curve(
        "s", "r", "a", "step", [1, 2, 3, 2, 3, 4], [1, 2, 3, 2, 3, 4], [0, 0, 0, 1, 1, 1], ["w"] * 6, log
    )
    b = make_curve("s", "r", "b", "step", [1, 2, 3, 1, 2], [1, 2, 3, 1, 2], [0, 0, 0, 1, 1], ["w"] * 5, log)
    assert a.relogged == (2, 3) and a.values.tolist() == [0, 1, 1, 1]
    assert relogged_runs([a, b]) == {"r": 3} and not log.freeze()  # steps 1, 2, 3
    # Given segments (files), a repeat across a file boundary is a re-log even without going back.
    c = make_curve("s", "r", "c", "step", [1, 2, 2], [1, 2, 2], [0, 0, 1], ["w"] * 3, log, segments=[0, 0, 1])
    assert c.relogged == (2,) and not log.freeze()
    make_curve("s", "r", "d", "step", [1, 2, 2], [1, 2, 2], [0, 0, 1], ["w"] * 3, log)
    assert dict(log.freeze().counts) == {"duplicate-step": 1}


def test_the_mapping_skips_runs_it_does_not_match_unless_strict() -> None:
    runs = {
        "a": {"loss": "grpo", "seed": "0"},
        "b": {"loss": "cispo", "seed": "0"},
        "smoke": {"seed": "0"},  # no loss param
        "c": {"loss": "cispo"},  # no seed param
    }
    mapping = from_flags("loss", "seed", "grpo", None, None)
    roles, skipped = mapping.match(runs)
    assert roles == {"a": RunRole("baseline", None, None, 0), "b": RunRole("loss=cispo", "loss", "cispo", 0)}
    assert skipped == {
        "c": "run 'c' has no param 'seed' (its params: loss)",
        "smoke": "run 'smoke' has no param 'loss' (its params: seed)",
    }
    with pytest.raises(UnmatchedRun, match="run 'c' has no param 'seed'"):
        mapping.match(runs, strict=True)
    # Tags reach a mapping as tag:<key> params.
    tagged = from_flags("tag:loss", None, "grpo", None, None)
    roles, _ = tagged.match({"x": {"tag:loss": "grpo"}, "y": {"tag:loss": "cispo"}})
    assert roles["y"] == RunRole("tag:loss=cispo", "tag:loss", "cispo", 0)
