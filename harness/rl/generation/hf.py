"""``hf``: batched sampling on a transformers model's forward with a KV cache.

Our own loop instead of ``model.generate``: it must pause after any token, continue with new
weights (PipelineRL keeps the in-flight KV cache computed by older weights, as the real system
does), record each token's behaviour log-prob and policy version, and force the interruption
phrase mid-sequence. Prompts are left-padded so every row's next token sits in the same column;
positions count real tokens only, matching the trainer's recomputation.

Forced tokens go through the same forward step as sampled ones (a sampled token is drawn and then
overridden), so the random stream consumed does not depend on which rows are being forced.

Engine numerics. An inference engine (vLLM, SGLang) serves the policy in bf16: bf16 weights, bf16
activations, a KV-cached decode, while the trainer recomputes log-probs with fp32 master weights
in one full forward. The log-probs the generator records then differ from the trainer's even for
the same weights, and ScaleRL's FP32 LM head exists to shrink that gap. When the trainer keeps
fp32 weights but ``model.dtype`` is lower precision (the tiny CPU preset), this generator
reproduces that: it samples from an *engine copy* of the policy whose weights are rounded to
``model.dtype`` at every weight push, and it rounds the final hidden state to ``model.dtype``
before the LM head (the head then computes in fp32 or ``model.dtype`` as ``knobs.lm_head`` says),
on top of its KV-cached incremental decode. The compute itself stays float32 (bf16 kernels are
slow on CPU); the rounding is what carries the engine's error. ``diag/logp_abs_diff`` measures the
resulting mismatch.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from scalerl.harness.rl.generation.base import Cohort, Generator, Rollouts, SamplingSpec, register_generator

_NEVER = 1 << 30  # "no interruption" as an integer budget


class HFCohort(Cohort):
    def __init__(
        self,
        prompts: Sequence[Sequence[int]],
        interrupt_at: Sequence[int | None],
        spec: SamplingSpec,
        pad_id: int,
        think_end: Sequence[int],
        meta: Any,
        start_version: int,
    ) -> None:
        b = len(prompts)
        width = max(len(p) for p in prompts)
        self.prompt_ids = [list(p) for p in prompts]
        self.spec = spec
        self.meta = meta
        self.start_version = start_version
        self.pad_id = pad_id
        self.think_end = list(think_end)
        ids = torch.full((b, width), pad_id, dtype=torch.long)
        self.attn = torch.zeros((b, width), dtype=torch.long)
        for i, p in enumerate(prompts):
            ids[i, width - len(p) :] = torch.tensor(list(p), dtype=torch.long)
            self.attn[i, width - len(p) :] = 1
        self.next_input = ids  # what the next forward consumes (the whole prompt at first)
        self.next_pos = (self.attn.cumsum(1) - 1).clamp(min=0)
        self.cache: Any = None
        self.interrupt_at = torch.tensor([_NEVER if x is None else x for x in interrupt_at], dtype=torch.long)
        self.n_think = torch.zeros(b, dtype=torch.long)
        self.phase = torch.zeros(b, dtype=torch.long)  # 0 thinking, 1 forcing phrase, 2 answering, 3 done
        self.force_idx = torch.zeros(b, dtype=torch.long)
        self.answer_left = torch.full((b,), _NEVER, dtype=torch.long)
        self.length = torch.zeros(b, dtype=torch.long)
        self.truncated = torch.zeros(b, dtype=torch.bool)
        self.interrupted = torch.zeros(b, dtype=torch.bool)
        self.tokens = torch.full((b, spec.max_len), pad_id, dtype=torch.long)
        self.logp = torch.zeros((b, spec.max_len), dtype=torch.float32)
        self.mask = torch.zeros((b, spec.max_len), dtype=torch.float32)
        self.versions = torch.full((b, spec.max_len), -1, dtype=torch.long)
        self.entropy_sum = 0.0

    def done(self) -> bool:
        return bool((self.phase == 3).all())

    def result(self) -> Rollouts:
        t = int(self.length.max().item()) if len(self.length) else 0
        return Rollouts(
            prompt_ids=self.prompt_ids,
            tokens=self.tokens[:, :t].clone(),
            logp=self.logp[:, :t].clone(),
            mask=self.mask[:, :t].clone(),
            versions=self.versions[:, :t].clone(),
            lengths=self.length.clone(),
            truncated=self.truncated.clone(),
            interrupted=self.interrupted.clone(),
            entropy_sum=self.entropy_sum,
            meta=self.meta,
        )


def _sample(logp: Tensor, spec: SamplingSpec, rng: torch.Generator) -> Tensor:
    if spec.greedy:
        return logp.argmax(-1)
    probs = logp.exp()
    if spec.top_p < 1.0:
        sorted_p, order = probs.sort(-1, descending=True)
        keep = sorted_p.cumsum(-1) - sorted_p < spec.top_p  # always keeps the top token
        sorted_p = sorted_p * keep
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_p)
    return torch.multinomial(probs, 1, generator=rng).squeeze(-1)


class HFGenerator(Generator):
    """Generation on the trainer's own transformers model (shared object: a weight push is a
    reference swap, the cheapest possible in-flight update on one device)."""

    name = "hf"

    def __init__(self, policy: Any) -> None:
        self.policy = policy
        self.version = 0
        self.engine_dtype: torch.dtype | None = _engine_dtype(policy)
        # The engine copy (see the module docstring); the trainer's policy itself when none.
        self.engine: Any = policy
        if self.engine_dtype is not None:
            engine = copy.deepcopy(policy.model)
            if policy.device.type == "cuda":
                # On a GPU the engine copy is a real bf16 model (half the memory, bf16 kernels);
                # on a CPU it stays float32 holding rounded values (bf16 kernels are slow there).
                engine = engine.to(self.engine_dtype)
            self.engine = dataclasses.replace(policy, model=engine, gradient_checkpointing=False)
            self._round_into(policy.model)

    def update_weights(self, model: Any, version: int) -> None:
        if self.engine_dtype is None:
            self.policy.model = model
            self.engine = self.policy
        else:
            self._round_into(model)
        self.version = version

    @torch.no_grad()
    def _round_into(self, model: Any) -> None:
        assert self.engine_dtype is not None
        src = dict(model.named_parameters())
        for name, p in self.engine.model.named_parameters():
            p.copy_(src[name].detach().to(self.engine_dtype))  # rounds, then widens back to fp32

    def start(
        self,
        prompts: Sequence[Sequence[int]],
        interrupt_at: Sequence[int | None],
        spec: SamplingSpec,
        meta: Any = None,
    ) -> HFCohort:
        tok = self.policy.tokenizer
        return HFCohort(
            prompts, interrupt_at, spec, tok.pad_id, self.policy.think_end_ids(), meta, self.version
        )

    @torch.no_grad()
    def advance(self, cohort: Cohort, n_tokens: int, rng: torch.Generator) -> int:
        assert isinstance(cohort, HFCohort)
        c, spec = cohort, cohort.spec
        eos = self.policy.tokenizer.eos_id
        stop = torch.tensor(self.policy.tokenizer.stop_ids, dtype=torch.long)
        phrase = torch.tensor(spec.phrase_ids or (eos,), dtype=torch.long)
        steps = 0
        dev = self.engine.device
        # On an accelerator the draw happens there: copying [B, V] log-probs to the host and
        # sampling them on one CPU thread cost 1.0 s a token at B=128 x V=151,936 on an H200
        # machine (bench/README.md, "GPU: trainer throughput and the FP32 head"). Its stream is
        # seeded from ``rng``, so the run's randomness still lives in the checkpointed CPU
        # generator. The CPU path is unchanged.
        dev_rng = None
        if dev.type != "cpu":
            seed = int(torch.randint(0, 2**62, (1,), generator=rng))
            dev_rng = torch.Generator(device=dev).manual_seed(seed)
        while steps < n_tokens and not c.done():
            # Bookkeeping lives on the CPU (it is checkpointed); only the forward, the KV cache
            # and (on an accelerator) the draw run on the model's device (no-ops on CPU).
            hidden, c.cache = self.engine.hidden(
                c.next_input.to(dev), c.attn.to(dev), c.next_pos.to(dev), c.cache, use_cache=True
            )
            last = hidden[:, -1]
            if self.engine_dtype is not None:
                last = last.to(self.engine_dtype).float()  # the engine's hidden state is bf16
            logp = self.engine.logprobs(last, spec.temperature)
            picked: Tensor | None = None  # per row: log-prob of the drawn token, entropy
            if dev_rng is None:
                tok = _sample(logp, spec, rng)
            else:
                drawn = _sample(logp, spec, dev_rng)
                picked = torch.stack(
                    [logp.gather(-1, drawn[:, None]).squeeze(-1), -(logp.exp() * logp).sum(-1)]
                ).cpu()
                tok = drawn.cpu()
            live = c.phase != 3
            # Interruption: a thinking row that reached its budget starts the forced phrase.
            start_force = live & (c.phase == 0) & (c.n_think >= c.interrupt_at)
            c.phase[start_force] = 1
            forcing = c.phase == 1
            tok = torch.where(forcing, phrase[c.force_idx.clamp(max=len(phrase) - 1)], tok)
            sampled = live & ~forcing
            rows = torch.arange(len(tok))
            col = c.length.clamp(max=spec.max_len - 1)
            c.tokens[rows[live], col[live]] = tok[live]
            c.versions[rows[live], col[live]] = self.version
            if picked is None:
                c.logp[rows[sampled], col[sampled]] = logp[sampled].gather(-1, tok[sampled, None]).squeeze(-1)
            else:
                c.logp[rows[sampled], col[sampled]] = picked[0, sampled]
            c.mask[rows[sampled], col[sampled]] = 1.0
            if sampled.any():
                ent = -(logp[sampled].exp() * logp[sampled]).sum(-1) if picked is None else picked[1, sampled]
                c.entropy_sum += float(ent.sum().item())
            c.length += live.long()
            # Forced phrase bookkeeping.
            c.force_idx += forcing.long()
            phrase_done = forcing & (c.force_idx >= len(phrase))
            c.phase[phrase_done] = 2
            c.interrupted |= phrase_done
            c.answer_left[phrase_done] = spec.answer_tokens
            # Sampled rows: thinking count, natural end of thinking, answer budget, EOS.
            thinking = sampled & (c.phase == 0)
            c.n_think += thinking.long()
            for i in torch.nonzero(thinking & (tok == c.think_end[-1])).flatten().tolist():
                n = len(c.think_end)
                if c.tokens[i, max(0, int(c.length[i]) - n) : int(c.length[i])].tolist() == c.think_end:
                    c.phase[i] = 2
            answering = sampled & (c.phase == 2)
            c.answer_left -= answering.long()
            finished = sampled & torch.isin(tok, stop)
            cut = live & ~finished & ((c.length >= spec.max_len) | (answering & (c.answer_left <= 0)))
            c.truncated |= cut
            c.phase[finished | cut] = 3
            # Next forward: one token per row, positions continue per row.
            c.next_pos = c.next_pos[:, -1:] + 1
            c.next_input = torch.where(live, tok, torch.full_like(tok, c.pad_id))[:, None]
            c.attn = torch.cat([c.attn, torch.ones((len(tok), 1), dtype=torch.long)], dim=1)
            steps += 1
        return steps


def _engine_dtype(policy: Any) -> torch.dtype | None:
    """``model.dtype`` when the trainer's weights are wider than it (engine copy needed), else None."""
    params = next(policy.model.parameters(), None)
    if params is None or policy.body_dtype == torch.float32 or params.dtype != torch.float32:
        return None
    dtype: torch.dtype = policy.body_dtype
    return dtype


@register_generator("hf")
def _make_hf(policy: Any, options: Any = None) -> Generator:
    return HFGenerator(policy)
