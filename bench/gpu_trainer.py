"""GPU bench: the reference trainer against TRL's GRPOTrainer on the same model and batch, and
what the FP32 LM head (``knobs.lm_head``; its LOO variant is loo-fp32) buys and costs.

One command builds a random-initialised checkpoint shaped like Qwen2.5-0.5B (24 layers, d 896,
14 / 2 heads, FFN 4864, 151,936-token tied embedding; ``scalerl.harness.rl.toy.build_checkpoint``,
no download) and toy word problems, then runs each case in a fresh process (so one trainer's
process-wide settings, e.g. the reference trainer's deterministic-algorithms pin, never touch the
next), one after the other, appending one JSON line per case to ``OUT/results.jsonl``:

- ``ours-fp32`` / ``ours-bf16``: the reference trainer (``hf`` generation, bf16 engine copy,
  float32 master weights, body under bf16 autocast, gradient checkpointing, micro-batches) with
  the FP32 head and with the bf16 head; steady-state step time split into generation
  (``next_batch``) and update (``train_step``), generated and trained tokens/s, samples/s, peak
  GPU memory, and the trainer's own ``diag/logp_abs_diff`` / ``diag/logp_kl`` over the timed steps.
- ``trl``: TRL's GRPOTrainer on the same checkpoint, prompts (through the same chat template),
  prompts x generations, completion cap, micro-batch (``per_device_train_batch_size`` with
  gradient accumulation so one optimizer step takes the whole batch, as ours does), AdamW
  settings, gradient checkpointing and bf16 mixed precision; ``beta=0``, ``loss_type="cispo"``.
  Generation time is the wall time of its ``_generate_single_turn``.
- ``mismatch``: a short supervised warm start of the same checkpoint on the GPU (so the policy is
  peaked, as a trained one is), then the generator-vs-trainer log-prob mismatch on the same
  weights (lag 0) with the FP32 head, the bf16 head, and no engine rounding (``model.dtype``
  float32): mean |delta log p| and the k3 KL, as ``bench/trainer.py --mismatch`` does on CPU.
- ``before``: ``ours-fp32`` on another checkout (``--before-path``), e.g. main before a change.
- ``ours-relaxed`` (on request): ``ours-fp32`` with the deterministic algorithms that the trainer's
  numerics pin turns on (warn-only on CUDA) turned off again, to price that pin.
- ``probe`` (on request): where generation time goes (see :func:`case_probe`).

Results, the exact commands and the machine: bench/README.md, "GPU: trainer throughput and the
FP32 head".

Random weights almost never emit EOS, so every rollout runs to ``--max-len`` on both sides and
the tokens compared are the same count. Both trainers see rewards of 0 everywhere; ours runs with
the zero-variance filter off and the length penalty as its length control (no interruption), so
both sides forward and backward every sequence in full.

    python bench/gpu_trainer.py --out /tmp/gpu-bench                 # on a GPU, the default cases
    python bench/gpu_trainer.py --cases probe --probe-max-len 64     # where generation time goes
    python bench/gpu_trainer.py --smoke --out /tmp/gpu-smoke         # CPU: toy shape, every case
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch

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
    "toy": dict(arch="qwen2", hidden=64, layers=2, heads=4, kv_heads=2, vocab_size=4096, tie=True),
}
GPU_CASES = ("ours-fp32", "trl", "ours-bf16", "mismatch", "before")  # "probe": on request


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _peak_reset() -> None:
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()


def _peak_gb() -> float | None:
    return round(torch.cuda.max_memory_allocated() / 2**30, 2) if torch.cuda.is_available() else None


def _progress(step: int, gen_s: float, train_s: float, gen_tokens: int) -> None:
    """One line per step on stdout, so a case cut off by its timeout still reports its steps."""
    row = {"step": step, "gen_s": round(gen_s, 3), "train_s": round(train_s, 3), "gen_tokens": gen_tokens}
    print("STEP " + json.dumps(row), flush=True)


def _read_jsonl(path: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# ---------------------------------------------------------------------------------------- ours
def _recipe(a: argparse.Namespace, ckpt: str, head: str, dtype: str = "bfloat16") -> Any:
    from scalerl.harness.recipe.schema import Recipe

    steps = a.warmup + a.steps
    return Recipe(
        name="gpu-bench",
        model={"path": ckpt, "dtype": dtype, "gradient_checkpointing": True},
        task={
            "name": "dataset",
            "params": {
                "path": a.data,
                "val_size": 32,
                "prompt_field": "question",
                "answer_field": "answer",
                "solution_field": "solution",
                "verifier": "exact",
            },
            "n_val": 32,
        },
        knobs={
            "lm_head": {"choice": head},
            "pipeline": {"choice": "ppo_off_policy", "alternatives": {"ppo_off_policy": {"k": 1}}},
            "zero_variance_filter": {"choice": "off"},  # random weights: every reward is equal
            "length_control": {
                "choice": "length_penalty",
                "alternatives": {"length_penalty": {"l_max": a.max_len, "l_cache": max(1, a.max_len // 4)}},
            },
        },
        scale={
            "prompts_per_batch": a.prompts,
            "generations_per_prompt": a.gens,
            "max_gen_len": a.max_len,
        },
        optimizer={"lr": 1e-6, "warmup_steps": 0, "micro_batch": a.micro_batch},
        generation={"backend": "hf"},
        budget={"value": steps, "unit": "steps"},
    )


def case_ours(a: argparse.Namespace) -> dict[str, Any]:
    from scalerl.harness.rl.trainer import StepStats, Trainer

    head = "model_dtype" if a.case == "ours-bf16" else "fp32"
    t_build = time.perf_counter()
    trainer = Trainer(_recipe(a, a.ckpt, head), 0)
    build_s = time.perf_counter() - t_build
    if a.case == "ours-relaxed":
        # The trainer's pin turns on deterministic algorithms (warn-only on CUDA, which also fills
        # every fresh torch.empty); GPU runs are not claimed bit-exact, so measure without it.
        import torch.utils.deterministic as det_cfg

        torch.use_deterministic_algorithms(False)
        det_cfg.fill_uninitialized_memory = False  # type: ignore[attr-defined]
    gen_s = train_s = 0.0
    gen_tokens = trained_tokens = rollouts = 0
    first_step_s = 0.0
    for step in range(a.warmup + a.steps):
        _sync()
        t0 = time.perf_counter()
        batch = trainer.next_batch()
        assert batch is not None
        _sync()
        t1 = time.perf_counter()
        trainer.train_step(batch)
        _sync()
        t2 = time.perf_counter()
        _progress(step, t1 - t0, t2 - t1, int(batch.lengths.sum()))
        if step < a.warmup:
            first_step_s += t2 - t0
            if step == a.warmup - 1:
                _peak_reset()
                trainer.stats = StepStats.empty()  # diagnostics of the timed steps only
            continue
        gen_s += t1 - t0
        train_s += t2 - t1
        gen_tokens += int(batch.lengths.sum())
        trained_tokens += sum(len(p) for p in batch.prompt_ids) + int(batch.lengths.sum())
        rollouts += len(batch.prompt_ids)
    diag = trainer.stats.diag.metrics(0)
    trainer.task.close()
    step_s = (gen_s + train_s) / a.steps
    import scalerl

    return {
        "lm_head": head,
        "scalerl": str(Path(scalerl.__file__).resolve().parent),
        "params_non_embedding": trainer.meter.state_dict()["n_params"],
        "build_s": round(build_s, 1),
        "warmup_s": round(first_step_s, 2),
        "s_per_step": round(step_s, 3),
        "gen_s_per_step": round(gen_s / a.steps, 3),
        "train_s_per_step": round(train_s / a.steps, 3),
        "samples_per_s": round(rollouts / (gen_s + train_s), 2),
        "gen_tokens_per_s": round(gen_tokens / gen_s, 1),
        "train_tokens_per_s": round(trained_tokens / train_s, 1),
        "tokens_per_s": round(gen_tokens / (gen_s + train_s), 1),
        "mean_completion_len": round(gen_tokens / rollouts, 1),
        "peak_gb": _peak_gb(),
        "diag/logp_abs_diff": diag.get("diag/logp_abs_diff"),
        "diag/logp_kl": diag.get("diag/logp_kl"),
    }


# ---------------------------------------------------------------------------------------- TRL
def case_trl(a: argparse.Namespace) -> dict[str, Any]:
    import transformers
    import trl
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    cuda = torch.cuda.is_available()
    rows = _read_jsonl(Path(a.data))
    data = Dataset.from_list(
        [{"prompt": [{"role": "user", "content": r["question"]}], "answer": r["answer"]} for r in rows]
    )
    boxed = re.compile(r"\\boxed\{([^{}]*)\}")

    def reward(completions: list[Any], answer: list[str], **_: Any) -> list[float | None]:
        out: list[float | None] = []
        for c, gold in zip(completions, answer, strict=True):
            text = c[0]["content"] if isinstance(c, list) else str(c)
            found = boxed.findall(text)
            out.append(1.0 if found and found[-1].strip() == gold else 0.0)
        return out

    tok = AutoTokenizer.from_pretrained(a.ckpt, local_files_only=True)
    tok.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(a.ckpt, dtype=torch.float32, local_files_only=True)
    n = a.prompts * a.gens
    if n % a.micro_batch:
        raise SystemExit(f"prompts x gens ({n}) must be a multiple of --micro-batch ({a.micro_batch})")
    steps = a.warmup + a.steps
    with tempfile.TemporaryDirectory() as out:
        cfg = GRPOConfig(
            output_dir=out,
            use_cpu=not cuda,
            bf16=cuda,  # float32 master weights, bf16 autocast (as ours on a GPU)
            report_to="none",
            max_steps=steps,
            logging_steps=1,
            save_strategy="no",
            seed=0,
            dataloader_num_workers=0,
            per_device_train_batch_size=a.micro_batch,
            gradient_accumulation_steps=n // a.micro_batch,  # one optimizer step per batch
            num_generations=a.gens,
            max_completion_length=a.max_len,
            temperature=1.0,
            top_p=1.0,
            top_k=0,
            beta=0.0,
            loss_type="cispo",
            epsilon_high=4.0,
            learning_rate=1e-6,
            lr_scheduler_type="constant",
            optim="adamw_torch",
            adam_beta1=0.9,
            adam_beta2=0.999,
            adam_epsilon=1e-15,
            weight_decay=0.01,
            max_grad_norm=1.0,
            gradient_checkpointing=True,
            gradient_checkpointing_kwargs={"use_reentrant": False},
        )
        step_times: list[float] = []
        gen: list[tuple[float, int, int, int]] = []  # (seconds, sequences, prompt tokens, completion tokens)

        class Clock(TrainerCallback):
            t0 = 0.0

            def on_step_begin(self, *args: Any, **kwargs: Any) -> None:
                _sync()
                self.t0 = time.perf_counter()

            def on_step_end(self, *args: Any, **kwargs: Any) -> None:
                _sync()
                step_times.append(time.perf_counter() - self.t0)
                g = gen[-1] if gen else (0.0, 0, 0, 0)
                _progress(len(step_times) - 1, g[0], step_times[-1] - g[0], g[3])
                if len(step_times) == a.warmup:
                    _peak_reset()

        trainer = GRPOTrainer(
            model=model,
            reward_funcs=reward,
            args=cfg,
            train_dataset=data,
            processing_class=tok,
            callbacks=[Clock()],
        )
        inner = trainer._generate_single_turn

        def timed(prompt_ids: list[list[int]], *args: Any, **kwargs: Any) -> Any:
            _sync()
            t = time.perf_counter()
            out_ = inner(prompt_ids, *args, **kwargs)
            _sync()
            completions = out_[0]
            gen.append(
                (
                    time.perf_counter() - t,
                    len(completions),
                    sum(len(p) for p in prompt_ids),
                    sum(len(c) for c in completions),
                )
            )
            return out_

        trainer._generate_single_turn = timed  # type: ignore[method-assign]
        trainer.train()
    if len(step_times) != steps or len(gen) != steps:
        raise RuntimeError(f"expected {steps} steps and generations, saw {len(step_times)} / {len(gen)}")
    timed_steps, timed_gen = step_times[a.warmup :], gen[a.warmup :]
    wall = sum(timed_steps)
    gen_s = sum(g[0] for g in timed_gen)
    seqs = sum(g[1] for g in timed_gen)
    gen_tokens = sum(g[3] for g in timed_gen)
    trained = sum(g[2] + g[3] for g in timed_gen)
    return {
        "trl": trl.__version__,
        "transformers": transformers.__version__,
        "warmup_s": round(sum(step_times[: a.warmup]), 2),
        "s_per_step": round(wall / a.steps, 3),
        "gen_s_per_step": round(gen_s / a.steps, 3),
        "train_s_per_step": round((wall - gen_s) / a.steps, 3),
        "samples_per_s": round(seqs / wall, 2),
        "gen_tokens_per_s": round(gen_tokens / gen_s, 1),
        "train_tokens_per_s": round(trained / (wall - gen_s), 1),
        "tokens_per_s": round(gen_tokens / wall, 1),
        "mean_completion_len": round(gen_tokens / seqs, 1),
        "peak_gb": _peak_gb(),
    }


# ---------------------------------------------------------------------------------------- mismatch
def _warm_start(a: argparse.Namespace, out: Path) -> dict[str, Any]:
    """A short supervised phase on the GPU (reference solutions after the chat-templated prompt,
    then EOS), saved as a checkpoint: the policy becomes peaked, as a trained one is."""
    import random

    from scalerl.harness.rl.trainer import Trainer

    tr = Trainer(_recipe(a, a.ckpt, "fp32"), 0)
    pol, tok, dev = tr.policy, tr.policy.tokenizer, tr.policy.device
    rows = _read_jsonl(Path(a.data))
    rng = random.Random(0)
    opt = torch.optim.AdamW(pol.model.parameters(), lr=a.sft_lr, weight_decay=0.0)
    losses = []
    t0 = time.perf_counter()
    for i in range(a.sft_steps):
        for g in opt.param_groups:
            g["lr"] = a.sft_lr * min(1.0, (i + 1) / 10)
        batch = [rows[rng.randrange(len(rows))] for _ in range(a.sft_batch)]
        seqs, starts = [], []
        for r in batch:
            prompt = tok.prompt_ids(r["question"])
            seqs.append(prompt + tok.encode(r["solution"]) + [tok.eos_id])
            starts.append(len(prompt))
        width = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), width), tok.pad_id, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        target = torch.zeros((len(seqs), width - 1))
        for j, s in enumerate(seqs):
            ids[j, : len(s)] = torch.tensor(s)
            mask[j, : len(s)] = 1
            target[j, starts[j] - 1 : len(s) - 1] = 1.0
        pos = (mask.cumsum(1) - 1).clamp(min=0)
        ids, mask, pos, target = ids.to(dev), mask.to(dev), pos.to(dev), target.to(dev)
        hidden, _ = pol.hidden(ids, mask, pos)
        logp = pol.token_logprobs(hidden[:, :-1], ids[:, 1:], 1.0)
        loss = -(logp * target).sum() / target.sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(pol.model.parameters(), 1.0)
        opt.step()
        losses.append(float(loss.detach()))
    _sync()
    sft_s = time.perf_counter() - t0
    tr.task.close()
    pol.model.save_pretrained(out)
    import shutil

    for f in Path(a.ckpt).iterdir():  # tokenizer, chat template, generation config
        if not (out / f.name).exists():
            shutil.copy(f, out / f.name)
    return {
        "sft_steps": a.sft_steps,
        "sft_s": round(sft_s, 1),
        "sft_loss_first_last": [losses[0], losses[-1]],
    }


def case_mismatch(a: argparse.Namespace) -> dict[str, Any]:
    from scalerl.harness.rl.diagnostics import mismatch_sums
    from scalerl.harness.rl.trainer import Trainer

    warm = Path(tempfile.mkdtemp(prefix="gpu-bench-warm-"))
    result: dict[str, Any] = _warm_start(a, warm)
    cases = (
        ("fp32", "fp32", "bfloat16"),  # the baseline: FP32 head on both sides
        ("bf16", "model_dtype", "bfloat16"),  # loo-fp32
        ("no_engine_rounding", "fp32", "float32"),  # fp32 body and head: the floor
    )
    for label, head, dtype in cases:
        tr = Trainer(_recipe(a, str(warm), head, dtype), 0)
        rng = torch.Generator().manual_seed(0)
        abs_sum = kl_sum = 0.0
        tokens = 0
        lengths = []
        for b in range(a.mismatch_batches):
            lo = b * a.prompts
            cohort = tr._start(range(lo, lo + a.prompts), tr.split.train, a.gens, tr.spec, rng)
            while not cohort.done():
                tr.gen.advance(cohort, tr.spec.max_len, rng)
            batch = cohort.result()
            lengths.append(float(batch.lengths.float().mean()))
            with torch.no_grad():
                logp = tr.token_logprobs(batch, torch.arange(batch.tokens.shape[0]))
            s_abs, s_kl, n = mismatch_sums(logp, batch.logp, batch.versions, batch.mask, 0)
            abs_sum, kl_sum, tokens = abs_sum + s_abs, kl_sum + s_kl, tokens + n
        tr.task.close()
        result[label] = {
            "tokens": tokens,
            "mean_len": round(sum(lengths) / len(lengths), 1),
            "logp_abs_diff": abs_sum / tokens,
            "logp_kl": kl_sum / tokens,
        }
        del tr
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    return result


# ---------------------------------------------------------------------------------------- probe
def case_probe(a: argparse.Namespace) -> dict[str, Any]:
    """Where the reference trainer's generation time goes on a GPU, at ``--max-len`` tokens a
    cohort: its decode loop under the process-wide settings it pins (deterministic algorithms,
    warn-only on CUDA, which also fills every fresh ``torch.empty`` with NaN) and with them
    relaxed; transformers' own ``generate`` on the same bf16 engine copy and prompts (the floor of
    a transformers decode); and what the old host-side draw cost a token (copy of the [B, V]
    log-probs plus a draw on one CPU thread)."""
    import torch.utils.deterministic as det_cfg

    from scalerl.harness.rl.generation.hf import _sample

    tr = _probe_trainer(a)
    out: dict[str, Any] = {}
    settings = {
        "pinned": (True, True),  # what Trainer's pin() sets on CUDA
        "no_fill": (True, False),
        "nondeterministic": (False, False),
    }

    def use(name: str) -> None:
        on, fill = settings[name]
        torch.use_deterministic_algorithms(on, warn_only=True)
        det_cfg.fill_uninitialized_memory = fill  # type: ignore[attr-defined]

    for name in ("pinned", "nondeterministic", "no_fill", "pinned"):
        use(name)
        _sync()
        t0 = time.perf_counter()
        batch = tr.next_batch()
        assert batch is not None
        _sync()
        t1 = time.perf_counter()
        tr.train_step(batch)
        _sync()
        t2 = time.perf_counter()
        tokens = int(batch.lengths.max())
        row = {"gen_ms_per_token": round((t1 - t0) * 1e3 / tokens, 2), "train_s": round(t2 - t1, 3)}
        out.setdefault(name, []).append(row)
        print("STEP " + json.dumps({name: row}), flush=True)
    # transformers' generate on the same engine copy and batch shape.
    eng = tr.gen.engine.model
    dev = tr.policy.device
    tok = tr.policy.tokenizer
    prompts = [tr._prompt_ids(tr.split.train[i]) for i in range(a.prompts) for _ in range(a.gens)]
    width = max(len(q) for q in prompts)
    ids = torch.full((len(prompts), width), tok.pad_id, dtype=torch.long)
    attn = torch.zeros_like(ids)
    for i, q in enumerate(prompts):
        ids[i, width - len(q) :] = torch.tensor(q)
        attn[i, width - len(q) :] = 1
    for name in ("pinned", "nondeterministic"):
        use(name)
        for _ in range(2):  # the first call pays generate's own set-up
            _sync()
            t0 = time.perf_counter()
            with torch.no_grad():
                gen_out = eng.generate(
                    input_ids=ids.to(dev),
                    attention_mask=attn.to(dev),
                    max_new_tokens=a.max_len,
                    min_new_tokens=a.max_len,
                    do_sample=True,
                    top_k=0,
                    top_p=1.0,
                    pad_token_id=tok.pad_id,
                )
            _sync()
            dt = time.perf_counter() - t0
        new = gen_out.shape[1] - width
        out[f"hf_generate_{name}"] = {"gen_ms_per_token": round(dt * 1e3 / new, 2), "tokens": new}
        print("STEP " + json.dumps({f"hf_generate_{name}": out[f"hf_generate_{name}"]}), flush=True)
    # The old path's extra work per token: [B, V] log-probs to the host, drawn on one thread.
    use("pinned")
    vocab = eng.get_output_embeddings().weight.shape[0]
    logp = torch.log_softmax(torch.randn(len(prompts), vocab, device=dev), -1)
    rng = torch.Generator().manual_seed(0)
    spec = tr.spec
    times = []
    for _ in range(4):
        _sync()
        t0 = time.perf_counter()
        host = logp.cpu()
        drawn = _sample(host, spec, rng)
        host.gather(-1, drawn[:, None])
        float((-(host.exp() * host).sum(-1)).sum())
        times.append(time.perf_counter() - t0)
    out["host_draw_ms_per_token"] = round(min(times[1:]) * 1e3, 1)
    # Which ops the decode loop spends its host time on (8 tokens), pinned and relaxed.
    from torch.profiler import ProfilerActivity, profile

    kinds = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    tables = []
    for name in ("pinned", "nondeterministic"):
        use(name)
        cohort = tr._start(range(a.prompts), tr.split.train, a.gens, tr.spec, rng)
        tr.gen.advance(cohort, 2, rng)
        with profile(activities=kinds) as prof:
            tr.gen.advance(cohort, 8, rng)
            _sync()
        events = prof.key_averages()
        tables.append(f"== {name}\n" + events.table(sort_by="self_cpu_time_total", row_limit=25))
        out[f"profile_8_tokens_{name}"] = {
            "cpu_ms": round(sum(e.self_cpu_time_total for e in events) / 1e3, 1),
            "launches": int(
                sum(e.count for e in events if e.key in ("cudaLaunchKernel", "cuLaunchKernelEx"))
            ),
            "fills": int(sum(e.count for e in events if e.key == "aten::fill_")),
        }
    Path(a.out_dir, "probe_profile.txt").write_text("\n".join(tables))
    tr.task.close()
    return out


def _probe_trainer(a: argparse.Namespace) -> Any:
    from scalerl.harness.rl.trainer import Trainer

    tr = Trainer(_recipe(a, a.ckpt, "fp32"), 0)
    batch = tr.next_batch()  # warm-up: kernels, allocator
    assert batch is not None
    tr.train_step(batch)
    _sync()
    return tr


# ---------------------------------------------------------------------------------------- driver
def _build(work: Path, shape: str) -> tuple[Path, Path]:
    from scalerl.harness.rl.toy import build_checkpoint, word_problems, write_jsonl

    rows = word_problems(1024, 0, slip=0.3)
    data = write_jsonl(work / "train.jsonl", rows)
    texts = [r["question"] + " " + r["solution"] for r in rows]
    ckpt = build_checkpoint(work / "ckpt", texts=texts, **SHAPES[shape])
    return ckpt, data


def _env_for(case: str, before_path: str | None) -> dict[str, str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1", TOKENIZERS_PARALLELISM="false")
    if case == "before":
        assert before_path is not None
        # Another checkout's scalerl first; the rest of the path (installed wheels) stays.
        rest = [
            e
            for e in env.get("PYTHONPATH", "").split(os.pathsep)
            if e and not (Path(e) / "scalerl" / "__init__.py").exists()
        ]
        env["PYTHONPATH"] = os.pathsep.join([before_path, *rest])
    return env


def _versions() -> dict[str, Any]:
    import transformers

    info: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "device": torch.cuda.get_device_name()
        if torch.cuda.is_available()
        else platform.processor() or "cpu",
    }
    return info


def orchestrate(a: argparse.Namespace) -> None:
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    results = out / "results.jsonl"
    t_start = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="gpu-bench-"))
    t0 = time.perf_counter()
    ckpt, data = _build(work, a.shape)
    header = {
        "case": "setup",
        **_versions(),
        "shape": a.shape,
        "prompts": a.prompts,
        "gens": a.gens,
        "max_len": a.max_len,
        "micro_batch": a.micro_batch,
        "warmup": a.warmup,
        "steps": a.steps,
        "build_s": round(time.perf_counter() - t0, 1),
    }
    print(json.dumps(header), flush=True)
    with results.open("a") as f:
        f.write(json.dumps(header) + "\n")
    common = [
        *("--ckpt", str(ckpt), "--data", str(data), "--shape", a.shape),
        *("--prompts", str(a.prompts), "--gens", str(a.gens), "--max-len", str(a.max_len)),
        *("--micro-batch", str(a.micro_batch), "--warmup", str(a.warmup), "--steps", str(a.steps)),
        *("--sft-steps", str(a.sft_steps), "--sft-batch", str(a.sft_batch), "--sft-lr", str(a.sft_lr)),
        *("--mismatch-batches", str(a.mismatch_batches), "--out-dir", str(out)),
    ]
    rows: list[dict[str, Any]] = []
    for case in a.cases.split(","):
        if case == "before" and not a.before_path:
            continue
        left = a.budget_s - (time.perf_counter() - t_start)
        if left < 30:
            row: dict[str, Any] = {"case": case, "error": f"skipped: {left:.0f} s of the budget left"}
        else:
            argv = [sys.executable, __file__, "--case", case, *common]
            if case == "before":
                argv += ["--max-len", str(a.before_max_len), "--steps", "1"]  # old path: slow
            if case == "mismatch":
                argv += ["--max-len", str(a.mismatch_max_len)]
            if case == "probe":
                argv += ["--max-len", str(a.probe_max_len)]
            t = time.perf_counter()
            try:
                proc = subprocess.run(
                    argv,
                    env=_env_for(case, a.before_path),
                    capture_output=True,
                    text=True,
                    timeout=min(a.case_timeout_s, left - 10),
                )
                lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
                if proc.returncode == 0 and lines:
                    row = {"case": case, **json.loads(lines[-1])}
                else:
                    row = {"case": case, "error": f"exit {proc.returncode}: {proc.stderr[-1500:]}"}
                    row["steps_seen"] = _steps(proc.stdout)
                (out / f"{case}.stderr.txt").write_text(proc.stderr[-200_000:])
            except subprocess.TimeoutExpired as err:
                row = {"case": case, "error": f"timed out after {err.timeout:.0f} s"}
                row["steps_seen"] = _steps(err.stdout)
            row["case_wall_s"] = round(time.perf_counter() - t, 1)
        rows.append(row)
        print(json.dumps(row), flush=True)
        with results.open("a") as f:
            f.write(json.dumps(row) + "\n")
    _summary(rows)


def _steps(stdout: str | bytes | None) -> list[dict[str, Any]]:
    text = stdout.decode(errors="replace") if isinstance(stdout, bytes) else stdout or ""
    return [json.loads(ln[5:]) for ln in text.splitlines() if ln.startswith("STEP {")]


def _summary(rows: list[dict[str, Any]]) -> None:
    cols: tuple[str, ...] = (
        "s_per_step",
        "gen_s_per_step",
        "train_s_per_step",
        "samples_per_s",
        "gen_tokens_per_s",
    )
    cols += ("train_tokens_per_s", "peak_gb", "diag/logp_abs_diff", "diag/logp_kl")
    print("\ncase        " + " ".join(f"{c.split('/')[-1]:>14}" for c in cols))
    for r in rows:
        if "error" in r:
            print(f"{r['case']:<11} ERROR {r['error'][:300]}")
        elif r["case"] == "mismatch":
            for k in ("fp32", "bf16", "no_engine_rounding"):
                m = r[k]
                print(
                    f"mismatch {k:<20} |dlogp| {m['logp_abs_diff']:.3e}  KL {m['logp_kl']:.3e}", m["tokens"]
                )
        else:
            vals = [r.get(c) for c in cols]
            shown = " ".join(f"{v:>14.4g}" if v is not None else f"{'-':>14}" for v in vals)
            print(f"{r['case']:<11} {shown}")
    by = {r["case"]: r for r in rows if "error" not in r}
    if "trl" in by:
        for c in ("ours-fp32", "ours-bf16"):
            if c in by:
                ratio = by["trl"]["s_per_step"] / by[c]["s_per_step"]
                print(f"{c} / trl throughput (samples/s): {ratio:.2f}x")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=os.environ.get("OUT", "bench/.work/gpu"), help="results folder")
    p.add_argument("--smoke", action="store_true", help="CPU smoke run: toy shape, tiny batch, every case")
    p.add_argument("--cases", default=",".join(GPU_CASES), help="comma-separated, run in this order")
    p.add_argument("--shape", choices=sorted(SHAPES), default="0.5b")
    p.add_argument("--prompts", type=int, default=16, help="prompts per batch")
    p.add_argument("--gens", type=int, default=8, help="generations per prompt")
    p.add_argument("--max-len", type=int, default=256, help="completion tokens per rollout")
    p.add_argument("--micro-batch", type=int, default=16)
    p.add_argument("--warmup", type=int, default=1, help="untimed steps first")
    p.add_argument("--steps", type=int, default=3, help="timed steps")
    p.add_argument("--sft-steps", type=int, default=150, help="mismatch: supervised warm-start steps")
    p.add_argument("--sft-batch", type=int, default=64)
    p.add_argument("--sft-lr", type=float, default=3e-4)
    p.add_argument("--mismatch-batches", type=int, default=2)
    p.add_argument("--mismatch-max-len", type=int, default=128)
    p.add_argument("--before-path", default=None, help="checkout whose scalerl the 'before' case runs")
    p.add_argument("--before-max-len", type=int, default=32)
    p.add_argument("--probe-max-len", type=int, default=64)
    p.add_argument("--budget-s", type=float, default=420.0, help="stop starting cases after this")
    p.add_argument("--case-timeout-s", type=float, default=200.0)
    p.add_argument("--case", default=None, help=argparse.SUPPRESS)  # one case, in this process
    p.add_argument("--ckpt", default=None, help=argparse.SUPPRESS)
    p.add_argument("--data", default=None, help=argparse.SUPPRESS)
    p.add_argument("--out-dir", default=".", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.smoke and a.case is None:
        a.shape, a.prompts, a.gens, a.max_len, a.micro_batch, a.steps = "toy", 2, 2, 8, 2, 1
        a.sft_steps, a.sft_batch, a.mismatch_batches, a.mismatch_max_len, a.before_max_len = 3, 4, 1, 8, 8
    if a.case is None:
        orchestrate(a)
        return
    run = {"trl": case_trl, "mismatch": case_mismatch, "probe": case_probe}.get(a.case, case_ours)
    print(json.dumps(run(a)), flush=True)


if __name__ == "__main__":
    main()
