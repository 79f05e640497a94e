"""Reference-trainer throughput and memory on a checkpoint of a real model's *shape*.

Builds a random-initialised checkpoint (``scalerl.harness.rl.toy.build_checkpoint``; no download) shaped
like Qwen2.5-0.5B (24 layers, d 896, 14 heads / 2 KV heads, FFN 4864, 151,936-token embedding,
tied head) or, for a smoke run on a CPU, a toy shape; writes toy word problems; then times the
trainer's two halves per step: generation (``next_batch``: rollouts through ``generation.backend``)
and the update (``train_step``: log-prob recomputation, loss, backward, AdamW), and reports
generated tokens/s, trained tokens/s and peak GPU memory. Random weights do not stop at EOS, so
every rollout runs to ``--max-len``: the numbers are the worst case for that length.

    python -m bench.gpu_trainer --shape 0.5b --backend hf --steps 3          # on a GPU
    python -m bench.gpu_trainer --shape 0.5b --backend vllm --steps 3        # where vLLM installs
    python -m bench.gpu_trainer --shape toy --steps 2 --prompts 2 --gens 2   # CPU smoke run
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from scalerl.harness.recipe.schema import Recipe
from scalerl.harness.rl.toy import build_checkpoint, word_problems, write_jsonl
from scalerl.harness.rl.trainer import Trainer

SHAPES: dict[str, dict[str, Any]] = {
    "0.5b": dict(
        arch="qwen2",
        hidden=896,
        layers=24,
        heads=14,
        kv_heads=2,
        intermediate=4864,
        vocab_size=151_936,
        tie=True,
        max_positions=32_768,
    ),
    "1.5b": dict(
        arch="qwen2",
        hidden=1536,
        layers=28,
        heads=12,
        kv_heads=2,
        intermediate=8960,
        vocab_size=151_936,
        tie=True,
        max_positions=32_768,
    ),
    "toy": dict(arch="llama", hidden=64, layers=2, heads=4),
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", choices=sorted(SHAPES), default="0.5b")
    p.add_argument("--backend", choices=["hf", "vllm"], default="hf")
    p.add_argument("--steps", type=int, default=3, help="timed steps after one warm-up step")
    p.add_argument("--prompts", type=int, default=16, help="prompts per batch")
    p.add_argument("--gens", type=int, default=8, help="generations per prompt")
    p.add_argument("--max-len", type=int, default=1024, help="tokens generated per rollout")
    p.add_argument("--micro-batch", type=int, default=16)
    p.add_argument("--head", choices=["fp32", "model_dtype"], default="fp32", help="knobs.lm_head")
    p.add_argument("--no-grad-ckpt", action="store_true")
    p.add_argument("--out", type=Path, default=None, help="append the result as a JSON line here")
    args = p.parse_args()

    work = Path(tempfile.mkdtemp(prefix="gpu-bench-"))
    rows = word_problems(512, 0)
    write_jsonl(work / "train.jsonl", rows)
    texts = [r["question"] + " " + r["solution"] for r in rows]
    ckpt = build_checkpoint(work / "ckpt", texts=texts, **SHAPES[args.shape])
    half = args.max_len // 2
    recipe = Recipe(
        name=f"bench-{args.shape}",
        model={"path": str(ckpt), "dtype": "bfloat16", "gradient_checkpointing": not args.no_grad_ckpt},
        task={
            "name": "dataset",
            "params": {"path": str(work / "train.jsonl"), "val_size": 32, "prompt_field": "question"},
            "n_val": 32,
        },
        knobs={
            "lm_head": {"choice": args.head},
            "pipeline": {"choice": "ppo_off_policy", "alternatives": {"ppo_off_policy": {"k": 1}}},
            "zero_variance_filter": {"choice": "off"},  # random weights: every reward is 0
            "length_control": {
                "alternatives": {
                    "interruption": {"budget_min": half, "budget_max": half, "answer_tokens": half // 2}
                }
            },
        },
        scale={
            "prompts_per_batch": args.prompts,
            "generations_per_prompt": args.gens,
            "max_gen_len": args.max_len,
        },
        optimizer={"lr": 1e-6, "micro_batch": args.micro_batch},
        generation={"backend": args.backend},
        budget={"value": args.steps + 1, "unit": "steps"},
    )
    trainer = Trainer(recipe, 0)
    cuda = torch.cuda.is_available()
    gen_s = train_s = 0.0
    gen_tokens = trained_tokens = 0
    for step in range(args.steps + 1):
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        batch = trainer.next_batch()
        assert batch is not None
        if cuda:
            torch.cuda.synchronize()
        t1 = time.perf_counter()
        trainer.train_step(batch)
        if cuda:
            torch.cuda.synchronize()
        t2 = time.perf_counter()
        if step == 0:
            if cuda:
                torch.cuda.reset_peak_memory_stats()
            continue  # warm-up: kernel selection, allocator growth
        gen_s += t1 - t0
        train_s += t2 - t1
        gen_tokens += int(batch.lengths.sum())
        trained_tokens += sum(len(p) for p in batch.prompt_ids) + int(batch.lengths.sum())
    trainer.task.close()
    result = {
        "shape": args.shape,
        "backend": args.backend,
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "params": trainer.meter.state_dict()["n_params"],
        "rollouts_per_step": args.prompts * args.gens,
        "max_len": args.max_len,
        "lm_head": args.head,
        "gen_tokens_per_s": round(gen_tokens / gen_s, 1),
        "train_tokens_per_s": round(trained_tokens / train_s, 1),
        "s_per_step": round((gen_s + train_s) / args.steps, 2),
        "peak_gb": round(torch.cuda.max_memory_allocated() / 2**30, 2) if cuda else None,
    }
    print(json.dumps(result))
    if args.out:
        with args.out.open("a") as f:
            f.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
