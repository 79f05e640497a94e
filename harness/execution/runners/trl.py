"""The ``trl`` runner: TRL's ``GRPOTrainer`` trained on the recipe, streamed into the store.

``runner: {type: trl}`` (the ``[trl-runner]`` extra: TRL >= 1.16). Each ScaleRL knob is mapped onto
TRL's ``GRPOConfig`` where TRL expresses it (:func:`grpo_config_kwargs`, the table below); a knob
TRL cannot express raises :class:`ConfigError` naming it, unless ``runner.unsupported: ignore``,
which trains without it and records the ignored knobs with the run (an ``unsupported`` event in
the store, and ``workdir/trl_unsupported.json``).

=====================================  =================================================
knob / field                           GRPOConfig
=====================================  =================================================
pipeline=ppo_off_policy(k)             steps_per_generation=k (one batch, k minibatches)
pipeline=pipeline_rl                   refused: TRL has no in-flight weight updates
loss=cispo(eps_max)                    loss_type=cispo, epsilon_high=eps_max
loss=dapo(eps_low, eps_high)           epsilon=eps_low, epsilon_high=eps_high
loss=gspo(eps_low, eps_high)           + importance_sampling_level=sequence
loss=grpo(eps)                         epsilon=epsilon_high=eps
aggregation=token_avg / sample_avg     loss_type=dapo / grpo (cispo: token_avg only)
aggregation=prompt_avg                 refused: TRL has no prompt-level aggregation
lm_head=fp32 / model_dtype             cast_lm_head_to_fp32=True / False
advantage_norm=batch / prompt / none   scale_rewards=batch / group / none
zero_variance_filter=on                refused: TRL keeps zero-variance groups in the loss
length_control=length_penalty          DAPO soft overlong punishment as a second reward
length_control=interruption            refused: TRL has no forced interruption
no_positive_resampling=on              refused: TRL samples prompts uniformly
scale.*                                num_generations, per_device_train_batch_size,
                                       max_completion_length
optimizer.*                            learning_rate, adam_*, weight_decay, warmup_steps,
                                       max_grad_norm (constant LR after warmup)
generation.*                           temperature, top_p, use_vllm
budget (steps / samples)               max_steps (other units: refused)
=====================================  =================================================

Stream: a ``TrainerCallback`` evaluates ``val/pass_rate`` (``eval.n_val`` prompts x ``eval.k``
samples at ``eval.temperature``) at step 0 and every ``eval.every_steps``, and writes it with
cumulative compute through ``ctx.sink`` (the job's fenced writer). ``ctx.stop`` saves a checkpoint
under ``workdir/trl/`` and ends the attempt as ``stopped``; the next attempt resumes from the last
checkpoint (TRL's own ``resume_from_checkpoint``), with its compute.
"""

from __future__ import annotations

import json
import logging
import math
import re
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from scalerl.harness.errors import ConfigError
from scalerl.harness.execution.runners.base import Outcome, RunContext, Runner, register_runner
from scalerl.harness.execution.spec import RunSpec
from scalerl.harness.recipe.schema import Recipe, TrlRunnerConfig
from scalerl.harness.rl.tasks import Problem

log = logging.getLogger(__name__)

OUTPUT = "trl"  # workdir/trl/checkpoint-<step>/
# The GRPOConfig fields this runner sets (importance_sampling_level, loss_type "dapo", ...) are
# TRL 1.16's. A trainer that only reports through the callback takes any TRL (the `trl` extra).
TRL_MIN = (1, 16)
TRL_RUNNER_FIX = "pip install 'scalerl-harness[trl-runner]' (TRL >= 1.16)"


def check_trl_version(version: str) -> None:
    """Refuse a TRL older than :data:`TRL_MIN` by name (the `trl` extra leaves a lab's pin alone,
    so an older one can be installed beside the harness)."""
    parts = re.findall(r"\d+", version)[:2]
    got = tuple(int(p) for p in parts) + (0,) * (2 - len(parts))
    if got < TRL_MIN:
        raise ConfigError(
            f"the trl runner needs TRL >= {'.'.join(map(str, TRL_MIN))}, and this environment has {version}",
            field="runner.type",
            value="trl",
            fix=TRL_RUNNER_FIX,
        )


COMPUTE_FILE = "harness_compute.json"  # in each checkpoint dir
UNSUPPORTED_FILE = "trl_unsupported.json"
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")
IGNORE_FIX = "choose an alternative TRL expresses, or set runner.unsupported: ignore to train without it"


# --------------------------------------------------------------------------- the knob mapping
def _unsupported(recipe: Recipe, knob: str, reason: str, ignored: list[str]) -> None:
    """Refuse ``knobs.<knob>.choice`` (or ``field``) unless the runner ignores what TRL lacks."""
    field = knob if "." in knob else f"knobs.{knob}.choice"
    value = getattr(recipe.knobs, knob).choice if "." not in knob else None
    cfg = recipe.runner
    if isinstance(cfg, TrlRunnerConfig) and cfg.unsupported == "ignore":
        ignored.append(f"{field}={value}: {reason}")
        return
    raise ConfigError(f"TRL cannot express it: {reason}", field=field, value=value, fix=IGNORE_FIX)


def grpo_config_kwargs(recipe: Recipe) -> tuple[dict[str, Any], list[str]]:
    """``GRPOConfig`` keyword arguments for the recipe, and the knobs ignored (``field=value:
    reason`` each; empty unless ``runner.unsupported: ignore``). Pure: no TRL import; device,
    output and logging arguments are the runner's."""
    k = recipe.knobs
    ignored: list[str] = []
    kw: dict[str, Any] = {"beta": 0.0}  # ScaleRL trains without a KL term

    # pipeline: a minibatch per optimizer step out of one generated batch.
    completions = recipe.scale.prompts_per_batch * recipe.scale.generations_per_prompt
    steps_per_gen = 1
    if k.pipeline.choice == "ppo_off_policy":
        steps_per_gen = k.pipeline.alternatives.ppo_off_policy.k
        if recipe.scale.prompts_per_batch % steps_per_gen:
            raise ConfigError(
                f"PPO-off-policy-{steps_per_gen} splits scale.prompts_per_batch into {steps_per_gen} "
                "minibatches",
                field="scale.prompts_per_batch",
                value=recipe.scale.prompts_per_batch,
                fix=f"use a multiple of knobs.pipeline.alternatives.ppo_off_policy.k={steps_per_gen}",
            )
    else:
        _unsupported(recipe, "pipeline", "PipelineRL's in-flight weight updates are not in TRL", ignored)
    kw |= {
        "num_generations": recipe.scale.generations_per_prompt,
        "per_device_train_batch_size": completions // steps_per_gen,
        "gradient_accumulation_steps": 1,
        "steps_per_generation": steps_per_gen,
        "num_iterations": 1,
        "max_completion_length": recipe.scale.max_gen_len,
    }

    # loss + aggregation -> loss_type (TRL couples the objective and its normalisation).
    loss, agg = k.loss.choice, k.aggregation.choice
    if agg == "prompt_avg":
        _unsupported(recipe, "aggregation", "TRL has no prompt-level loss aggregation", ignored)
    if loss == "cispo":
        kw |= {"loss_type": "cispo", "epsilon_high": k.loss.alternatives.cispo.eps_max}
        if agg == "sample_avg":
            _unsupported(recipe, "aggregation", "TRL's CISPO averages over tokens only", ignored)
    else:
        kw["loss_type"] = "grpo" if agg == "sample_avg" else "dapo"
        if loss == "grpo":
            eps = k.loss.alternatives.grpo.eps
            kw |= {"epsilon": eps, "epsilon_high": eps}
        else:
            p = k.loss.alternatives.dapo if loss == "dapo" else k.loss.alternatives.gspo
            kw |= {"epsilon": p.eps_low, "epsilon_high": p.eps_high}
        if loss == "gspo":
            kw["importance_sampling_level"] = "sequence"

    kw["cast_lm_head_to_fp32"] = k.lm_head.choice == "fp32"
    kw["scale_rewards"] = {"batch": "batch", "prompt": "group", "none": "none"}[k.advantage_norm.choice]
    if k.zero_variance_filter.choice == "on":
        _unsupported(
            recipe, "zero_variance_filter", "TRL keeps zero-variance prompt groups in the loss", ignored
        )
    if k.length_control.choice == "interruption":
        _unsupported(recipe, "length_control", "TRL has no forced interruption of thinking", ignored)
    if k.no_positive_resampling.choice == "on":
        _unsupported(
            recipe, "no_positive_resampling", "TRL cannot retire prompts by their pass rate", ignored
        )

    o = recipe.optimizer
    kw |= {
        "optim": "adamw_torch",
        "learning_rate": o.lr,
        "adam_beta1": o.betas[0],
        "adam_beta2": o.betas[1],
        "adam_epsilon": o.eps,
        "weight_decay": o.weight_decay,
        "warmup_steps": o.warmup_steps,
        "lr_scheduler_type": "constant_with_warmup",  # the reference trainer's schedule
        "max_grad_norm": o.grad_clip,
    }
    g = recipe.generation
    kw |= {"temperature": g.temperature, "top_p": g.top_p, "use_vllm": g.backend == "vllm"}
    kw["max_steps"] = max_steps(recipe)
    return kw, ignored


def max_steps(recipe: Recipe) -> int:
    """Optimizer steps the budget allows: ``steps`` as is, ``samples`` per trained completions."""
    b = recipe.budget
    if b.unit == "steps":
        return math.ceil(b.value)
    if b.unit == "samples":
        k = recipe.knobs.pipeline
        per_step = recipe.scale.prompts_per_batch * recipe.scale.generations_per_prompt
        if k.choice == "ppo_off_policy":
            per_step //= k.alternatives.ppo_off_policy.k
        return math.ceil(b.value / per_step)
    raise ConfigError(
        "the trl runner budgets in steps or samples",
        field="budget.unit",
        value=b.unit,
        fix="give the budget in steps or samples",
    )


def check_specs(specs: Iterable[RunSpec]) -> None:
    """Map every trl run's recipe once, so ``scalerl sweep`` can refuse an inexpressible knob
    before anything is submitted (the job would refuse it the same way)."""
    for spec in specs:
        recipe = spec.typed_recipe()
        if isinstance(recipe.runner, TrlRunnerConfig):
            grpo_config_kwargs(recipe)


# --------------------------------------------------------------------------- model, data, reward
def char_tokenizer() -> Any:
    """The tiny policy's character tokenizer as a transformers fast tokenizer (no files, no
    downloads): same ids; ``</think>`` stays an ordinary token so decoded completions keep it."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from scalerl.harness.rl.tokenizer import SPECIALS, CharTokenizer

    vocab = CharTokenizer().vocab
    tok = Tokenizer(models.WordLevel({t: i for i, t in enumerate(vocab)}, unk_token="<pad>"))
    pattern = "|".join(re.escape(s) for s in SPECIALS) + "|."
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(pattern), behavior="isolated")
    tok.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", bos_token="<bos>", eos_token="<eos>", padding_side="left"
    )


class Verifier:
    """TRL reward function: the task's verifier on each completion (1.0 correct, 0.0 not)."""

    __name__ = "correct"

    def __init__(self, task: Any) -> None:
        self.task = task

    def __call__(
        self, prompts: list[str], completions: list[str], answer: list[str], **_: Any
    ) -> list[float]:
        return self.task.score_many([Problem("", a, 0) for a in answer], completions)


def _prompt(tokenizer: Any, text: str) -> str:
    return f"{tokenizer.bos_token}{text}" if tokenizer.bos_token else text


# --------------------------------------------------------------------------- checkpoints
def last_checkpoint(workdir: Path) -> Path | None:
    out = workdir / OUTPUT
    steps = [
        (int(m.group(1)), p)
        for p in (out.iterdir() if out.is_dir() else [])
        if (m := _CHECKPOINT.match(p.name)) and (p / "trainer_state.json").exists()
    ]
    return max(steps)[1] if steps else None


# --------------------------------------------------------------------------- the runner
@register_runner("trl")
class TrlRunner(Runner):
    def resume_step(self, workdir: Path) -> int | None:
        ckpt = last_checkpoint(workdir)
        return None if ckpt is None else int(ckpt.name.split("-")[1])

    def run(self, ctx: RunContext) -> Outcome:
        recipe = ctx.spec.typed_recipe()
        kwargs, ignored = grpo_config_kwargs(recipe)  # refuse before any heavy import
        try:
            import torch
            import trl
        except ImportError as err:
            raise ConfigError(
                f"the trl runner needs TRL ({err})",
                field="runner.type",
                value="trl",
                fix=TRL_RUNNER_FIX,
            ) from None
        check_trl_version(trl.__version__)
        from datasets import Dataset  # comes with trl

        from scalerl.harness.rl.model import build_policy, non_embedding_params
        from scalerl.harness.rl.tasks import make_split, make_task

        if ignored:
            self._record_ignored(ctx, ignored)
        task = make_task(recipe.task.name, recipe.task.params)
        split = make_split(task, recipe.task.n_train, recipe.task.n_val, recipe.task.seed)
        model = build_policy(recipe).model
        if recipe.model.path is None:
            tokenizer = char_tokenizer()
        else:
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(recipe.model.path, local_files_only=True)
            tokenizer.padding_side = "left"
        data = Dataset.from_dict(
            {
                "prompt": [_prompt(tokenizer, p.prompt) for p in split.train],
                "answer": [p.answer for p in split.train],
            }
        )
        rewards: list[Any] = [Verifier(task)]
        lc = recipe.knobs.length_control
        if lc.choice == "length_penalty":
            from trl.rewards import get_soft_overlong_punishment

            lp = lc.alternatives.length_penalty
            rewards.append(get_soft_overlong_punishment(lp.l_max, lp.l_cache))
        cpu = not torch.cuda.is_available()
        args = trl.GRPOConfig(
            **kwargs,
            output_dir=str(ctx.workdir / OUTPUT),
            seed=ctx.spec.seed,
            use_cpu=cpu,
            bf16=not cpu and recipe.model.dtype == "bfloat16",
            fp16=False,
            report_to="none",
            logging_steps=1,
            save_strategy="steps",
            save_steps=recipe.checkpoint_every_steps,
            disable_tqdm=True,
            dataloader_num_workers=0,
        )
        resume = last_checkpoint(ctx.workdir)
        stream = _make_stream(ctx, recipe, task, split.val, tokenizer, non_embedding_params(model), resume)
        trainer = trl.GRPOTrainer(
            model=model,
            reward_funcs=rewards,
            args=args,
            train_dataset=data,
            processing_class=tokenizer,
            callbacks=[stream],
        )
        trainer.train(resume_from_checkpoint=str(resume) if resume else None)
        ctx.sink.flush()
        return Outcome.STOPPED if stream.stopped else Outcome.COMPLETED

    @staticmethod
    def _record_ignored(ctx: RunContext, ignored: list[str]) -> None:
        for item in ignored:
            log.warning("trl runner: ignoring %s", item)
        ctx.workdir.mkdir(parents=True, exist_ok=True)
        (ctx.workdir / UNSUPPORTED_FILE).write_text(json.dumps({"ignored": ignored}, indent=1))
        if ctx.db_url is not None and last_checkpoint(ctx.workdir) is None:  # once, at the start
            from scalerl import db

            store = db.open_store(ctx.db_url)
            try:
                store.log_event(ctx.spec.run_id, "unsupported", {"runner": "trl", "ignored": ignored})
            finally:
                store.close()


def _make_stream(
    ctx: RunContext, recipe: Recipe, task: Any, val: Any, tokenizer: Any, n_params: int, resume: Path | None
) -> Any:
    """The ``TrainerCallback`` that evaluates and writes points (a factory: transformers is lazy)."""
    import torch
    from transformers import TrainerCallback

    e = recipe.eval
    problems = list(val[: min(e.n_val or len(val), len(val))])
    prompts = [_prompt(tokenizer, p.prompt) for p in problems]

    class Stream(TrainerCallback):
        def __init__(self) -> None:
            self.stopped = False
            self.compute = {"tokens": 0.0, "samples": 0.0, "wall_s": 0.0, "flops": 0.0}
            self.reward: float | None = None
            self.t0 = time.perf_counter()
            if resume is not None and (resume / COMPUTE_FILE).exists():
                self.compute = json.loads((resume / COMPUTE_FILE).read_text())

        def _tick(self) -> None:
            now = time.perf_counter()
            self.compute["wall_s"] += now - self.t0
            self.t0 = now

        def evaluate(self, model: Any, step: int) -> None:
            self._tick()
            was_training = model.training
            model.eval()
            enc = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(
                model.device
            )
            with torch.random.fork_rng(devices=[]), torch.no_grad():
                torch.manual_seed(ctx.spec.seed * 1_000_003 + step + 7)
                out = model.generate(
                    **enc,
                    do_sample=True,
                    temperature=e.temperature,
                    top_p=1.0,
                    top_k=0,
                    max_new_tokens=recipe.scale.max_gen_len,
                    num_return_sequences=e.k,
                    pad_token_id=tokenizer.pad_token_id,
                    eos_token_id=tokenizer.eos_token_id,
                )
            texts = tokenizer.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
            passes = sum(task.score_many([problems[i // e.k] for i in range(len(texts))], texts))
            model.train(was_training)
            c = dict(self.compute)
            compute = {**c, "gpu_hours": c["wall_s"] / 3600.0}
            metrics = {"val/pass_rate": passes / len(texts)}
            if self.reward is not None:
                metrics["train/reward"] = self.reward
            ctx.sink.add(step, metrics, compute, n={"val/pass_rate": len(texts)})
            self.t0 = time.perf_counter()  # validation is measurement, not training compute

        def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **_: Any) -> None:
            self.t0 = time.perf_counter()
            if resume is None and model is not None:
                self.evaluate(model, 0)

        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **_: Any) -> None:
            if logs and "reward" in logs:
                self.reward = float(logs["reward"])
            if logs and "num_tokens" in logs:
                tokens = float(logs["num_tokens"])
                # 2N per token generated/forwarded + 6N trained: the usual estimate
                # (scalerl.harness.rl.compute)
                self.compute["flops"] = 8.0 * n_params * tokens
                self.compute["tokens"] = tokens

        def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **_: Any) -> None:
            self.compute["samples"] = float(state.global_step * args.per_device_train_batch_size)
            if model is not None and (
                state.global_step % e.every_steps == 0 or state.global_step >= state.max_steps
            ):
                self.evaluate(model, state.global_step)
            if ctx.superseded():  # a newer attempt owns the run and output_dir: no save
                self.stopped = True
                control.should_save = False
                control.should_training_stop = True
            elif ctx.stop.is_set() and state.global_step < state.max_steps:
                self.stopped = True
                control.should_save = True
                control.should_training_stop = True

        def on_save(self, args: Any, state: Any, control: Any, **_: Any) -> None:
            self._tick()
            ckpt = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            if ckpt.is_dir():
                ctx.sink.flush()  # the points up to the checkpoint are in before it counts
                (ckpt / COMPUTE_FILE).write_text(json.dumps(self.compute))

    return Stream()
