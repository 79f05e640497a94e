"""Trainer throughput: this harness's reference trainer vs TRL's GRPOTrainer, same model and batch.

Both train the same warm-started tiny policy (recipes/tiny.yaml's model) on the same ``arith``
prompts with the same batch (prompts x generations), completion length cap, learning rate and
steps, on CPU, in one process, one after the other. Reported: optimizer steps per second and
generated tokens per second (completion tokens the policy produced, divided by the wall time of
the training loop; model building and our validation passes are excluded on both sides).

Run:  OMP_NUM_THREADS=1 .venv/bin/python -m bench.trainer [--steps 30] [--threads 1]

TRL needs an HF tokenizer: the harness's character vocabulary is rebuilt as a
``PreTrainedTokenizerFast`` locally (no download). TRL runs with ``beta=0`` (no reference model:
ScaleRL has no KL term) and ``loss_type="dapo"`` defaults otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch

from scalerl.harness.recipe.loader import load_recipe
from scalerl.harness.rl.model import build_policy
from scalerl.harness.rl.sink import ListSink
from scalerl.harness.rl.tasks import make_split, make_task
from scalerl.harness.rl.tokenizer import CharTokenizer
from scalerl.harness.rl.trainer import train

ROOT = Path(__file__).resolve().parents[1]


def _hf_tokenizer(tok: CharTokenizer) -> Any:
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate(tok.vocab)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<pad>"))
    # Special words first, then single characters: the same segmentation as CharTokenizer.
    core.pre_tokenizer = pre_tokenizers.Split(Regex(r"</think>|<bos>|<eos>|<pad>|."), behavior="isolated")
    fast = PreTrainedTokenizerFast(
        tokenizer_object=core, bos_token="<bos>", eos_token="<eos>", pad_token="<pad>"
    )
    fast.padding_side = "left"
    return fast


def bench_ours(recipe: Any, steps: int) -> dict[str, float]:
    r = recipe.model_copy(
        update={
            "budget": recipe.budget.model_copy(update={"value": steps, "unit": "steps"}),
            "eval": recipe.eval.model_copy(update={"every_steps": 10_000, "n_val": 1}),
            "checkpoint_every_steps": 10_000,
        }
    )
    sink = ListSink()
    with tempfile.TemporaryDirectory() as work:
        res = train(r, 0, sink=sink, workdir=Path(work))
    wall = res.compute["wall_s"]  # training loop only (validation excluded by the meter)
    return {
        "steps": res.steps,
        "wall_s": wall,
        "steps_per_s": res.steps / wall,
        "gen_tokens_per_s": res.compute["tokens"] / wall,
    }


def bench_trl(recipe: Any, steps: int) -> dict[str, float]:
    from datasets import Dataset  # type: ignore[import-untyped]
    from trl import GRPOConfig, GRPOTrainer

    policy = build_policy(recipe)
    tok = _hf_tokenizer(CharTokenizer())
    task = make_task(recipe.task.name, recipe.task.params)
    split = make_split(task, recipe.task.n_train, recipe.task.n_val, recipe.task.seed)
    answers = {p.prompt: p for p in split.train}
    data = Dataset.from_dict({"prompt": ["<bos>" + p.prompt for p in split.train]})

    def reward(prompts: list[str], completions: list[str], **_: Any) -> list[float | None]:
        return [
            task.score(answers[p.removeprefix("<bos>")], c.replace("<eos>", ""))
            for p, c in zip(prompts, completions, strict=True)
        ]

    s = recipe.scale
    with tempfile.TemporaryDirectory() as out:
        cfg = GRPOConfig(
            output_dir=out,
            use_cpu=True,
            report_to="none",
            max_steps=steps,
            logging_steps=1,
            per_device_train_batch_size=s.prompts_per_batch * s.generations_per_prompt,
            num_generations=s.generations_per_prompt,
            max_completion_length=s.max_gen_len,
            learning_rate=recipe.optimizer.lr,
            beta=0.0,
            temperature=recipe.generation.temperature,
            bf16=False,
            save_strategy="no",
            seed=0,
            dataloader_num_workers=0,
        )
        trainer = GRPOTrainer(
            model=policy.model, reward_funcs=reward, args=cfg, train_dataset=data, processing_class=tok
        )
        t0 = time.perf_counter()
        trainer.train()
        wall = time.perf_counter() - t0
    keys = ("completions/mean_length", "completion_length")  # newer / older TRL log names
    per_step = [
        next(h[k] for k in keys if k in h) for h in trainer.state.log_history if any(k in h for k in keys)
    ]
    tokens = sum(per_step) * s.prompts_per_batch * s.generations_per_prompt
    return {"steps": steps, "wall_s": wall, "steps_per_s": steps / wall, "gen_tokens_per_s": tokens / wall}


def _loo_run(item: tuple[str, str, list[str]]) -> dict[str, Any]:
    name, recipe_path, overrides = item
    torch.set_num_threads(1)
    recipe = load_recipe(recipe_path, overrides)
    sink = ListSink()
    with tempfile.TemporaryDirectory() as work:
        res = train(recipe, 0, sink=sink, workdir=Path(work))
    curve = [(p.step, p.compute["flops"], p.metrics["val/pass_rate"]) for p in sink.points]
    return {"variant": name, "curve": curve, "wall_s": res.compute["wall_s"]}


def loo(recipe_path: str, processes: int) -> None:
    """Every LOO variant of the recipe once (seed 0), two at a time: start/end and a sigmoid fit."""
    from multiprocessing import get_context

    from scalerl.harness.recipe.schema import KNOB_SPECS

    items: list[tuple[str, str, list[str]]] = [("baseline", recipe_path, [])] + [
        (spec.loo_name, recipe_path, [f"knobs.{knob}.choice={spec.loo}"]) for knob, spec in KNOB_SPECS.items()
    ]
    with get_context("spawn").Pool(processes) as pool:
        results = pool.map(_loo_run, items)
    for r in results:
        _, flops, vals = zip(*r["curve"], strict=True)
        fit = _fit(list(flops), list(vals))
        tail = sum(vals[-3:]) / 3
        print(
            json.dumps(
                {
                    "variant": r["variant"],
                    "start": vals[0],
                    "end": vals[-1],
                    "mean_last3": tail,
                    "max": max(vals),
                    "wall_s": round(r["wall_s"], 1),
                    "fit": fit,
                    "curve": [round(v, 3) for v in vals],
                }
            )
        )


def _fit(flops: list[float], vals: list[float]) -> dict[str, Any] | None:
    try:
        from scalerl.harness.analysis import fit_sigmoid
    except ImportError:
        return None
    try:
        f = fit_sigmoid(flops[1:], vals[1:], r0=vals[0])  # step 0 (zero compute) gives R0
    except Exception as err:  # a variant that cannot be fitted is a result, not a crash
        return {"error": str(err)[:120]}
    return {k: getattr(f, k) for k in ("r0", "a", "b", "c_mid", "status") if hasattr(f, k)}


def mismatch(recipe_path: str, overrides: list[str], batches: int = 4) -> None:
    """Generator-vs-trainer log-prob mismatch on the warm-started policy, same weights (lag 0):
    FP32 head vs bf16 head vs no engine rounding. Prints mean |delta log p| and the k3 KL."""
    from scalerl.harness.rl.diagnostics import mismatch_sums
    from scalerl.harness.rl.trainer import Trainer

    cases: tuple[tuple[str, list[str]], ...] = (
        ("fp32 head (baseline)", []),
        ("bf16 head (model_dtype, loo-fp32)", ["knobs.lm_head.choice=model_dtype"]),
        ("no engine rounding (model.dtype=float32)", ["model.dtype=float32"]),
    )
    for label, extra in cases:
        tr = Trainer(load_recipe(recipe_path, [*overrides, *extra]), 0)
        rng = torch.Generator().manual_seed(0)
        abs_sum = kl_sum = 0.0
        tokens = 0
        for b in range(batches):
            cohort = tr._start(range(b * 64, (b + 1) * 64), tr.split.train, 8, tr.spec, rng)
            while not cohort.done():
                tr.gen.advance(cohort, tr.spec.max_len, rng)
            batch = cohort.result()
            with torch.no_grad():
                logp = tr.token_logprobs(batch, torch.arange(batch.tokens.shape[0]))
            a, k, n = mismatch_sums(logp, batch.logp, batch.versions, batch.mask, 0)
            abs_sum, kl_sum, tokens = abs_sum + a, kl_sum + k, tokens + n
        print(f"{label}: {tokens} tokens, mean |dlogp| {abs_sum / tokens:.2e}, KL(k3) {kl_sum / tokens:.2e}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--recipe", default=str(ROOT / "recipes" / "tiny.yaml"))
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--loo", action="store_true", help="run the recipe's LOO variants instead")
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--mismatch", action="store_true", help="FP32-head log-prob mismatch on the warm start")
    ap.add_argument("overrides", nargs="*", metavar="key=value", help="recipe overrides (both trainers)")
    args = ap.parse_args()
    if args.loo:
        loo(args.recipe, args.processes)
        return
    if args.mismatch:
        mismatch(args.recipe, args.overrides)
        return
    torch.set_num_threads(args.threads)
    os.environ["SCALERL_TORCH_THREADS"] = str(args.threads)  # our trainer pins its threads from it
    # Same pipeline for a fair per-step comparison: TRL is synchronous and on-policy.
    same = ["knobs.pipeline.choice=ppo_off_policy", "knobs.pipeline.alternatives.ppo_off_policy.k=1"]
    recipe = load_recipe(args.recipe, [*same, *args.overrides])
    ours = bench_ours(recipe, args.steps)
    trl = bench_trl(recipe, args.steps)
    print(
        json.dumps(
            {
                "date": datetime.now(UTC).strftime("%Y-%m-%d"),
                "machine": platform.platform(),
                "cpu": platform.processor() or platform.machine(),
                "threads": args.threads,
                "ours": ours,
                "trl": trl,
                "ratio_steps_per_s": ours["steps_per_s"] / trl["steps_per_s"],
                "ratio_gen_tokens_per_s": ours["gen_tokens_per_s"] / trl["gen_tokens_per_s"],
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
