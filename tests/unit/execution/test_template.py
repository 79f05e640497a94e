"""Command-runner templating: placeholders from run fields and the resolved config."""

from __future__ import annotations

import pytest

from harness.errors import ConfigError
from harness.execution.runners.template import Template, flatten


def _template() -> Template:
    config = {"knobs": {"loss": {"choice": "dapo", "params": {"eps_low": 0.2}}}, "budget": {"value": 40.0}}
    return Template({"seed": 3, "run_id": "abc-s3"}, config)


def test_renders_fields_dotted_config_and_literal_braces() -> None:
    t = _template()
    assert t.render("--loss={knobs.loss.choice}", where="argv[0]") == "--loss=dapo"
    assert t.render("{knobs.loss.params.eps_low}", where="x") == "0.2"
    assert t.render("{budget.value}", where="x") == "40"  # integral float -> "40", not "40.0"
    assert t.render("run-{run_id}-seed{seed}", where="x") == "run-abc-s3-seed3"
    assert t.render("{{literal}}", where="x") == "{literal}"


def test_unknown_placeholder_names_it_and_lists_valid_ones() -> None:
    with pytest.raises(ConfigError) as err:
        _template().render_all(["train.py", "--lr={optim.lr}"], where="runner.argv")
    msg = str(err.value)
    assert "runner.argv[1]='--lr={optim.lr}'" in msg
    assert "unknown placeholder {optim.lr}" in msg
    assert "seed, run_id, budget.value, knobs.loss.choice" in msg


def test_format_specs_are_refused() -> None:
    with pytest.raises(ConfigError, match="format specs"):
        _template().render("{seed:03d}", where="x")


def test_flatten_keeps_lists_as_leaves() -> None:
    assert flatten({"a": {"b": [1, 2], "c": {}}}) == {"a.b": [1, 2], "a.c": {}}
