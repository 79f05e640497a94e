"""Task registry, the ``arith`` task and the character tokenizer."""

from __future__ import annotations

import random

import pytest

from scalerl.harness.errors import ConfigError
from scalerl.harness.rl.tasks import TASKS, Problem, Task, make_split, make_task, register_task
from scalerl.harness.rl.tokenizer import CharTokenizer


def test_arith_problems_traces_and_verifier() -> None:
    task = make_task("arith", {"n_min": 2, "n_max": 4, "trace_noise": 0.0})
    split = make_split(task, 50, 10, seed=7)
    assert split == make_split(task, 50, 10, seed=7)  # fixed by task.seed
    assert (len(split.train), len(split.val)) == (50, 10)
    p = Problem("a3b5c2d9=", "9", 4)
    assert task.trace(p, random.Random(0)) == "b8c0d9</think>9"
    assert task.score(p, "b8c0d9</think>9") == 1.0
    assert task.score(p, "b8c0d9</think>8") == 0.0
    assert task.score(p, "b8c0d9 9") == 0.0  # no end-of-thinking marker: no answer
    assert task.score(p, "b8c0</think>Okay, time is up.</think>9") == 1.0  # the last marker wins
    noisy = make_task("arith", {"trace_noise": 0.5})
    wrong = sum(noisy.score(q, noisy.trace(q, random.Random(i))) == 0.0 for i, q in enumerate(split.train))
    assert 10 < wrong < 50  # noisy traces slip, and the answer follows the slip
    for q in split.train:
        assert task.score(q, task.trace(q, random.Random(0))) == 1.0
        assert 2 <= q.difficulty <= 4


def test_registry_errors_name_the_field() -> None:
    with pytest.raises(ConfigError, match=r"task.name.*unknown task"):
        make_task("nope", {})
    with pytest.raises(ConfigError, match=r"task.params"):
        make_task("arith", {"bogus": 1})
    with pytest.raises(ConfigError, match=r"task.params.n_min"):
        make_task("arith", {"n_min": 5, "n_max": 3})


def test_a_lab_can_register_its_own_task() -> None:
    @register_task
    class Echo(Task):
        name = "echo-test"

        def problems(self, n: int, rng: random.Random) -> list[Problem]:
            return [Problem(str(rng.randrange(10)), "x", 1) for _ in range(n)]

        def trace(self, problem: Problem, rng: random.Random) -> str:
            return "</think>x"

    try:
        task = make_task("echo-test", {})
        assert task.score(task.problems(1, random.Random(0))[0], "</think>x") == 1.0
    finally:
        TASKS.pop("echo-test")


def test_char_tokenizer_round_trip_and_specials() -> None:
    tok = CharTokenizer()
    ids = tok.encode("a3b5=</think>8")
    assert tok.decode(ids) == "a3b5=</think>8"
    assert ids[5] == tok.think_end_id and len(ids) == 7
    with pytest.raises(ConfigError, match="vocabulary"):
        tok.encode("é")
