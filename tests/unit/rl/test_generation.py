"""The ``hf`` generator: interruption, masks, behaviour log-probs, and the LM-head knob."""

from __future__ import annotations

import torch

from scalerl.harness.rl.generation.base import Rollouts, SamplingSpec
from scalerl.harness.rl.generation.hf import HFGenerator
from scalerl.harness.rl.tokenizer import CharTokenizer
from scalerl.harness.rl.trainer import Trainer
from tests.unit.rl.micro import _policy_cache, micro_recipe

__all__ = ["_policy_cache"]


def _generate(tr: Trainer, spec: SamplingSpec, budgets: list[int | None], seed: int = 0) -> Rollouts:
    rng = torch.Generator().manual_seed(seed)
    prompts = [tr._prompt_ids(tr.split.train[i]) for i in range(len(budgets))]
    cohort = tr.gen.start(
        prompts,
        budgets,
        spec,
        meta={"problem": list(range(len(budgets))), "group": list(range(len(budgets)))},
    )
    while not cohort.done():
        tr.gen.advance(cohort, 3, rng)  # small chunks: state must survive between calls
    return cohort.result()


def test_interruption_inserts_the_phrase_masked_and_caps_the_answer() -> None:
    tr = Trainer(micro_recipe(), seed=0)
    phrase = tuple(tr.policy.tokenizer.encode("Stop now</think>"))
    spec = SamplingSpec(temperature=1.0, top_p=1.0, max_len=16, phrase_ids=phrase, answer_tokens=2)
    out = _generate(tr, spec, [2, 2, 3, None])
    for row, budget in enumerate([2, 2, 3]):
        n = int(out.lengths[row])
        toks = out.tokens[row, :n].tolist()
        tok = tr.policy.tokenizer
        assert isinstance(tok, CharTokenizer)
        if tok.think_end_id in toks[:budget] or tok.eos_id in toks[:budget]:
            continue  # the policy ended its thinking before the budget: nothing to force
        assert toks[budget : budget + len(phrase)] == list(phrase)
        assert out.mask[row, budget : budget + len(phrase)].tolist() == [0.0] * len(phrase)
        assert out.mask[row, :budget].tolist() == [1.0] * budget
        assert out.logp[row, budget : budget + len(phrase)].tolist() == [0.0] * len(phrase)
        assert bool(out.interrupted[row])
        assert n <= budget + len(phrase) + 2  # at most answer_tokens after the phrase
    assert not bool(out.interrupted[3])  # no budget: never interrupted
    assert out.mask[3, : int(out.lengths[3])].sum() == int(out.lengths[3])


def test_behaviour_logprobs_equal_a_recomputation_with_the_same_weights() -> None:
    # float32 everywhere: no engine copy, the KV-cached decode matches the full forward.
    tr = Trainer(micro_recipe(model={"dtype": "float32"}), seed=1)
    assert isinstance(tr.gen, HFGenerator) and tr.gen.engine is tr.policy
    out = _generate(tr, tr.spec, [5, None, 4, None], seed=3)
    with torch.no_grad():
        recomputed = tr.token_logprobs(out, torch.arange(4))
    m = out.mask.bool()
    assert m.sum() > 10
    gap = (recomputed[m] - out.logp[m]).abs().max()
    assert torch.allclose(recomputed[m], out.logp[m], atol=1e-5), gap


def test_bf16_engine_copy_samples_with_rounded_weights() -> None:
    # model.dtype bf16 with fp32 trainer weights: the generator is an engine with bf16 weights.
    tr = Trainer(micro_recipe(model={"dtype": "bfloat16"}), seed=1)
    gen = tr.gen
    assert isinstance(gen, HFGenerator)
    assert gen.engine is not tr.policy and gen.engine_dtype == torch.bfloat16
    for (name, w), (_, e) in zip(
        tr.policy.model.named_parameters(), gen.engine.model.named_parameters(), strict=True
    ):
        assert torch.equal(e, w.detach().bfloat16().float()), name
    out = _generate(tr, tr.spec, [5, None, 4, None], seed=3)
    with torch.no_grad():
        recomputed = tr.token_logprobs(out, torch.arange(4))
    m = out.mask.bool()
    gap = (recomputed[m] - out.logp[m]).abs()
    # A real mismatch (bf16 rounding of weights and hidden state), yet the same policy.
    assert float(gap.mean()) > 1e-4 and float(gap.max()) < 0.2, (float(gap.mean()), float(gap.max()))
    # A weight push re-rounds the new weights into the engine copy.
    with torch.no_grad():
        for p in tr.policy.model.parameters():
            p.add_(0.01)
    gen.update_weights(tr.policy.model, 1)
    w = next(tr.policy.model.parameters())
    assert torch.equal(next(gen.engine.model.parameters()), w.detach().bfloat16().float())


def test_lm_head_knob_changes_the_head_precision() -> None:
    fp32 = Trainer(micro_recipe(), seed=0).policy
    low = Trainer(micro_recipe(knobs={"lm_head": {"choice": "model_dtype"}}), seed=0).policy
    assert fp32.head_fp32 and not low.head_fp32
    hidden = torch.randn(4, 32, generator=torch.Generator().manual_seed(0))
    a, b = fp32.logprobs(hidden, 1.0), low.logprobs(hidden, 1.0)
    # Same weights; the bf16 head rounds its logits to bf16's 8-bit mantissa, the fp32 one does not.
    head = fp32.model.get_output_embeddings().weight
    ref32 = torch.log_softmax(hidden @ head.T, -1)
    ref16 = torch.log_softmax(hidden.bfloat16() @ head.bfloat16().T, -1).float()
    assert torch.allclose(a, ref32, atol=1e-6)
    assert torch.equal(b, ref16)
    assert (a - b).abs().max() > 1e-3
