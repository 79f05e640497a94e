"""``train()``: the reference ScaleRL trainer, every component chosen by the recipe's knobs.

One optimizer step, in order (each knob is looked up in its registry, nothing else changes):

1. the pipeline schedule (``knobs.pipeline``) hands over a batch of rollouts;
2. rewards = task verifier (1/0) + the length control's adjustment (``knobs.length_control``:
   zero under forced interruption, DAPO's overlong penalty under ``length_penalty``);
3. advantages (``knobs.advantage_norm``), then the zero-variance filter
   (``knobs.zero_variance_filter``) decides which sequences enter the loss;
4. per-token loss terms (``knobs.loss``) on log-probs recomputed by the trainer under the same
   LM-head precision (``knobs.lm_head``) the generator sampled with, reduced by
   ``knobs.aggregation``; AdamW with linear warmup and gradient clipping (``recipe.optimizer``);
5. the new weights go to the generator at once (in flight under PipelineRL);
6. no-positive-resampling (``knobs.no_positive_resampling``) records each prompt's pass rate and
   retires the solved ones from future sampling.

Validation (``eval.every_steps``, plus step 0 and the last step) samples ``eval.k`` completions
per held-out prompt from a generator stream seeded by (seed, step), so it never perturbs training
and a resumed run re-emits identical points. Each point carries ``n``, the Bernoulli samples
behind it (``n_val x k`` for ``val/pass_rate``), and the mechanism diagnostics of the steps since
the previous point (:mod:`scalerl.harness.rl.diagnostics`).

Reproducibility: the trainer pins its process's numerics first (:func:`scalerl.harness.rl.numerics.pin`:
threads, CPU kernel family, deterministic algorithms) and seeds python, numpy and torch from the
run seed, so a run is bit-identical on any AVX2 x86-64 machine with the same torch build.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from scalerl.harness.errors import ConfigError
from scalerl.harness.recipe.schema import Recipe
from scalerl.harness.rl import checkpoint
from scalerl.harness.rl.advantages import compute_advantages
from scalerl.harness.rl.aggregation import aggregate
from scalerl.harness.rl.compute import ComputeMeter
from scalerl.harness.rl.context import check_prompt_lengths, context_length
from scalerl.harness.rl.diagnostics import (
    DiagWindow,
    adv_std,
    lag_stats,
    mismatch_sums,
    ratio_sum,
    zero_var_dropped,
)
from scalerl.harness.rl.filters import ResamplingTracker, make_zero_variance_filter
from scalerl.harness.rl.generation.base import Cohort, Generator, Rollouts, SamplingSpec, make_generator
from scalerl.harness.rl.length import Interruption, make_length_control
from scalerl.harness.rl.losses import make_loss
from scalerl.harness.rl.model import Policy, build_policy, non_embedding_params
from scalerl.harness.rl.numerics import Numerics, pin, seed_everything
from scalerl.harness.rl.pipeline import Schedule, make_schedule
from scalerl.harness.rl.sampler import PromptSampler
from scalerl.harness.rl.sink import PointSink
from scalerl.harness.rl.tasks import Problem, make_split, make_task

log = logging.getLogger(__name__)

TRAIN_METRICS = (
    "train/reward",
    "train/truncation_rate",
    "train/interruption_rate",
    "train/response_len",
    "train/entropy",
)


@dataclass(frozen=True)
class TrainResult:
    steps: int
    final_metrics: dict[str, float]
    compute: dict[str, float]
    resumed_from: int | None  # the checkpoint's step, None for a fresh run
    stopped: bool  # True when ``stop`` ended the run before its budget
    reason: str


@dataclass
class StepStats:
    """Metric accumulators between two evaluation points (checkpointed)."""

    sums: dict[str, float]
    steps: int = 0
    diag: DiagWindow = field(default_factory=DiagWindow)
    samples: int = 0  # rollouts behind train/reward

    @classmethod
    def empty(cls) -> StepStats:
        return cls({m: 0.0 for m in TRAIN_METRICS})

    def add(self, values: dict[str, float]) -> None:
        for k, v in values.items():
            self.sums[k] += v
        self.steps += 1

    def means(self) -> dict[str, float]:
        return {k: v / self.steps for k, v in self.sums.items()} if self.steps else {}


class Trainer:
    """Everything one run holds; :meth:`state_dict` / :meth:`load_state_dict` round-trip it."""

    def __init__(self, recipe: Recipe, seed: int, threads: int | None = None) -> None:
        self.recipe, self.seed = recipe, seed
        # Before anything computes: the kernels are chosen at their first use (see numerics).
        self.numerics: Numerics = pin(threads)
        seed_everything(seed)
        self.policy: Policy = build_policy(recipe)
        self.task = make_task(recipe.task.name, recipe.task.params)
        self.split = make_split(self.task, recipe.task.n_train, recipe.task.n_val, recipe.task.seed)
        # Before anything trains: a prompt longer than the context is refused, never truncated.
        check_prompt_lengths(
            self.split, self.policy.tokenizer, context_length(self.policy.model), recipe.scale.max_gen_len
        )
        self.data_fingerprint = self.task.fingerprint()
        k = recipe.knobs
        self.loss_fn = make_loss(k.loss)
        self.keep_fn = make_zero_variance_filter(k.zero_variance_filter)
        self.length_control = make_length_control(k.length_control)
        self.tracker = ResamplingTracker.from_knob(k.no_positive_resampling)
        self.sampler = PromptSampler(len(self.split.train), seed)
        self.gen: Generator = make_generator(recipe.generation.backend, self.policy, recipe.generation)
        self.gen_rng = torch.Generator().manual_seed(seed)
        self.schedule: Schedule = make_schedule(
            k.pipeline,
            recipe.scale.prompts_per_batch,
            recipe.scale.generations_per_prompt,
            recipe.scale.max_gen_len,
        )
        o = recipe.optimizer
        self.opt = torch.optim.AdamW(
            self.policy.model.parameters(), lr=o.lr, betas=o.betas, eps=o.eps, weight_decay=o.weight_decay
        )
        warm = max(1, o.warmup_steps)
        self.sched = torch.optim.lr_scheduler.LambdaLR(self.opt, lambda s: min(1.0, (s + 1) / warm))
        self.meter = ComputeMeter(non_embedding_params(self.policy.model))
        self.step = 0
        self.stats = StepStats.empty()
        self.max_lag = 0  # largest (step - oldest token version) seen; tests check the bound
        self.spec = self._spec(recipe.generation.temperature, recipe.generation.top_p)

    # ------------------------------------------------------------------ generation glue
    def _spec(self, temperature: float, top_p: float) -> SamplingSpec:
        lc = self.length_control
        if isinstance(lc, Interruption):
            return SamplingSpec(
                temperature,
                top_p,
                self.recipe.scale.max_gen_len,
                tuple(self.policy.tokenizer.encode(lc.phrase)),
                lc.answer_tokens,
            )
        return SamplingSpec(temperature, top_p, self.recipe.scale.max_gen_len)

    def _prompt_ids(self, p: Problem) -> list[int]:
        return self.policy.tokenizer.prompt_ids(p.prompt, p.system)

    def _start(
        self,
        problems: Sequence[int],
        pool: Sequence[Problem],
        copies: int,
        spec: SamplingSpec,
        rng: torch.Generator,
    ) -> Cohort:
        prompts, budgets, meta_p, meta_g = [], [], [], []
        for slot, idx in enumerate(problems):
            for _ in range(copies):
                prompts.append(self._prompt_ids(pool[idx]))
                budgets.append(self.length_control.thinking_budget(rng))
                meta_p.append(idx)
                meta_g.append(slot)
        return self.gen.start(prompts, budgets, spec, meta={"problem": meta_p, "group": meta_g})

    def _new_cohort(self, n_prompts: int) -> Cohort | None:
        drawn = self.sampler.draw(n_prompts, self.tracker)
        if drawn is None:
            return None
        return self._start(
            drawn, self.split.train, self.recipe.scale.generations_per_prompt, self.spec, self.gen_rng
        )

    def _scores(self, batch: Rollouts, pool: Sequence[Problem]) -> Tensor:
        tok = self.policy.tokenizer
        texts = []
        for i in range(len(batch.meta["problem"])):
            ids = batch.tokens[i, : int(batch.lengths[i])].tolist()
            if ids and ids[-1] in tok.stop_ids:
                ids = ids[:-1]  # the end-of-sequence token is not part of the answer
            texts.append(tok.decode(ids))
        problems = [pool[idx] for idx in batch.meta["problem"]]
        out = self.task.score_many(problems, texts, think_end=self.policy.think_end)
        return torch.tensor(out, dtype=torch.float32)

    # ------------------------------------------------------------------ one optimizer step
    def token_logprobs(self, batch: Rollouts, rows: Tensor) -> Tensor:
        """Log-probs [R, T] of the batch's completion tokens under the current weights."""
        prompts = [batch.prompt_ids[i] for i in rows.tolist()]
        width = max(len(p) for p in prompts)
        comp = batch.tokens[rows]
        n, t = comp.shape
        ids = torch.full((n, width + t), self.policy.tokenizer.pad_id, dtype=torch.long)
        attn = torch.zeros((n, width + t), dtype=torch.long)
        for j, p in enumerate(prompts):
            ids[j, width - len(p) : width] = torch.tensor(p, dtype=torch.long)
            attn[j, width - len(p) : width] = 1
        ids[:, width:] = comp
        attn[:, width:] = (torch.arange(t)[None, :] < batch.lengths[rows][:, None]).long()
        pos = (attn.cumsum(1) - 1).clamp(min=0)
        dev = self.policy.device
        hidden, _ = self.policy.hidden(ids.to(dev), attn.to(dev), pos.to(dev))
        logp = self.policy.token_logprobs(hidden[:, width - 1 : width + t - 1], comp, self.spec.temperature)
        return logp.cpu()

    def train_step(self, batch: Rollouts) -> dict[str, float]:
        correct = self._scores(batch, self.split.train)
        rewards = correct + self.length_control.reward_adjustment(batch.lengths).float()
        group = torch.tensor(batch.meta["group"], dtype=torch.long)
        adv = compute_advantages(rewards, group, self.recipe.knobs.advantage_norm.choice)
        keep = self.keep_fn(rewards, group)
        self._record_pass_rates(batch, correct)
        self.max_lag = max(self.max_lag, self.step - batch.min_version())
        rows = torch.nonzero(keep).flatten()
        diag = self.stats.diag
        dropped, prompts = zero_var_dropped(keep, group)
        diag.add("dropped_prompts", dropped)
        diag.add("prompts", prompts)
        diag.add("adv_std_sum", adv_std(adv))
        diag.add("steps", 1)
        self.opt.zero_grad(set_to_none=True)
        if len(rows):
            mask = batch.mask[rows]
            size = self.recipe.optimizer.micro_batch
            if size is None or len(rows) <= size:
                logp = self.token_logprobs(batch, rows)
                terms = self.loss_fn.token_terms(logp, batch.logp[rows], adv[rows], mask)
                loss = aggregate(terms, mask, group[rows], self.recipe.knobs.aggregation.choice)
                loss.backward()
            else:
                logp = self._accumulate(batch, rows, adv, group, size)
            self._diagnose(logp.detach(), batch, rows, adv[rows], mask)
            torch.nn.utils.clip_grad_norm_(self.policy.model.parameters(), self.recipe.optimizer.grad_clip)
            trained = sum(len(batch.prompt_ids[i]) + int(batch.lengths[i]) for i in rows.tolist())
            self.meter.add_training(trained)
        # Always step: with every sequence filtered out no parameter has a gradient and AdamW
        # leaves it untouched, while the schedule still counts the step.
        self.opt.step()
        self.sched.step()
        self.step += 1
        self.gen.update_weights(self.policy.model, self.step)
        n = len(rewards)
        self.stats.samples += n
        return (
            {
                "train/reward": float(rewards.mean()),
                "train/truncation_rate": float(batch.truncated.float().mean()),
                "train/interruption_rate": float(batch.interrupted.float().mean()),
                "train/response_len": float(batch.lengths.float().mean()),
                "train/entropy": batch.entropy_sum / max(1, batch.n_sampled),
            }
            if n
            else {}
        )

    def _accumulate(self, batch: Rollouts, rows: Tensor, adv: Tensor, group: Tensor, size: int) -> Tensor:
        """The same gradient as one backward over ``rows``, in micro-batches of ``size`` sequences.

        Every aggregation is linear in the token terms, with weights that depend only on the mask
        and the groups, and every loss's terms are per row (GSPO's ratio is per sequence). So the
        loss is the sum of ``w * terms`` with ``w`` = d(loss)/d(terms), taken once by autograd on a
        zero probe, and each micro-batch backprops its own rows' share. Returns the log-probs.
        """
        mask = batch.mask[rows]
        probe = torch.zeros_like(mask, requires_grad=True)
        aggregate(probe, mask, group[rows], self.recipe.knobs.aggregation.choice).backward()
        assert probe.grad is not None
        weights = probe.grad
        parts = []
        for i in range(0, len(rows), size):
            sub = rows[i : i + size]
            logp = self.token_logprobs(batch, sub)
            terms = self.loss_fn.token_terms(logp, batch.logp[sub], adv[sub], batch.mask[sub])
            (terms * weights[i : i + size]).sum().backward()
            parts.append(logp.detach())
        return torch.cat(parts)

    def _diagnose(self, logp: Tensor, batch: Rollouts, rows: Tensor, adv: Tensor, mask: Tensor) -> None:
        """Accumulate the per-token diagnostics of the trained rows (see scalerl.harness.rl.diagnostics)."""
        d = self.stats.diag
        versions, old = batch.versions[rows], batch.logp[rows]
        lag_sum, tokens, lag_max = lag_stats(versions, mask, self.step)
        d.add("lag_sum", lag_sum)
        d.add("tokens", tokens)
        if tokens:
            d.peak("lag_max", lag_max)
        d.add("clipped", float(self.loss_fn.clipped(logp, old, adv, mask).sum()))
        d.add("ratio_sum", ratio_sum(logp, old, mask)[0])
        abs_sum, kl_sum, n0 = mismatch_sums(logp, old, versions, mask, self.step)
        d.add("abs_diff_sum", abs_sum)
        d.add("kl_sum", kl_sum)
        d.add("lag0_tokens", n0)

    def _record_pass_rates(self, batch: Rollouts, correct: Tensor) -> None:
        by_prompt: dict[int, list[float]] = {}
        for idx, c in zip(batch.meta["problem"], correct.tolist(), strict=True):
            by_prompt.setdefault(int(idx), []).append(c)
        ids = list(by_prompt)
        self.tracker.update(ids, [sum(v) / len(v) for v in by_prompt.values()])

    def next_batch(self) -> Rollouts | None:
        batch = self.schedule.next_batch(self.gen, self._new_cohort, self.gen_rng)
        if batch is not None:
            prompt_tokens = sum(len(p) for p in batch.prompt_ids)
            self.meter.add_generation(prompt_tokens, int(batch.lengths.sum()), len(batch.prompt_ids))
        return batch

    # ------------------------------------------------------------------ evaluation
    def eval_samples(self) -> int:
        """Bernoulli samples behind one ``val/pass_rate`` point: validation prompts x ``eval.k``."""
        e = self.recipe.eval
        return min(e.n_val or len(self.split.val), len(self.split.val)) * e.k

    def evaluate(self) -> float:
        e = self.recipe.eval
        n_val = min(e.n_val or len(self.split.val), len(self.split.val))
        # Not hash(): string hashing is salted per process, and eval must repeat across resumes.
        rng = torch.Generator().manual_seed(self.seed * 1_000_003 + self.step + 7)
        spec = self._spec(e.temperature, 1.0)
        cohort = self._start(range(n_val), self.split.val, e.k, spec, rng)
        while not cohort.done():
            self.gen.advance(cohort, spec.max_len, rng)
        scores = self._scores(cohort.result(), self.split.val)
        # passes / samples in float64: exact to the last digit, not a float32 mean's rounding.
        return float(scores.sum().item()) / len(scores)

    # ------------------------------------------------------------------ checkpoint
    def state_dict(self) -> dict[str, Any]:
        return {
            "model": self.policy.model.state_dict(),
            "opt": self.opt.state_dict(),
            "sched": self.sched.state_dict(),
            "torch_rng": torch.random.get_rng_state(),
            "python_rng": random.getstate(),
            "numpy_rng": np.random.get_state(),
            "gen_rng": self.gen_rng.get_state(),
            "sampler": self.sampler.state_dict(),
            "tracker": self.tracker.state_dict(),
            "step": self.step,
            "schedule": self.schedule,
            "meter": self.meter.state_dict(),
            "stats": (self.stats.sums, self.stats.steps, self.stats.diag.state(), self.stats.samples),
            "max_lag": self.max_lag,
            "task_fingerprint": self.data_fingerprint,
        }

    def load_state_dict(self, s: dict[str, Any]) -> None:
        saved = s.get("task_fingerprint")
        if saved != self.data_fingerprint:
            raise ConfigError(
                f"the task's data changed since this run's checkpoint (fingerprint {saved} then, "
                f"{self.data_fingerprint} now); resuming would mix two datasets in one curve",
                field="task.params",
                value=self.task.paths() or None,
                fix="restore the data the run started on, or start a new run (a new task.seed or path)",
            )
        self.policy.model.load_state_dict(s["model"])
        self.opt.load_state_dict(s["opt"])
        self.sched.load_state_dict(s["sched"])
        torch.random.set_rng_state(s["torch_rng"])
        random.setstate(s["python_rng"])
        np.random.set_state(s["numpy_rng"])
        self.gen_rng.set_state(s["gen_rng"])
        self.sampler.load_state_dict(s["sampler"])
        self.tracker.load_state_dict(s["tracker"])
        self.step = s["step"]
        self.schedule = s["schedule"]
        self.meter = ComputeMeter(**s["meter"])
        st = s["stats"]
        diag = DiagWindow(*map(dict, st[2])) if len(st) > 2 else DiagWindow()
        self.stats = StepStats(dict(st[0]), st[1], diag, st[3] if len(st) > 3 else 0)
        self.max_lag = s["max_lag"]
        self.gen.update_weights(self.policy.model, self.step)


def _emit(trainer: Trainer, sink: PointSink) -> dict[str, float]:
    stats = trainer.stats
    metrics = {"val/pass_rate": trainer.evaluate(), **stats.means()}
    if stats.steps:
        metrics.update(stats.diag.metrics(len(trainer.tracker.retired())))
    # Running totals (verifier timeouts and errors of a dataset task); generated tasks have none.
    metrics.update({f"diag/{k}": float(v) for k, v in trainer.task.counters().items()})
    n = {"val/pass_rate": trainer.eval_samples()}
    if stats.samples and isinstance(trainer.length_control, Interruption):
        # A mean of 0/1 rewards only under interruption (the length penalty makes them real-valued).
        n["train/reward"] = stats.samples
    sink.add(trainer.step, metrics, trainer.meter.snapshot(), n=n)
    trainer.stats = StepStats.empty()
    return metrics


def train(
    recipe: Recipe,
    seed: int,
    *,
    sink: PointSink,
    workdir: Path,
    stop: threading.Event | None = None,
    threads: int | None = None,
    superseded: Callable[[], bool] | None = None,
) -> TrainResult:
    """Run ``recipe`` with ``seed`` to its budget, streaming evaluation points into ``sink``.

    Resumes from ``workdir/checkpoint`` when it exists (the sink then receives points only for
    steps after the checkpoint). Checkpoints every ``recipe.checkpoint_every_steps`` and, when
    ``stop`` is set, after the step in progress, then returns with ``stopped=True``. ``threads``:
    torch CPU threads (None: ``$SCALERL_TORCH_THREADS``, default 1; see scalerl.harness.rl.numerics).
    """
    workdir = Path(workdir)
    trainer = Trainer(recipe, seed, threads)
    try:
        return _run(trainer, recipe, sink, workdir, stop, superseded)
    finally:
        trainer.task.close()  # a dataset task's verifier worker process


def _run(
    trainer: Trainer,
    recipe: Recipe,
    sink: PointSink,
    workdir: Path,
    stop: threading.Event | None,
    superseded: Callable[[], bool] | None = None,
) -> TrainResult:
    state = checkpoint.load(workdir)
    resumed_from = None
    metrics: dict[str, float] = {}
    if state is not None:
        trainer.load_state_dict(state)
        resumed_from = trainer.step
        log.info("resumed from %s at step %d", workdir / checkpoint.NAME, trainer.step)
    else:
        metrics = _emit(trainer, sink)
    budget = recipe.budget
    reason = "budget reached"
    stopped = False
    while trainer.meter.value(budget.unit, trainer.step) < budget.value:
        t0 = time.perf_counter()
        batch = trainer.next_batch()
        if batch is None:
            reason = "every training prompt was retired by no-positive-resampling"
            break
        trainer.stats.add(trainer.train_step(batch))
        trainer.meter.add_wall(time.perf_counter() - t0)
        done = trainer.meter.value(budget.unit, trainer.step) >= budget.value
        if trainer.step % recipe.eval.every_steps == 0 or done:
            metrics = _emit(trainer, sink)
        if superseded is not None and superseded():
            # A newer attempt owns the run and this folder: no checkpoint, no more steps.
            log.warning(
                "a newer attempt took the run over at step %d; stopping without a checkpoint", trainer.step
            )
            sink.flush()
            return TrainResult(
                trainer.step, metrics, trainer.meter.snapshot(), resumed_from, True, "superseded"
            )
        if stop is not None and stop.is_set():
            checkpoint.save(workdir, trainer.state_dict())
            stopped, reason = True, "stop requested"
            break
        if trainer.step % recipe.checkpoint_every_steps == 0:
            checkpoint.save(workdir, trainer.state_dict())
    if not stopped and trainer.stats.steps:
        metrics = _emit(trainer, sink)
    if not stopped:
        # A requeued job whose run already finished then resumes at the end: nothing to redo.
        checkpoint.save(workdir, trainer.state_dict())
    sink.flush()
    return TrainResult(trainer.step, metrics, trainer.meter.snapshot(), resumed_from, stopped, reason)
