"""PipelineRL-k and PPO-off-policy-k schedules, driven by the real trainer on the micro recipe."""

from __future__ import annotations

import torch

from scalerl.harness.rl.pipeline import PipelineRL, PPOOffPolicy
from scalerl.harness.rl.trainer import Trainer
from tests.unit.rl.micro import _policy_cache, micro_recipe

__all__ = ["_policy_cache"]


def _run(tr: Trainer, steps: int) -> list:
    batches = []
    for _ in range(steps):
        batch = tr.next_batch()
        assert batch is not None
        batches.append((tr.step, batch))
        tr.train_step(batch)
    return batches


def test_pipeline_rl_swaps_weights_mid_sequence_within_the_lag_bound() -> None:
    for k in (1, 3):
        recipe = micro_recipe(
            knobs={"pipeline": {"alternatives": {"pipeline_rl": {"k": k}}}}, scale={"max_gen_len": 12}
        )
        tr = Trainer(recipe, seed=0)
        assert isinstance(tr.schedule, PipelineRL)
        batches = _run(tr, 8)
        lags = [step - b.min_version() for step, b in batches]
        assert max(lags) <= k and tr.max_lag == max(lags)
        assert max(lags) >= 1  # the trainer really ran ahead of generation
        # In-flight sequences hold tokens sampled by more than one policy version.
        mixed = 0
        for _, b in batches:
            for row in range(b.versions.shape[0]):
                v = b.versions[row][b.versions[row] >= 0]
                mixed += int(len(set(v.tolist())) > 1)
        assert mixed > 0
        # Versions never decrease along a sequence (weights only move forward).
        for _, b in batches:
            v = torch.where(b.versions >= 0, b.versions, torch.full_like(b.versions, 10**6))
            assert bool((v[:, 1:] >= v[:, :-1]).all())


def test_ppo_off_policy_takes_k_steps_per_generated_batch_and_starts_on_policy() -> None:
    recipe = micro_recipe(
        knobs={"pipeline": {"choice": "ppo_off_policy", "alternatives": {"ppo_off_policy": {"k": 2}}}}
    )
    tr = Trainer(recipe, seed=0)
    assert isinstance(tr.schedule, PPOOffPolicy)
    first = tr.next_batch()
    assert first is not None
    # Minibatch = half the prompts (k=2) of one frozen-policy batch.
    assert len(set(first.meta["group"])) == 1 and first.tokens.shape[0] == 4
    with torch.no_grad():
        logp = tr.token_logprobs(first, torch.arange(first.tokens.shape[0]))
    m = first.mask.bool()
    rho = (logp[m] - first.logp[m]).exp()
    # Step 0: behaviour == current policy, up to the bf16 engine's rounding (generation/hf.py).
    assert torch.allclose(rho, torch.ones_like(rho), atol=1e-2)
    assert float((rho - 1).abs().max()) > 1e-5  # ... which is really there
    tr.train_step(first)
    _run(tr, 5)
    assert tr.step == 6 and tr.schedule.batches_generated == 3  # k=2 steps per batch
    assert tr.max_lag == 1  # the second minibatch is one step stale, never more
