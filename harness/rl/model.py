"""The policy: a transformers causal LM plus the LM-head precision knob.

Two sources:

- ``model.path`` set: any local Hugging Face checkpoint (GPU runs), loaded in ``model.dtype``
  with ``local_files_only`` (never a download).
- ``model.path`` null: the tiny CPU policy, a small ``LlamaForCausalLM`` built from
  ``model.tiny`` with the character tokenizer, warm-started by a short deterministic supervised
  phase on the task's own traces, and cached on disk by the content hash of everything that
  determines its weights (``$SCALERL_CACHE_DIR`` or ``~/.cache/scalerl/policies/``, written to a
  temp dir and renamed, so concurrent runs never see half a cache entry).

The tiny CPU policy runs its body in float32: bf16 autocast on CPU doubled the step time of a
model this small (casts dominate), so only the head follows ``model.dtype``: the LM-head knob is
still real on CPU, ``fp32`` computes the final projection and log-softmax in float32, and
``model_dtype`` computes both in ``model.dtype`` (bfloat16 in the tiny preset). Checkpoints from
``model.path`` are loaded in ``model.dtype``, body and all. Generator and trainer call the same
:meth:`Policy.logprobs`, so the knob applies to both; the generator does so on an engine copy
with bf16-rounded weights (``generation/hf.py``), so their numerics differ as an engine's would.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import random
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

import torch
from torch import Tensor

from scalerl.harness.errors import ConfigError
from scalerl.harness.recipe.schema import Recipe
from scalerl.harness.rl.numerics import Numerics, pin
from scalerl.harness.rl.tasks import THINK_END, Task, make_split, make_task
from scalerl.harness.rl.tokenizer import TOKENIZER_VERSION, CharTokenizer

log = logging.getLogger(__name__)

# Bump when the warm start's code or the cache entry's format changes: it is part of the cache key.
# v3: the key covers the CPU numerics, torch/transformers versions and the full model config.
# v4: MKL's COMPATIBLE branch (issue 22) and the warm start's batch/schedule options.
POLICY_CODE_VERSION = "tiny-llama-v4"
DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}


class TokenizerLike(Protocol):
    eos_id: int
    pad_id: int
    bos_id: int
    stop_ids: tuple[int, ...]  # any of these ends a sequence (eos first)

    def encode(self, text: str) -> list[int]: ...
    def decode(self, ids: Sequence[int]) -> str: ...
    def prompt_ids(self, prompt: str, system: str | None = None) -> list[int]: ...


class HFTokenizer:
    """Adapts a transformers tokenizer to :class:`TokenizerLike`.

    Prompts go through the tokenizer's chat template when it has one (a system message first
    when the task gives one, then the user turn, then the template's generation prompt), else
    BOS (when the tokenizer has one) + system + prompt. A sequence ends at the tokenizer's EOS or
    any end-of-sequence id of the checkpoint's ``generation_config`` (instruct models end their
    turn with a token such as ``<|im_end|>`` that is not the base EOS).
    """

    def __init__(self, tok: Any, generation_eos: Sequence[int] = ()) -> None:
        self._tok = tok
        eos: int | None = tok.eos_token_id
        if eos is None and generation_eos:
            eos = generation_eos[0]
        if eos is None:
            raise ConfigError(
                "the checkpoint's tokenizer has no end-of-sequence token",
                field="model.path",
                value=getattr(tok, "name_or_path", None),
                fix="set eos_token in tokenizer_config.json (or eos_token_id in generation_config.json)",
            )
        self.eos_id = int(eos)
        self.pad_id = int(tok.pad_token_id if tok.pad_token_id is not None else self.eos_id)
        self.bos_id = int(tok.bos_token_id if tok.bos_token_id is not None else self.eos_id)
        self.stop_ids = tuple(dict.fromkeys([self.eos_id, *(int(i) for i in generation_eos)]))

    def encode(self, text: str) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=False))

    def decode(self, ids: Sequence[int]) -> str:
        return str(self._tok.decode(list(ids), skip_special_tokens=False))

    def prompt_ids(self, prompt: str, system: str | None = None) -> list[int]:
        if getattr(self._tok, "chat_template", None):
            messages = [{"role": "system", "content": system}] if system else []
            messages.append({"role": "user", "content": prompt})
            # Render to text, then encode without adding specials: the template writes its own.
            text = self._tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            return self.encode(str(text))
        head = [] if self._tok.bos_token_id is None else [self.bos_id]
        return head + self.encode(f"{system}\n\n{prompt}" if system else prompt)


@dataclass
class Policy:
    """A causal LM, its tokenizer, and how its body and head compute."""

    model: Any  # transformers.PreTrainedModel (untyped library)
    tokenizer: TokenizerLike
    body_dtype: torch.dtype
    head_fp32: bool
    autocast: bool  # True: fp32 master weights, body under autocast(body_dtype)
    think_end: str = THINK_END
    # Toggle train mode for the trainer's forward only: transformers checkpoints layers only in
    # train mode, and drops the KV cache there, which generation needs.
    gradient_checkpointing: bool = False

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def body_context(self) -> contextlib.AbstractContextManager[Any]:
        if self.autocast and self.body_dtype != torch.float32:
            return torch.autocast(self.device.type, dtype=self.body_dtype)
        return contextlib.nullcontext()

    def hidden(
        self,
        input_ids: Tensor,
        attention_mask: Tensor,
        position_ids: Tensor,
        past_key_values: Any = None,
        use_cache: bool = False,
    ) -> tuple[Tensor, Any]:
        """Last hidden states [B, T, D] of the body (no LM head) and the updated cache."""
        if self.gradient_checkpointing:
            self.model.train(not use_cache)
        with self.body_context():
            out = self.model.base_model(
                input_ids=input_ids,
                attention_mask=attention_mask,
                position_ids=position_ids,
                past_key_values=past_key_values,
                use_cache=use_cache,
            )
        return out.last_hidden_state, out.past_key_values if use_cache else None

    def logprobs(self, hidden: Tensor, temperature: float) -> Tensor:
        """Log-probs [..., V] of the sampling distribution softmax(logits / temperature).

        ``head_fp32``: projection and log-softmax in float32 (ScaleRL's FP32 logits);
        otherwise both in the body dtype, and only the result is upcast for the loss.
        """
        head = self.model.get_output_embeddings()
        dtype = torch.float32 if self.head_fp32 else self.body_dtype
        with torch.autocast(self.device.type, enabled=False):
            logits = torch.nn.functional.linear(
                hidden.to(dtype), head.weight.to(dtype), None if head.bias is None else head.bias.to(dtype)
            )
            if temperature != 1.0:
                logits = logits / temperature
            return torch.log_softmax(logits, dim=-1).float()

    def token_logprobs(self, hidden: Tensor, targets: Tensor, temperature: float) -> Tensor:
        """Log-probs [B, T] of ``targets`` [B, T] given ``hidden`` [B, T, D], as :meth:`logprobs`.

        Small batches take the full [B, T, V] log-softmax at once. When that tensor would pass
        :data:`LOGITS_BUDGET` elements (a 150k-token vocabulary times a few thousand tokens), the
        head runs in chunks of rows, each under activation checkpointing, so backward holds one
        chunk's logits at a time instead of all of them (the values are the same; the gradient
        sums in another order).
        """
        b, t = targets.shape
        vocab = self.model.get_output_embeddings().weight.shape[0]
        targets = targets.to(hidden.device)
        if b * t * vocab <= LOGITS_BUDGET or b <= 1:
            return self.logprobs(hidden, temperature).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        from torch.utils.checkpoint import checkpoint

        def rows(h: Tensor, y: Tensor) -> Tensor:
            return self.logprobs(h, temperature).gather(-1, y.unsqueeze(-1)).squeeze(-1)

        step = max(1, LOGITS_BUDGET // (t * vocab))
        parts = [
            checkpoint(rows, hidden[i : i + step], targets[i : i + step], use_reentrant=False)
            for i in range(0, b, step)
        ]
        return torch.cat(parts)

    def think_end_ids(self) -> list[int]:
        return self.tokenizer.encode(self.think_end)


# Elements of the [B, T, V] logits above which the head runs in checkpointed chunks (1 GiB fp32).
LOGITS_BUDGET = 1 << 28


def non_embedding_params(model: Any) -> int:
    """N for the FLOP estimate: every parameter except the input token/position embeddings.

    The output head always counts, even when its weight is tied to the input embedding (as in
    Qwen2.5-0.5B): its matmul runs for every token either way.
    """
    head = model.get_output_embeddings()
    head_ids = {id(p) for p in head.parameters()} if head is not None else set()
    emb = {id(p) for m in model.modules() if isinstance(m, torch.nn.Embedding) for p in m.parameters()}
    counted = {id(p): p.numel() for p in model.parameters() if id(p) not in emb - head_ids}
    if head is not None:
        # Tied: model.parameters() yields the shared tensor once; count the head's use of it.
        counted.update({id(p): p.numel() for p in head.parameters()})
    return sum(counted.values())


def cache_dir() -> Path:
    root = os.environ.get("SCALERL_CACHE_DIR")
    return (Path(root) if root else Path.home() / ".cache" / "scalerl") / "policies"


def build_policy(recipe: Recipe) -> Policy:
    """The policy a recipe names, warm-started (and cached) when it is the tiny one."""
    m = recipe.model
    dtype = DTYPES[m.dtype]
    head_fp32 = recipe.knobs.lm_head.choice == "fp32"
    if m.path is not None:
        return _load_hf(recipe, head_fp32)
    model = _tiny_cached(recipe)
    return Policy(
        model=model, tokenizer=CharTokenizer(), body_dtype=dtype, head_fp32=head_fp32, autocast=False
    )


def _load_hf(recipe: Recipe, head_fp32: bool) -> Policy:
    """A local checkpoint: weights, tokenizer (with its chat template) and generation config.

    ``master_weights: float32`` (the default) loads float32 weights for the optimizer; on a GPU the
    body then runs under ``autocast(model.dtype)`` (mixed precision), on a CPU in float32 with the
    generator's engine copy rounded to ``model.dtype`` (as the tiny policy does). ``model_dtype``
    loads the weights in ``model.dtype`` and trains them there.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    from scalerl.harness.rl.tasks.records import is_placeholder

    m = recipe.model
    path = str(m.path)
    if is_placeholder(path):
        raise ConfigError(
            "model.path is still a placeholder",
            field="model.path",
            value=path,
            fix="replace it with the directory of a downloaded Hugging Face checkpoint",
        )
    if not Path(path).is_dir():
        raise ConfigError(
            "not a local checkpoint directory",
            field="model.path",
            value=path,
            fix="point model.path at a downloaded Hugging Face checkpoint (nothing is fetched)",
        )
    dtype = DTYPES[m.dtype]
    master = torch.float32 if m.master_weights == "float32" else dtype
    device = "cuda" if torch.cuda.is_available() else "cpu"
    kwargs: dict[str, Any] = {"dtype": master, "local_files_only": True}
    if m.attn_implementation is not None:
        kwargs["attn_implementation"] = m.attn_implementation
    try:
        model: Any = AutoModelForCausalLM.from_pretrained(path, **kwargs)
        tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    except (OSError, ValueError) as err:
        raise ConfigError(
            f"cannot load the checkpoint: {err}",
            field="model.path",
            value=path,
            fix="point model.path at a directory holding config.json, the weights and the tokenizer files",
        ) from None
    model = model.to(device)
    model.eval()  # no dropout in rollouts or in the recomputed log-probs
    if m.gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    try:
        gen_eos = GenerationConfig.from_pretrained(path, local_files_only=True).eos_token_id
    except OSError:  # no generation_config.json
        gen_eos = None
    gen_eos_ids = [] if gen_eos is None else [gen_eos] if isinstance(gen_eos, int) else list(gen_eos)
    autocast = device == "cuda" and master == torch.float32 and dtype != torch.float32
    return Policy(
        model=model,
        tokenizer=HFTokenizer(tok, gen_eos_ids),
        body_dtype=dtype,
        head_fp32=head_fp32,
        autocast=autocast,
        think_end=m.think_end,
        gradient_checkpointing=m.gradient_checkpointing,
    )


def tiny_cache_key(recipe: Recipe, numerics: Numerics | None = None) -> str:
    """Content hash of everything that determines the warm-started weights.

    Covers: the tiny architecture (the full transformers config it builds, so a transformers
    default that changes is caught too), warm-start steps/lr/seed, the task and its split, the
    tokenizer's vocabulary, the model dtype, the code/format version, the torch and transformers
    versions and the CPU kernels in effect (:class:`scalerl.harness.rl.numerics.Numerics`; a policy warmed
    up with other kernels is a different policy, see that module). ``numerics`` None: pin now.
    """
    import transformers

    num = numerics if numerics is not None else pin()
    tok = CharTokenizer()
    ident = {
        "tiny": recipe.model.tiny.model_dump(mode="json"),
        "arch": _tiny_config(recipe, tok.vocab_size).to_dict(),
        "dtype": recipe.model.dtype,
        "task": recipe.task.model_dump(mode="json"),
        "tokenizer": [TOKENIZER_VERSION, hashlib.sha256("\x00".join(tok.vocab).encode()).hexdigest()],
        "code": POLICY_CODE_VERSION,
        "max_len": _max_positions(recipe),
        "numerics": num.key(),
        "transformers": transformers.__version__,
    }
    # The config dict carries its transformers version: keep it out, the key has it once above.
    ident["arch"].pop("transformers_version", None)
    return hashlib.sha256(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()[:20]


def _max_positions(recipe: Recipe) -> int:
    # RoPE has no weights, so a generous floor keeps length tweaks from invalidating the cache.
    return max(1024, 64 + recipe.scale.max_gen_len)


def _tiny_config(recipe: Recipe, vocab_size: int) -> Any:
    from transformers import LlamaConfig

    t = recipe.model.tiny
    if t.d_model % t.n_head:
        raise ConfigError(
            "d_model must be divisible by n_head",
            field="model.tiny.d_model",
            value=t.d_model,
            fix=f"use a multiple of n_head={t.n_head}",
        )
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=t.d_model,
        intermediate_size=4 * t.d_model,
        num_hidden_layers=t.n_layer,
        num_attention_heads=t.n_head,
        num_key_value_heads=t.n_head,
        max_position_embeddings=_max_positions(recipe),
        tie_word_embeddings=False,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    config._attn_implementation = "sdpa"
    return config


def _tiny_model(recipe: Recipe, vocab_size: int) -> Any:
    from transformers import LlamaForCausalLM

    return LlamaForCausalLM(_tiny_config(recipe, vocab_size))


def _tiny_cached(recipe: Recipe) -> Any:
    from transformers import LlamaForCausalLM

    target = cache_dir() / tiny_cache_key(recipe)
    if (target / "config.json").exists():
        # float32 explicitly: the warm start trains float32 master weights, whatever the default.
        return LlamaForCausalLM.from_pretrained(target, local_files_only=True, dtype=torch.float32)
    model = warm_start(recipe)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".tmp-"))
    try:
        model.save_pretrained(tmp)
        os.replace(tmp, target)  # atomic; a concurrent writer of the same key wrote identical bytes
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if not (target / "config.json").exists():
            raise
    return model


@contextlib.contextmanager
def torch_seed(seed: int) -> Iterator[None]:
    """Seed torch for a deterministic phase, restoring the caller's RNG afterwards."""
    state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        yield
    finally:
        torch.random.set_rng_state(state)


def warm_start(recipe: Recipe) -> Any:
    """Build the tiny model and fit it briefly to the task's own (noisy) reference traces."""
    t = recipe.model.tiny
    tok = CharTokenizer()
    task = make_task(recipe.task.name, recipe.task.params)
    split = make_split(task, recipe.task.n_train, recipe.task.n_val, recipe.task.seed)
    with torch_seed(t.warmstart_seed):
        model = _tiny_model(recipe, tok.vocab_size)
        policy = Policy(model, tok, DTYPES[recipe.model.dtype], head_fp32=True, autocast=False)
        loss = fit_traces(
            policy,
            task,
            split.train,
            steps=t.warmstart_steps,
            lr=t.warmstart_lr,
            seed=t.warmstart_seed,
            batch=t.warmstart_batch,
            schedule=t.warmstart_schedule,
        )
    log.info("warm-started tiny policy (%d steps, last loss %.4f)", t.warmstart_steps, loss)
    return model


def fit_traces(
    policy: Policy,
    task: Task,
    problems: Sequence[Any],
    *,
    steps: int,
    lr: float,
    seed: int,
    batch: int = 32,
    schedule: Literal["constant", "cosine"] = "constant",
) -> float:
    """``steps`` supervised steps (AdamW, clip 1.0) on ``task``'s reference completions of batches
    drawn from ``problems`` with ``random.Random(seed)``; the caller seeds torch. ``cosine`` decays
    the rate from ``lr`` to 0 at the last step, so the weights settle where the data puts them
    instead of wherever the last constant-rate step left them. Returns the last loss (nan when
    ``steps`` is 0)."""
    rng = random.Random(seed)
    opt = torch.optim.AdamW(policy.model.parameters(), lr=lr, weight_decay=0.0)
    loss = float("nan")
    for i in range(steps):
        if schedule == "cosine":
            for group in opt.param_groups:
                group["lr"] = lr * (0.5 * (1.0 + math.cos(math.pi * i / steps)))
        drawn = [problems[rng.randrange(len(problems))] for _ in range(batch)]
        step_loss = sft_loss(policy, task, drawn, rng)
        opt.zero_grad(set_to_none=True)
        step_loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.model.parameters(), 1.0)
        opt.step()
        loss = float(step_loss.detach())
    return loss


def sft_loss(policy: Policy, task: Task, batch: Sequence[Any], rng: random.Random) -> Tensor:
    """Mean negative log-likelihood of the task's reference completions (then EOS) after the
    prompts, rendered as the trainer renders them (:meth:`TokenizerLike.prompt_ids`)."""
    tok = policy.tokenizer
    seqs, n_prompt = [], []
    for p in batch:
        prompt = tok.prompt_ids(p.prompt, p.system)
        seqs.append(prompt + tok.encode(task.trace(p, rng)) + [tok.eos_id])
        n_prompt.append(len(prompt))
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), tok.pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    target_mask = torch.zeros((len(seqs), width - 1), dtype=torch.bool)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s)
        mask[i, : len(s)] = 1
        target_mask[i, n_prompt[i] - 1 : len(s) - 1] = True
    pos = (mask.cumsum(1) - 1).clamp(min=0)
    hidden, _ = policy.hidden(ids, mask, pos)
    logp = policy.logprobs(hidden[:, :-1], 1.0)
    tok_logp = logp.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    return -(tok_logp * target_mask).sum() / target_mask.sum()
