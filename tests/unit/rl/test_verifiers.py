r"""The verifier registry: math-verify's real verdicts on a corpus of tricky answers, the ``exact`` and
``regex`` verifiers, the registry's errors, and the worker process (deadline, restart, clean exit).

The corpus asserts what math-verify 0.9 really does, surprises included (marked "surprise"): an
RL reward that changes when the library is upgraded should fail here first.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

from scalerl.harness.errors import ConfigError, ExecutionError
from scalerl.harness.rl.verifiers import (
    VERIFIERS,
    Scorer,
    Verifier,
    _last_boxed,
    get_verifier,
    register_verifier,
)

BIG = "7" * 5000


# Test-only verifier. It lives at the top level of this module (not registered on import) because
# the worker process imports it by ``module:qualname``, as it would a lab's own verifier.
@dataclass(frozen=True)
class MoodyVerifier(Verifier):
    """Misbehaves on cue: ``hang`` sleeps, ``raise`` raises, ``die`` kills the worker, ``die-once``
    kills it only if ``marker`` does not exist yet (creating it), ``print`` writes to stdout;
    anything else is an exact comparison."""

    name: ClassVar[str] = "moody-test"

    hang_s: float = 60.0
    marker: str = ""
    fail_warm_up: bool = False

    def warm_up(self) -> None:
        if self.fail_warm_up:
            raise RuntimeError("no such dataset on this node")

    def check(self, completion: str, answer: str) -> bool:
        if completion == "hang":
            time.sleep(self.hang_s)
        elif completion == "raise":
            raise RuntimeError("boom")
        elif completion == "die" or (completion == "die-once" and not os.path.exists(self.marker)):
            if self.marker:
                Path(self.marker).touch()
            os._exit(3)
        elif completion == "print":
            print("chatty verifier output", flush=True)
            os.write(1, b"and from C-level fd 1\n")
        return completion == answer or completion in ("die-once", "print")


@pytest.fixture
def moody() -> Iterator[str]:
    register_verifier(MoodyVerifier)
    yield MoodyVerifier.name
    VERIFIERS.pop(MoodyVerifier.name)


@pytest.fixture(scope="module")
def math_scorer() -> Iterator[Scorer]:
    with get_verifier("math") as scorer:
        yield scorer


# (completion, reference answer, expected score)
MATH_CORPUS: list[tuple[str, str, float]] = [
    # equivalent forms
    (r"so the answer is \boxed{\frac{1}{2}}", "0.5", 1.0),
    (r"\boxed{0.5}", r"\frac{1}{2}", 1.0),
    (r"\boxed{\dfrac12}", "0.5", 1.0),
    (r"\boxed{\tfrac{1}{2}}", "0.5", 1.0),
    (r"\boxed{1/2}", r"\frac{1}{2}", 1.0),
    (r"\boxed{.5}", "0.5", 1.0),
    (r"\boxed{50\%}", "0.5", 1.0),
    (r"\boxed{0.5}", r"50\%", 1.0),
    (r"\boxed{50}", r"50\%", 1.0),  # surprise: a percent gold accepts the bare number too ...
    (r"\boxed{50\%}", "50", 1.0),  # ... and a percent prediction matches the bare number
    (r"\boxed{0.5}", "50", 0.0),  # but 50 and 0.5 stay different
    (r"\boxed{2\sqrt{2}}", r"\sqrt{8}", 1.0),
    (r"\boxed{\frac{\sqrt{2}}{2}}", r"\frac{1}{\sqrt{2}}", 1.0),
    (r"\boxed{x^2+2x+1}", "(x+1)^2", 1.0),
    (r"\boxed{x=3}", "3", 1.0),
    (r"\boxed{y=3}", "3", 1.0),  # an assignment to any variable counts as its value
    (r"\boxed{3}", "x=3", 1.0),
    (r"\boxed{y=3}", "x=3", 0.0),  # strict: the variable matters when both sides are equations
    (r"\boxed{\{1,2\}}", r"\{2,1\}", 1.0),
    (r"\boxed{1,2}", r"\{1,2\}", 1.0),
    (r"\boxed{4, 3}", "3, 4", 1.0),
    (r"\boxed{(1,2)}", r"\{1,2\}", 1.0),  # surprise: (1,2) as a pair matches the set, even strict
    (r"\boxed{1, 2}", "(1,2)", 1.0),
    (r"\boxed{(1,2]}", "(1,2]", 1.0),
    (r"\boxed{(1,2)}", "(1,2]", 0.0),
    (r"\boxed{[1,2]}", "[1,2]", 1.0),
    (r"\boxed{(-\infty, 3)}", r"(-\infty,3)", 1.0),
    (r"\boxed{x<3}", r"(-\infty,3)", 0.0),  # an inequality does not match an interval gold
    (r"\boxed{1000}", "1,000", 1.0),
    (r"\boxed{1,000}", "1000", 1.0),
    (r"\boxed{1{,}000}", "1000", 1.0),
    (r"\boxed{1\,000}", "1000", 0.0),  # surprise: a thin-space separator parses as 1*0
    (r"\boxed{0,5}", "0.5", 0.0),  # a decimal comma inside a box is the set {0, 5}
    (r"\boxed{-5}", "-5", 1.0),
    (r"\boxed{−5}", "-5", 1.0),  # the unicode minus sign
    (r"\boxed{-0}", "0", 1.0),
    (r"\boxed{5\text{ cm}}", "5", 1.0),
    (r"\boxed{5}", r"5\text{ cm}", 1.0),
    (r"\boxed{5 cm}", "5", 1.0),
    (r"\boxed{5^\circ}", "5", 1.0),
    (r"\boxed{\$5}", "5", 1.0),
    (r"\boxed{\text{Monday}}", r"\text{Monday}", 1.0),
    (r"\boxed{monday}", r"\text{Monday}", 1.0),
    (r"\boxed{ab}", "ba", 1.0),  # surprise: bare letters are a product of symbols, so order is free
    (r"\boxed{1.0}", "1", 1.0),
    (r"\boxed{0.333333}", r"\frac{1}{3}", 1.0),  # float_rounding=6
    (r"\boxed{2^{100}}", "1267650600228229401496703205376", 1.0),
    # wrong answers that look right
    (r"\boxed{0.49}", "0.5", 0.0),
    (r"\boxed{0.33}", r"\frac{1}{3}", 0.0),
    (r"\boxed{1.000001}", "1", 0.0),
    (r"\boxed{21}", "12", 0.0),
    (r"\boxed{-5}", "5", 0.0),
    (r"\boxed{5}", "-5", 0.0),
    (r"\boxed{\sqrt{2}/2}", r"\sqrt{2}", 0.0),
    (r"\boxed{3.14}", r"\pi", 0.0),
    (r"\boxed{\pi}", "3.14159", 0.0),
    (r"\boxed{dynamo}", r"\text{Monday}", 0.0),
    (r"\boxed{B}", "A", 0.0),
    # nested and multiple boxes: the last complete box is the answer
    (r"\boxed{\boxed{5}}", "5", 1.0),
    (r"\boxed{\boxed{\frac{1}{2}}}", "0.5", 1.0),
    (r"$\boxed{\frac{1}{2}}$.", "0.5", 1.0),
    (r"\boxed{5} Wait, no: \boxed{6}", "6", 1.0),
    (r"\boxed{5} Wait, no: \boxed{6}", "5", 0.0),
    (r"\boxed{1}, \boxed{2}, \boxed{3}", "2", 0.0),  # hedging over every candidate earns nothing
    (r"first $x = 5$. Final: \boxed{6}", "6", 1.0),
    (r"\boxed{6}, as $x = 5$ shows", "6", 1.0),
    # no box: math-verify's own search (answer anchors, then the last number or expression)
    ("so the answer is 12", "12", 1.0),
    ("so the answer is 12.", "12", 1.0),
    ("12 apples, then 5 more, total 17", "17", 1.0),
    ("total 17, and then 3", "17", 0.0),  # the last number wins
    ("answer: 5\n\nHmm, 7", "5", 1.0),  # an "answer:" anchor beats a later number
    ("The final answer is 5. I hope it is correct. 7", "5", 1.0),
    (r"The answer is $3\sqrt{2}$", r"3\sqrt{2}", 1.0),
    (r"The answer is 3\sqrt{2}", r"3\sqrt{2}", 0.0),  # surprise: LaTeX outside $ parses as "3"
    ("The answer is twelve", "12", 0.0),
    (r"$\frac{1}{2}$", "0.5", 1.0),
    # huge numbers
    (r"\boxed{10^{10^{10}}}", r"10^{10^{10}}", 1.0),
    (r"\boxed{10^{10^{10}}}", r"10^{10^{10}}+1", 0.0),
    (r"\boxed{" + BIG + "}", BIG, 1.0),
    (r"\boxed{" + BIG[:-1] + "8}", BIG, 0.0),
    # malformed output: never raises, scores what it says
    ("", "12", 0.0),
    ("💥\x00\ud800 ∑∫ \\\\ {{{ }}}}} \\boxed{", "5", 0.0),
    (r"\boxed{\frac{1}{2}", "0.5", 1.0),  # an unclosed box still parses (math-verify's fallback)
    (r"\boxed{}", "5", 0.0),
    ("answer: " + "(" * 3000, "5", 0.0),
]


@pytest.mark.parametrize(("completion", "answer", "expected"), MATH_CORPUS)
def test_math_corpus(math_scorer: Scorer, completion: str, answer: str, expected: float) -> None:
    before = (math_scorer.timeouts, math_scorer.errors)
    assert math_scorer(completion, answer) == expected
    assert (math_scorer.timeouts, math_scorer.errors) == before  # no case raised or hung


def test_score_many_equals_one_by_one_and_is_deterministic(math_scorer: Scorer) -> None:
    completions = [c for c, _, _ in MATH_CORPUS]
    answers = [a for _, a, _ in MATH_CORPUS]
    many = math_scorer.score_many(completions, answers)
    assert many == [math_scorer(c, a) for c, a in zip(completions, answers, strict=True)]
    assert many == [e for _, _, e in MATH_CORPUS]
    assert math_scorer.score_many(completions, answers) == many
    assert math_scorer.score_many([], []) == []
    with pytest.raises(ValueError, match="2 completions but 1 answers"):
        math_scorer.score_many(["a", "b"], ["a"])


def test_math_params_reach_verify() -> None:
    with get_verifier("math", float_rounding=2) as loose, get_verifier("math", strict=False) as lax:
        assert loose(r"\boxed{0.33}", r"\frac{1}{3}") == 1.0
        assert lax(r"\boxed{y=3}", "x=3") == 1.0  # not strict: variables are matched by position


def test_a_sympy_hang_is_stopped_and_the_next_check_uses_a_fresh_worker() -> None:
    # sympy tries to decide 10^(10^10) == 5 exactly and would run for minutes.
    with get_verifier("math", timeout_s=1.0) as scorer:
        assert scorer(r"\boxed{10^{10^{10}}}", "5") == 0.0
        assert (scorer.timeouts, scorer.errors, scorer.worker_pid) == (1, 0, None)
        assert scorer(r"\boxed{5}", "5") == 1.0
        assert scorer.worker_pid is not None


@pytest.mark.parametrize(
    ("completion", "answer", "expected"),
    [
        ("  42 ", "42", 1.0),
        ("4 2", "42", 0.0),
        ("The  answer\n is   X", "the answer is x", 1.0),
        ("$42$", "42", 1.0),
        ("$$42$$", "42", 0.0),  # one pair of dollars is stripped, not two
        ("$ \\boxed{ x + 1 } $", "x + 1", 1.0),
        (r"so \boxed{42}.", "42", 1.0),
        (r"\boxed{1} then \boxed{2}", "2", 1.0),
        (r"\boxed{\boxed{7}}", "7", 1.0),
        (r"\boxed{\{1,2\}}", r"\{1,2\}", 1.0),
        (r"\boxed{\frac{1}{2}}", r"\frac{1}{2}", 1.0),
        (r"\boxed{\frac{1}{2}", r"\frac{1}{2}", 0.0),  # unclosed: no box, the whole text differs
        ("0.5", r"\frac{1}{2}", 0.0),  # no mathematics here
        ("ABC", "abc", 1.0),
        ("straße", "STRASSE", 1.0),  # case-folded
        ("", "5", 0.0),
    ],
)
def test_exact(completion: str, answer: str, expected: float) -> None:
    with get_verifier("exact") as scorer:
        assert scorer(completion, answer) == expected
        assert scorer.worker_pid is None  # in-process: no worker


@pytest.mark.parametrize(
    ("text", "content"),
    [
        (r"\boxed{5}", "5"),
        (r"a \boxed{1} b \boxed{2} c", "2"),
        (r"\boxed{\boxed{5}}", "5"),
        (r"\boxed{ \boxed{5} }", "5"),
        (r"\boxed{\boxed{5} + 1}", r"\boxed{5} + 1"),  # not a box wrapping a box: kept whole
        (r"\boxed{\{1,2\}}", r"\{1,2\}"),
        (r"\boxed{\frac{1}{2}", None),
        (r"\boxed{1} \boxed{\frac{1}{2}", "1"),
        (r"\boxed{a}}", "a"),
        ("no box", None),
        (r"\boxed{}", ""),
        ("\\boxed{" * 20_000 + "9" + "}" * 20_000, "9"),  # deep nesting: no recursion
    ],
)
def test_last_boxed(text: str, content: str | None) -> None:
    assert _last_boxed(text) == content


@pytest.mark.parametrize(
    ("params", "completion", "answer", "expected"),
    [
        ({"pattern": r"answer: (\S+)"}, "answer: 3\nanswer: 4", "4", 1.0),
        ({"pattern": r"answer: (\S+)"}, "answer: 3\nanswer: 4", "3", 0.0),  # the last match
        ({"pattern": r"\d+"}, "1, 2 and 3", "3", 1.0),  # no group: the whole match
        ({"pattern": r"answer: (\w+)"}, "ANSWER: Yes", "yes", 0.0),
        ({"pattern": r"answer: (\w+)", "flags": ["IGNORECASE"]}, "ANSWER: Yes", "yes", 1.0),
        ({"pattern": r"<a>(.*)</a>", "flags": ["DOTALL"]}, "<a>x\n y</a>", "x y", 1.0),
        ({"pattern": r"answer: (\d+)?"}, "answer: x", "5", 0.0),  # group 1 did not take part
        ({"pattern": r"answer: (.*)"}, r"answer: \boxed{7}", "7", 1.0),  # exact's normalisation
        ({"pattern": r"answer: (\d+)"}, "no answer here", "5", 0.0),
    ],
)
def test_regex(params: dict[str, Any], completion: str, answer: str, expected: float) -> None:
    with get_verifier("regex", **params) as scorer:
        assert scorer(completion, answer) == expected
        assert (scorer.timeouts, scorer.errors) == (0, 0)


@pytest.mark.timeout(30)
def test_catastrophic_backtracking_is_stopped() -> None:
    with get_verifier("regex", pattern=r"(a+)+$", timeout_s=0.5) as scorer:
        assert scorer("a" * 40 + "b", "a") == 0.0
        assert scorer.timeouts == 1
        assert scorer("aaa", "aaa") == 1.0


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        (
            "nope",
            {},
            r"task.params.verifier='nope': unknown verifier \(fix: use one of \['exact', 'math', 'regex'",
        ),
        (
            "math",
            {"rounding": 3},
            r"task.params.verifier_params=.*rounding.*\(fix: valid parameters of "
            r"verifier 'math': float_rounding=6, strict=True\)",
        ),
        ("math", {"float_rounding": "6"}, r"verifier_params.*float_rounding='6' must be an integer"),
        ("math", {"strict": "yes"}, r"verifier_params.*strict='yes' must be true or false"),
        (
            "regex",
            {},
            r"verifier_params.*pattern.*\(fix: valid parameters of verifier 'regex': "
            r"pattern \(required\), flags=\(\)\)",
        ),
        (
            "regex",
            {"pattern": "answer: (\\d+"},
            r"verifier_params.*pattern 'answer: \(\\\\d\+' does not "
            r"compile: missing \), unterminated subpattern.*\(fix: valid parameters",
        ),
        (
            "regex",
            {"pattern": "x", "flags": ["IGNORE"]},
            r"verifier_params.*flags=\['IGNORE'\] must be a list "
            r"of \['ASCII', 'DOTALL', 'IGNORECASE', 'MULTILINE', 'VERBOSE'\]",
        ),
        ("regex", {"pattern": "x", "flags": "DOTALL"}, r"flags='DOTALL' must be a list"),
        ("regex", {"pattern": {1}}, r"verifier_params.*parameters must be JSON values"),
        ("exact", {"timeout_s": 0}, r"task.params.verifier_timeout_s=0: must be a finite number > 0 \(fix:"),
        ("exact", {"timeout_s": float("inf")}, r"task.params.verifier_timeout_s=inf: must be a finite"),
        ("exact", {"case": True}, r"verifier_params.*\(fix: valid parameters of verifier 'exact': none\)"),
    ],
)
def test_registry_errors_name_the_field_and_the_fix(name: str, params: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        get_verifier(name, **params)


def test_a_verifier_the_worker_cannot_import_is_refused() -> None:
    @dataclass(frozen=True)
    class Local(Verifier):
        name: ClassVar[str] = "local-test"

        def check(self, completion: str, answer: str) -> bool:
            return True

    @dataclass(frozen=True)
    class LocalInProcess(Local):
        name: ClassVar[str] = "local-in-process-test"
        in_process: ClassVar[bool] = True

    register_verifier(Local)
    register_verifier(LocalInProcess)
    try:
        with pytest.raises(
            ConfigError, match=r"task.params.verifier='local-test'.*cannot import \(fix: define it"
        ):
            get_verifier("local-test")
        with get_verifier("local-in-process-test") as scorer:  # runs in the caller: fine
            assert scorer("x", "y") == 1.0
    finally:
        VERIFIERS.pop("local-test")
        VERIFIERS.pop("local-in-process-test")
    with pytest.raises(TypeError, match="needs a class attribute `name"):
        register_verifier(Verifier)  # type: ignore[type-abstract]


@pytest.mark.timeout(30)
def test_a_hanging_check_is_killed_and_the_next_check_gets_a_fresh_worker(moody: str) -> None:
    with get_verifier(moody, timeout_s=0.5) as scorer:
        assert scorer("ok", "ok") == 1.0
        first = scorer.worker_pid
        assert scorer("hang", "hang") == 0.0
        assert (scorer.timeouts, scorer.errors, scorer.worker_pid) == (1, 0, None)
        assert scorer("ok", "ok") == 1.0
        assert scorer.worker_pid not in (None, first)
        assert scorer.score_many(["ok", "hang", "no", "ok"], ["ok", "hang", "ok", "ok"]) == [
            1.0,
            0.0,
            0.0,
            1.0,
        ]
        assert (scorer.timeouts, scorer.errors) == (2, 0)


def test_errors_and_dying_workers_score_zero(moody: str, tmp_path: Path) -> None:
    with get_verifier(moody, marker=str(tmp_path / "died")) as scorer:
        assert scorer("raise", "raise") == 0.0
        assert (scorer.timeouts, scorer.errors) == (0, 1)
        pid = scorer.worker_pid
        assert scorer("ok", "ok") == 1.0 and scorer.worker_pid == pid  # an exception keeps the worker
        assert scorer("die-once", "x") == 1.0  # died, restarted, retried once: fine
        assert scorer.errors == 1 and scorer.worker_pid != pid
        assert scorer("die", "die") == 0.0  # dies on every try: scored 0.0 after one retry
        assert (scorer.timeouts, scorer.errors) == (0, 2)
        assert scorer("print", "x") == 1.0  # prints do not corrupt the protocol
        assert scorer("ok", "ok") == 1.0


def test_a_worker_that_cannot_start_raises_naming_the_verifier(moody: str) -> None:
    scorer = get_verifier(moody, fail_warm_up=True)  # starts nothing yet
    with pytest.raises(
        ExecutionError,
        match=r"(?s)verifier 'moody-test'.*could not start: RuntimeError: no such "
        r"dataset on this node; worker stderr: Traceback.*no such dataset",
    ):
        scorer("ok", "ok")
    assert scorer.worker_pid is None


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_close_stops_the_worker_and_is_idempotent() -> None:
    scorer = get_verifier("math")
    assert scorer.worker_pid is None  # started lazily
    assert scorer(r"\boxed{12}", "12") == 1.0
    pid = scorer.worker_pid
    assert pid is not None and not _gone(pid)
    scorer.close()
    assert scorer.worker_pid is None and _gone(pid)
    scorer.close()


def test_the_worker_exits_when_its_stdin_closes() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "scalerl.harness.rl.verify_worker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    start = {"cls": "scalerl.harness.rl.verifiers:ExactVerifier", "params": {}, "path": sys.path}
    proc.stdin.write(
        json.dumps(start).encode() + b"\n" + json.dumps({"c": "é\ud800", "a": "É\ud800"}).encode() + b"\n"
    )
    proc.stdin.flush()
    assert [json.loads(proc.stdout.readline()) for _ in range(2)] == [{"ok": True}, {"r": True}]
    proc.stdin.close()  # as when the parent dies
    assert proc.wait(timeout=30) == 0
    proc.stdout.close()


def test_math_from_a_thread() -> None:
    # math-verify's own timeouts would raise here (signal.alarm outside the main thread).
    results: list[float] = []
    with get_verifier("math") as scorer:
        thread = threading.Thread(target=lambda: results.append(scorer(r"\boxed{\dfrac12}", "0.5")))
        thread.start()
        thread.join()
        assert results == [1.0]
        # The worker started by that (now finished) thread is told to exit with it; the next check
        # from this thread starts another without counting an error.
        assert scorer(r"\boxed{2\sqrt{2}}", r"\sqrt{8}") == 1.0
        assert (scorer.timeouts, scorer.errors) == (0, 0)
