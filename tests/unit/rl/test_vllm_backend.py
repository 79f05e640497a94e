"""The ``vllm`` backend's bookkeeping against a fake engine (vLLM itself is not installed here).

What is checked: chunked generation resubmits prompt + tokens so far, stops a thinking row at its
budget and appends the phrase masked out, caps the answer, records behaviour log-probs and the
policy version, and pushes weights through ``apply_model``. vLLM's real API is not exercised.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from scalerl.harness.rl.generation.base import SamplingSpec
from scalerl.harness.rl.generation.vllm import VLLMGenerator


@dataclass
class _Lp:
    logprob: float


@dataclass
class _Sample:
    token_ids: list[int]
    logprobs: list[dict[int, _Lp]]


@dataclass
class _Out:
    outputs: list[_Sample]


class FakeLLM:
    """Emits token 7 with log-prob -0.5 forever (never EOS), honouring ``max_tokens``."""

    def __init__(self) -> None:
        self.requests: list[list[int]] = []
        self.loaded: list[Any] = []

    def generate(self, requests: list[dict[str, list[int]]], params: list[Any], use_tqdm: bool) -> list[_Out]:
        outs = []
        for req, p in zip(requests, params, strict=True):
            self.requests.append(list(req["prompt_token_ids"]))
            toks = [7] * p.max_tokens
            outs.append(_Out([_Sample(toks, [{7: _Lp(-0.5)} for _ in toks])]))
        return outs

    def apply_model(self, fn: Any) -> None:
        class M:
            def load_weights(inner, weights: Any) -> None:
                self.loaded.append(weights)

        fn(M())


class _Policy:
    class tokenizer:
        eos_id, pad_id, bos_id = 2, 0, 1
        stop_ids = (2,)

    def think_end_ids(self) -> list[int]:
        return [3]


def test_chunks_interruption_and_weight_push(monkeypatch: Any) -> None:
    import scalerl.harness.rl.generation.vllm as mod

    class FakeSamplingParams:
        def __init__(self, **kw: Any) -> None:
            self.__dict__.update(kw)

    monkeypatch.setattr(mod, "_require_vllm", lambda: type("V", (), {"SamplingParams": FakeSamplingParams}))
    llm = FakeLLM()
    gen = VLLMGenerator(_Policy(), llm=llm)
    spec = SamplingSpec(1.0, 1.0, max_len=12, phrase_ids=(9, 3), answer_tokens=2)
    cohort = gen.start([[1, 5], [1, 6]], [3, None], spec, meta=None)
    rng = torch.Generator().manual_seed(0)
    gen.advance(cohort, 2, rng)
    gen.update_weights(torch.nn.Linear(2, 2), version=1)
    assert len(llm.loaded) == 1 and {n for n, _ in llm.loaded[0]} == {"weight", "bias"}
    while not cohort.done():
        gen.advance(cohort, 2, rng)
    out = cohort.result()
    # Row 0: 3 thinking tokens (2 at v0, 1 at v1), the phrase (masked), 2 answer tokens.
    assert out.tokens[0, :7].tolist() == [7, 7, 7, 9, 3, 7, 7]
    assert out.mask[0, :7].tolist() == [1, 1, 1, 0, 0, 1, 1]
    assert out.versions[0, :7].tolist() == [0, 0, 1, 1, 1, 1, 1]
    assert out.logp[0, :7].tolist() == [-0.5, -0.5, -0.5, 0.0, 0.0, -0.5, -0.5]
    assert int(out.lengths[0]) == 7 and bool(out.interrupted[0]) and bool(out.truncated[0])
    # Row 1: never interrupted, runs to max_len.
    assert int(out.lengths[1]) == 12 and not bool(out.interrupted[1])
    # The second chunk resubmitted the prompt plus what was generated.
    assert llm.requests[2] == [1, 5, 7, 7]
