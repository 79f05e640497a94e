"""RunMapping: imported runs -> baseline / knob variants / seeds, and its errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from scalerl.harness.errors import ConfigError
from scalerl.harness.importers.mapping import RunMapping, RunRole, from_flags, load_mapping

RUNS = {
    "a": {"loss": "grpo", "seed": "0"},
    "b": {"loss": "grpo", "seed": "1"},
    "c": {"loss": "cispo", "seed": "0"},
}


def test_flags_mapping_assigns_baseline_variants_and_seeds() -> None:
    roles = from_flags("loss", "seed", "grpo", None, None).assign(RUNS)
    assert roles == {
        "a": RunRole("baseline", None, None, 0),
        "b": RunRole("baseline", None, None, 1),
        "c": RunRole("loss=cispo", "loss", "cispo", 0),
    }


def test_without_a_seed_param_seeds_count_up_in_name_order() -> None:
    roles = from_flags("loss", None, "grpo", None, None).assign(RUNS)
    assert [roles[r].seed for r in "abc"] == [0, 1, 0]


def test_knob_form_and_baseline_run_glob(tmp_path: Path) -> None:
    f = tmp_path / "m.yaml"
    f.write_text(
        "run_regex: '^(?P<k>\\w+)-(?P<v>\\w+)-(?P<s>\\d)$'\n"
        "knob: k\nalternative: v\nseed: s\nbaseline_run: 'base-*'\n"
    )
    m = load_mapping(f)
    roles = m.assign({"base-x-0": {}, "base-x-1": {}, "kl-high-0": {}})
    assert roles["base-x-1"] == RunRole("baseline", None, None, 1)
    assert roles["kl-high-0"] == RunRole("kl=high", "kl", "high", 0)


def test_errors_name_the_run_param_and_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"seed='lr': run 'a' has no param 'lr' \(its params: loss, seed\)"):
        from_flags("loss", "lr", "grpo", None, None).assign({"c": RUNS["c"], "a": RUNS["a"]})
    with pytest.raises(ConfigError, match=r"runs 'a' and 'b' are both variant 'baseline' seed 0"):
        from_flags("loss", "seed", "grpo", None, None).assign({"a": RUNS["a"], "b": RUNS["a"]})
    with pytest.raises(ConfigError, match=r"seed='x': run 'a': param 'seed' is not a whole number"):
        from_flags("loss", "seed", "grpo", None, None).assign({"a": {"loss": "grpo", "seed": "x"}})
    with pytest.raises(ConfigError, match=r"no run matches the baseline \(values found: loss: cispo, grpo\)"):
        from_flags("loss", "seed", "ppo", None, None).assign(RUNS)
    with pytest.raises(ConfigError, match="names no baseline"):
        RunMapping(variant="loss")
    f = tmp_path / "m.yaml"
    f.write_text("knobs: loss\n")
    with pytest.raises(ConfigError, match=r"m.yaml: knobs.*unknown key.*use only: run_regex, knob"):
        load_mapping(f)


def test_a_catastrophically_backtracking_run_regex_fails_with_its_name_instead_of_hanging(
    tmp_path: Path,
) -> None:
    # (a|aa)+$ against 38 a's and a non-match backtracks Fibonacci(38) ways: `re` runs for minutes.
    # (The hostile probe's (a+)+ hangs `re` too; `regex` finds that one's failure at once.)
    f = tmp_path / "m.yaml"
    f.write_text("run_regex: '(?P<x>(a|aa)+)$'\nvariant: x\nbaseline_run: base\n")
    m = load_mapping(f)
    with pytest.raises(ConfigError, match=r"run_regex.*took over 2 s.*nested quantifiers"):
        m.assign({"base": {}, "a" * 38 + "!": {}})
