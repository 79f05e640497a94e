"""The `math` verifier side by side with math-verify called directly, on the same checks.

1,000 completions (~1.2k characters of reasoning, then a boxed answer; half right, half wrong,
eight answer forms) are scored three ways: math-verify's ``parse`` + ``verify`` in this process
(its own time limits off, as our worker calls it), our ``MathVerifier.check`` in this process, and
our :class:`~scalerl.harness.rl.verifiers.Scorer` (a worker process with a per-check deadline). Each runs
twice (cold caches, then warm); the scores must agree.

    .venv/bin/python -m bench.verifier
"""

from __future__ import annotations

import random
import time

from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

from scalerl.harness.rl.verifiers import MathVerifier, get_verifier

FORMS = [
    ("\\frac{1}{2}", "0.5", "0.49"),
    ("3\\sqrt{2}", "\\sqrt{18}", "3\\sqrt{3}"),
    ("12", "12", "21"),
    ("-5", "-5", "5"),
    ("\\{1,2\\}", "\\{2,1\\}", "\\{1,3\\}"),
    ("(0,1]", "(0,1]", "[0,1]"),
    ("2^{10}", "1024", "1000"),
    ("\\pi/4", "\\frac{\\pi}{4}", "\\frac{\\pi}{3}"),
]


def corpus(n: int, seed: int = 0) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)
    completions, answers = [], []
    for i in range(n):
        gold, right, wrong = FORMS[i % len(FORMS)]
        words = " ".join(rng.choice(["so", "then", "we", "get", "x", "=", "2", "+", "3"]) for _ in range(300))
        completions.append(f"{words} </think> The answer is \\boxed{{{right if i % 2 else wrong}}}.")
        answers.append(gold)
    return completions, answers


def direct(completions: list[str], answers: list[str]) -> list[float]:
    gold_cfg = [LatexExtractionConfig(), ExprExtractionConfig()]
    out = []
    for c, a in zip(completions, answers, strict=True):
        gold = parse(f"\\boxed{{{a}}}", extraction_config=gold_cfg, parsing_timeout=None)
        pred = parse(c, parsing_timeout=None)
        out.append(float(verify(gold, pred, timeout_seconds=None)))
    return out


def main() -> None:
    completions, answers = corpus(1000)
    ours = MathVerifier()
    ours.warm_up()
    runs = {
        "math-verify direct (in process)": lambda: direct(completions, answers),
        "MathVerifier.check (in process)": lambda: [
            float(ours.check(c, a)) for c, a in zip(completions, answers, strict=True)
        ],
    }
    scorer = get_verifier("math", timeout_s=5.0)
    scorer("\\boxed{1}", "1")  # start the worker outside the timing (0.4 s, once per run)
    runs["Scorer (worker process, 5 s deadline)"] = lambda: scorer.score_many(completions, answers)
    results = {}
    for name, fn in runs.items():
        times = []
        for _ in range(2):
            t0 = time.perf_counter()
            scores = fn()
            times.append((time.perf_counter() - t0) / len(completions) * 1e3)
        results[name] = scores
        print(
            f"{name:40s} cold {times[0]:.2f} ms/check  warm {times[1]:.2f} ms/check  right {sum(scores):.0f}"
        )
    scorer.close()
    ours_scores = results["Scorer (worker process, 5 s deadline)"]
    agree = sum(a == b for a, b in zip(results["math-verify direct (in process)"], ours_scores, strict=True))
    print(f"agreement with math-verify direct: {agree}/{len(completions)}; timeouts {scorer.timeouts}")


if __name__ == "__main__":
    main()
