"""``vllm``: generation with vLLM's offline ``LLM`` API (the ``[vllm]`` extra; GPU only).

UNTESTED against a real vLLM here (no GPU and no vllm on the build machine); written against
vLLM's documented API: ``LLM.generate`` with ``TokensPrompt`` inputs and one ``SamplingParams``
per request (``logprobs=0``: vLLM always returns the sampled token's log-prob, so 0 extra),
``seed`` per request for reproducibility, and in-place weight updates through
``LLM.apply_model`` calling the model's ``load_weights`` (the path vLLM's RLHF examples use on one
process; vLLM's V1 engine runs the model in-process only with
``VLLM_ENABLE_V1_MULTIPROCESSING=0`` in the job's environment). The engine shares the trainer's GPU
and takes ``generation.vllm.gpu_memory_utilization`` of its memory.
The bookkeeping (chunks, interruption, masks, versions) is shared logic tested with a
fake engine in ``tests/unit/rl/test_vllm_backend.py``.

Differences from ``hf`` a reader should know: a chunk is one ``generate`` call, and the next chunk
re-submits prompt + tokens so far; with prefix caching vLLM reuses the cached KV of the prefix,
which after a weight push was computed by the older weights (as in PipelineRL). vLLM returns
log-probs of the raw distribution unless the engine is built with processed log-probs
(``logprobs_mode="processed_logprobs"``, recent versions), which we request so they match the
trainer's temperature-scaled recomputation. The LM-head knob is the engine's dtype: vLLM computes
logits in the model dtype; ``fp32`` needs a vLLM build with an FP32 LM head (as ScaleRL patched).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from scalerl.harness.errors import ConfigError
from scalerl.harness.rl.generation.base import Cohort, Generator, Rollouts, SamplingSpec, register_generator


def _require_vllm() -> Any:
    try:
        import vllm
    except ImportError as err:
        raise ConfigError(
            "the vllm backend needs vLLM",
            field="generation.backend",
            value="vllm",
            fix="pip install 'scalerl-harness[vllm]' on a GPU machine, or use backend: hf",
        ) from err
    return vllm


class VLLMCohort(Cohort):
    def __init__(
        self,
        prompts: Sequence[Sequence[int]],
        interrupt_at: Sequence[int | None],
        spec: SamplingSpec,
        think_end: Sequence[int],
        stop: Sequence[int],
        meta: Any,
        version: int,
    ) -> None:
        self.prompts = [list(p) for p in prompts]
        self.budget = list(interrupt_at)
        self.spec, self.think_end, self.stop, self.meta, self.start_version = (
            spec,
            list(think_end),
            tuple(stop),
            meta,
            version,
        )
        n = len(prompts)
        self.tokens: list[list[int]] = [[] for _ in range(n)]
        self.logp: list[list[float]] = [[] for _ in range(n)]
        self.mask: list[list[float]] = [[] for _ in range(n)]
        self.versions: list[list[int]] = [[] for _ in range(n)]
        self.n_think = [0] * n
        self.answer_left: list[int | None] = [None] * n
        self.thinking = [True] * n
        self.live = [True] * n
        self.truncated = [False] * n
        self.interrupted = [False] * n

    def done(self) -> bool:
        return not any(self.live)

    def room(self, i: int, n_tokens: int) -> int:
        """How many tokens row ``i`` may sample in this chunk before a rule must be applied."""
        room = min(n_tokens, self.spec.max_len - len(self.tokens[i]))
        budget = self.budget[i]
        if self.thinking[i] and budget is not None:
            room = min(room, budget - self.n_think[i])
        left = self.answer_left[i]
        return room if left is None else min(room, left)

    def absorb(self, i: int, toks: Sequence[int], logps: Sequence[float], version: int) -> None:
        """Append one chunk of sampled tokens to row ``i`` and apply the length rules."""
        for tok, lp in zip(toks, logps, strict=True):
            self.tokens[i].append(int(tok))
            self.logp[i].append(float(lp))
            self.mask[i].append(1.0)
            self.versions[i].append(version)
            if self.thinking[i]:
                self.n_think[i] += 1
                if self.tokens[i][-len(self.think_end) :] == self.think_end:
                    self.thinking[i] = False
            elif self.answer_left[i] is not None:
                self.answer_left[i] = int(self.answer_left[i] or 0) - 1
            if tok in self.stop:
                self.live[i] = False
                return
        budget = self.budget[i]
        if self.thinking[i] and budget is not None and self.n_think[i] >= budget and self.spec.phrase_ids:
            for tok in self.spec.phrase_ids[: self.spec.max_len - len(self.tokens[i])]:
                self.tokens[i].append(tok)
                self.logp[i].append(0.0)
                self.mask[i].append(0.0)
                self.versions[i].append(version)
            self.thinking[i] = False
            self.interrupted[i] = True
            self.answer_left[i] = self.spec.answer_tokens
        if len(self.tokens[i]) >= self.spec.max_len or self.answer_left[i] == 0:
            self.live[i] = False
            self.truncated[i] = True

    def result(self) -> Rollouts:
        n, t = len(self.tokens), max((len(x) for x in self.tokens), default=0)
        tokens = torch.zeros((n, t), dtype=torch.long)
        logp, mask = torch.zeros((n, t)), torch.zeros((n, t))
        versions = torch.full((n, t), -1, dtype=torch.long)
        for i in range(n):
            m = len(self.tokens[i])
            tokens[i, :m] = torch.tensor(self.tokens[i], dtype=torch.long)
            logp[i, :m], mask[i, :m] = torch.tensor(self.logp[i]), torch.tensor(self.mask[i])
            versions[i, :m] = torch.tensor(self.versions[i], dtype=torch.long)
        return Rollouts(
            self.prompts,
            tokens,
            logp,
            mask,
            versions,
            torch.tensor([len(x) for x in self.tokens], dtype=torch.long),
            torch.tensor(self.truncated),
            torch.tensor(self.interrupted),
            0.0,
            self.meta,
        )


class VLLMGenerator(Generator):
    """Drives a ``vllm.LLM`` (or any object with the same ``generate``); ``llm`` is injectable."""

    name = "vllm"

    def __init__(self, policy: Any, llm: Any = None, options: Any = None) -> None:
        self.policy = policy
        self.version = 0
        if llm is None:
            vllm = _require_vllm()
            path = policy.model.config.name_or_path
            kwargs: dict[str, Any] = {}
            if options is not None:
                # Beside the trainer on one GPU: vLLM may take only its share of the memory.
                kwargs["gpu_memory_utilization"] = options.vllm.gpu_memory_utilization
                kwargs["enforce_eager"] = options.vllm.enforce_eager
                if options.vllm.max_model_len is not None:
                    kwargs["max_model_len"] = options.vllm.max_model_len
            llm = vllm.LLM(
                model=path,
                dtype=str(policy.body_dtype).removeprefix("torch."),
                enable_prefix_caching=True,
                logprobs_mode="processed_logprobs",
                **kwargs,
            )
        self.llm = llm

    def update_weights(self, model: Any, version: int) -> None:
        weights = list(model.state_dict().items())
        self.llm.apply_model(lambda m: m.load_weights(weights=weights))
        self.version = version

    def start(
        self,
        prompts: Sequence[Sequence[int]],
        interrupt_at: Sequence[int | None],
        spec: SamplingSpec,
        meta: Any = None,
    ) -> VLLMCohort:
        tok = self.policy.tokenizer
        return VLLMCohort(
            prompts, interrupt_at, spec, self.policy.think_end_ids(), tok.stop_ids, meta, self.version
        )

    def advance(self, cohort: Cohort, n_tokens: int, rng: torch.Generator) -> int:
        assert isinstance(cohort, VLLMCohort)
        c = cohort
        rows = [i for i in range(len(c.tokens)) if c.live[i]]
        if not rows:
            return 0
        requests, params = [], []
        for i in rows:
            seed = int(torch.randint(0, 2**31 - 1, (1,), generator=rng).item())
            requests.append({"prompt_token_ids": c.prompts[i] + c.tokens[i]})
            params.append(self._params(c.spec, max(1, c.room(i, n_tokens)), seed, c.stop))
        outputs = self.llm.generate(requests, params, use_tqdm=False)
        longest = 0
        for i, out in zip(rows, outputs, strict=True):
            sample = out.outputs[0]
            toks = list(sample.token_ids)
            logps = [sample.logprobs[j][t].logprob for j, t in enumerate(toks)]
            c.absorb(i, toks, logps, self.version)
            longest = max(longest, len(toks))
        return longest

    @staticmethod
    def _params(spec: SamplingSpec, max_tokens: int, seed: int, stop: Sequence[int]) -> Any:
        vllm = _require_vllm()
        temperature = 0.0 if spec.greedy else spec.temperature
        return vllm.SamplingParams(
            temperature=temperature,
            top_p=spec.top_p,
            max_tokens=max_tokens,
            logprobs=0,
            seed=seed,
            stop_token_ids=list(stop),
        )


@register_generator("vllm")
def _make_vllm(policy: Any, options: Any = None) -> Generator:
    return VLLMGenerator(policy, options=options)
